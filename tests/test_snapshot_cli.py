"""`snapshot` argument errors: each is one line and exit 1, reported before anything is collected
(the hash cache directory a snapshot would create stays absent)."""

from __future__ import annotations

import json
import os

import pytest

from megacpp_env.cli import main


@pytest.fixture
def cli(tmp_path, monkeypatch, snap_venv):
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    base = ["--spec", str(tmp_path / "none.yaml"), "--golden-dir", str(tmp_path / "golden")]
    return lambda *args: main(["snapshot", *base, *args])


def _nothing_collected(tmp_path):
    return not (tmp_path / "cache").exists()


def test_output_is_a_directory(cli, tmp_path, capsys, snap_venv):
    assert cli("--python", str(snap_venv.python), "-o", str(tmp_path)) == 1
    assert capsys.readouterr().err == (
        f"megacpp-env snapshot: error: --output: {tmp_path} is a directory; "
        f"name a file (e.g. {tmp_path / 'snapshot.json'})\n"
    )
    assert _nothing_collected(tmp_path)


def test_output_directory_missing(cli, tmp_path, capsys, snap_venv):
    out = tmp_path / "no" / "such" / "y.json"
    assert cli("--python", str(snap_venv.python), "-o", str(out)) == 1
    assert capsys.readouterr().err == (
        f"megacpp-env snapshot: error: --output: {out}: directory {out.parent} does not exist\n"
    )
    assert _nothing_collected(tmp_path)
    assert cli("--python", str(snap_venv.python), "-o", "/proc/x/y.json") == 1
    assert capsys.readouterr().err.endswith("directory /proc/x does not exist\n")


def test_output_directory_not_writable(cli, tmp_path, capsys, snap_venv):
    """A path no user can write, root included (CI runs as root): its parent is a regular file."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory\n")
    out = blocker / "sub" / "s.json"
    assert cli("--python", str(snap_venv.python), "-o", str(out)) == 1
    assert capsys.readouterr().err == f"megacpp-env snapshot: error: --output: {out}: {blocker} is not a directory\n"
    assert _nothing_collected(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    if os.access(ro, os.W_OK):  # root: permission bits do not stop it; the case above already did
        return
    assert cli("--python", str(snap_venv.python), "-o", str(ro / "s.json")) == 1
    assert capsys.readouterr().err.endswith(f"directory {ro} is not writable\n")


def test_output_is_written_atomically(cli, tmp_path, snap_venv):
    out = tmp_path / "s.json"
    assert cli("--python", str(snap_venv.python), "-o", str(out)) == 0
    assert json.loads(out.read_text())["schema"] == "megacpp-env/snapshot"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".s.json")] == []  # no temp file left


def test_python_that_is_not_an_executable(cli, tmp_path, capsys, snap_venv):
    out = tmp_path / "s.json"
    assert cli("--python", "/nonexistent", "-o", str(out)) == 1
    assert capsys.readouterr().err == "megacpp-env snapshot: error: --python: /nonexistent: not an executable file\n"
    assert not out.exists() and _nothing_collected(tmp_path)
    plain = tmp_path / "python"
    plain.write_text("#!/bin/sh\n")  # not executable
    assert cli("--python", str(plain)) == 1
    assert f"--python: {plain}: not an executable file" in capsys.readouterr().err


def test_missing_golden_fails_before_the_snapshot(cli, tmp_path, capsys, snap_venv):
    out = tmp_path / "s.json"
    assert cli("--python", str(snap_venv.python), "-o", str(out), "--check-golden", "nope") == 1
    assert capsys.readouterr().err == (
        f"megacpp-env snapshot: error: no golden snapshot 'nope' in {tmp_path / 'golden'} "
        "(store one with --golden nope)\n"
    )
    assert not out.exists() and _nothing_collected(tmp_path)
    assert cli("--python", str(snap_venv.python), "--golden", "../escape") == 1
    assert _nothing_collected(tmp_path)


def test_ignore_and_paths_are_repeatable(tmp_path):
    from megacpp_env.cli import build_parser

    argv = ["snapshot", "--ignore", "gpu", "--ignore", "env.NCCL_*", "--paths", "a", "b", "--paths", "c"]
    args = build_parser(argv).parse_args(argv)
    assert args.ignore == ["gpu", "env.NCCL_*"]
    assert [str(p) for p in args.paths] == ["a", "b", "c"]
    argv = ["doctor", "--paths", "a", "--paths", "b", "smoke"]
    args = build_parser(argv).parse_args(argv)
    assert (args.target, [str(p) for p in args.paths]) == ("smoke", ["a", "b"])


def test_timings_say_where_the_time_went(cli, tmp_path, capsys, snap_venv):
    """``--timings``: process start to snapshot, each collector (the slowest named as the critical
    path), the integrity counts and the whole process, on stderr; the document is unchanged."""
    from megacpp_env.snapshot import registry

    out = tmp_path / "snap.json"
    assert cli("--timings", "-o", str(out)) == 0
    err = capsys.readouterr().err
    doc = json.loads(out.read_text())
    areas = {k: v for k, v in doc["timing"].items() if isinstance(v, (int, float)) and k not in ("total", "probe")}
    assert f"(critical path: {max(sorted(areas), key=lambda k: areas[k])})" in err  # a tie: the first by name
    assert all(f"    {area} " in err for area in registry.areas())
    assert "process start to snapshot" in err and "process, all told" in err and "integrity: " in err


def test_the_program_exits_without_teardown_and_loses_no_output(tmp_path, snap_venv):
    """``python -m megacpp_env snapshot`` (``cli.entry``) skips the interpreter's teardown: the whole
    JSON document still reaches a pipe, the file is written, the exit status is the verb's, and no
    child is left behind (the NVML child it started is reaped)."""
    import subprocess
    import sys

    env = {**os.environ, "MEGACPP_ENV_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("VIRTUAL_ENV", None)
    argv = [sys.executable, "-m", "megacpp_env", "snapshot", "--python", str(snap_venv.python)]
    done = subprocess.run(
        [*argv, "-o", str(tmp_path / "s.json"), "--json"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed == json.loads((tmp_path / "s.json").read_text())
    assert printed["facts"]["python"]["distributions"]
    bad = subprocess.run(
        [*argv[:-1], str(tmp_path / "missing"), "-o", str(tmp_path / "t.json")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 1 and "not an executable file" in bad.stderr
    ps = subprocess.run(["ps", "-eo", "ppid,args"], capture_output=True, text=True, check=True).stdout
    assert "nvml.read" not in ps  # no NVML child outlived its snapshot
