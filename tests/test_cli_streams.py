"""Every verb with a standard stream closed (``>&-``, ``2>&-``) or full (``>/dev/full``), run as the
program runs (``python -m megacpp_env``, a real subprocess whose descriptor is closed before exec).

The rule, checked against the same verb with its streams open: a verb whose result goes to a file
finishes it; one whose result (anything it writes to stdout) has nowhere to go exits 1 with one line
on stderr; a closed stderr changes neither stdout nor the exit status; never a traceback (exit 3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from megacpp_env.cli import VERBS
from tests.fixtures.spec import REPO_ROOT

SPEC = str(REPO_ROOT / "stack.yaml")
LOST = "cannot write the result to standard output"


def _argvs(tmp: Path) -> dict[str, list[str]]:
    """One command line per verb: a real result where one is cheap here, else the verb's error path."""
    snap = tmp / "snap.json"
    golden = tmp / "golden"
    return {
        "check": ["check"],
        "facts": ["facts", "show", "megacpp_smoke_ext"],
        "explain": ["explain", "GB001"],
        "targets": ["targets"],
        "schema": ["schema"],
        "show": ["show", "smoke"],
        "render": ["render", "--check"],
        "lock": ["lock", "check", "smoke"],
        "gate": ["gate", "--base", "HEAD"],
        "mirror": ["mirror", "nope", "--to", str(tmp / "m")],
        "mirror-artifacts": ["mirror-artifacts", "nope", "--to", str(tmp / "m")],
        "mirror-sources": ["mirror-sources", "--to", str(tmp / "ms"), "nope"],
        "checkout": ["checkout", "nope"],
        "verify-checkout": ["verify-checkout", str(tmp)],
        "overlay": ["overlay", "status", "smoke-ext", "--checkout", str(tmp / "none")],
        "build-source": ["build-source", "megacpp_smoke_ext", "--target", "smoke", "--dry-run"],
        "build": ["build", "smoke", "--dry-run"],
        "pin-base": ["pin-base", "smoke", "--help"],
        "sbom": ["sbom", "smoke"],
        "verify-image": ["verify-image", "img:1"],
        "snapshot": ["snapshot", "-o", str(snap), "--golden", "g", "--golden-dir", str(golden)],
        "diff": ["diff", str(snap), str(snap)],
        "doctor": ["doctor", "smoke", "--snapshot", str(snap)],
        "completion": ["completion", "bash"],
        "reproduce": ["reproduce", "nope", "--venv", str(tmp / "v"), "--checkouts", str(tmp / "c")],
        "run": [
            "run",
            "--golden",
            "g",
            "--golden-dir",
            str(golden),
            "--record",
            str(tmp / "runs.jsonl"),
            "--",
            sys.executable,
            "-c",
            "pass",
        ],
        "bisect-check": ["bisect-check", "g", "--golden-dir", str(golden)],
    }


def _run(argv: list[str], close: tuple[int, ...] = (), full: bool = False) -> subprocess.CompletedProcess[str]:
    def closing() -> None:
        for fd in close:
            os.close(fd)

    env = {**os.environ, "MEGACPP_DOCKER": "/bin/false", "MEGACPP_ENV_SPEC": SPEC}
    out = open(os.devnull, "w") if full else subprocess.PIPE  # noqa: SIM115 (closed below)
    try:
        if full:
            out.close()
            out = open("/dev/full", "w")  # noqa: SIM115
        return subprocess.run(
            [sys.executable, "-m", "megacpp_env", *argv], cwd=REPO_ROOT, env=env, stdout=out,
            stderr=subprocess.PIPE, text=True, check=False, timeout=300, preexec_fn=closing if close else None,
        )  # fmt: skip
    finally:
        if out is not subprocess.PIPE:
            out.close()  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def argvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    tmp = tmp_path_factory.mktemp("streams")
    out = _argvs(tmp)
    assert _run(out["snapshot"]).returncode == 0  # the snapshot and golden the later verbs read
    return out


def test_every_verb_has_a_command_line_here(argvs: dict[str, list[str]]) -> None:
    assert sorted(argvs) == sorted(VERBS)


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_closed_or_full_stdout_is_an_error_only_when_the_verb_had_a_result(
    verb: str, argvs: dict[str, list[str]]
) -> None:
    argv = argvs[verb]
    opened = _run(argv)
    assert opened.returncode != 3 and "Traceback" not in opened.stderr, opened.stderr
    for closed in (_run(argv, close=(1,)), _run(argv, full=True)):
        assert "Traceback" not in closed.stderr, closed.stderr
        if opened.stdout:
            assert closed.returncode == (1 if verb != "bisect-check" else 128), closed.stderr
            assert LOST in closed.stderr and closed.stderr.count("\n") <= 2, closed.stderr
        else:
            assert closed.returncode == opened.returncode, closed.stderr
            assert LOST not in closed.stderr


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_a_closed_stderr_changes_neither_stdout_nor_the_exit_status(verb: str, argvs: dict[str, list[str]]) -> None:
    argv = argvs[verb]
    opened = _run(argv)
    closed = _run(argv, close=(2,))
    assert closed.returncode == opened.returncode
    if verb not in ("snapshot", "doctor", "run", "bisect-check", "diff"):  # these name a time or a digest
        assert closed.stdout == opened.stdout
    assert "Traceback" not in closed.stdout and "error:" not in closed.stdout


def test_a_result_that_goes_to_a_file_is_finished_with_both_streams_closed(tmp_path: Path) -> None:
    sbom = tmp_path / "sbom.json"
    done = _run(["sbom", "smoke", "--output", str(sbom)], close=(1, 2))
    assert done.returncode == 0 and sbom.read_text().startswith("{")
    snap = tmp_path / "snap.json"
    done = _run(["-q", "snapshot", "-o", str(snap)], close=(1, 2))
    assert done.returncode == 0 and snap.read_text().startswith("{")


def test_no_file_the_run_opens_takes_a_closed_descriptor(tmp_path: Path) -> None:
    """With stdout closed, a child that writes to its stdout must not write into a file the run opened
    (the descriptor 1 the closed stream freed): ``run`` starts the user's command with stdout as is."""
    golden = tmp_path / "golden"
    assert (
        _run(
            ["-q", "snapshot", "-o", str(tmp_path / "s.json"), "--golden", "g", "--golden-dir", str(golden)]
        ).returncode
        == 0
    )
    record = tmp_path / "runs.jsonl"
    argv = ["run", "--golden", "g", "--golden-dir", str(golden), "--record", str(record), "--",
            sys.executable, "-c", "print('CHILD' + '-OUTPUT' * 100)"]  # fmt: skip
    _run(argv, close=(1,))
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert b"CHILD-OUTPUT" not in path.read_bytes(), path


def test_a_pipe_whose_reader_went_away_is_not_an_error() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "megacpp_env", "completion", "bash"], cwd=REPO_ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0 and err == "", err


def test_help_with_stdout_closed_says_so() -> None:
    done = _run(["--help"], close=(1,))
    assert done.returncode == 1 and LOST in done.stderr and "Traceback" not in done.stderr
