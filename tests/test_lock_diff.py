"""lock diff: classification (unit), real uv fixture locks of a large stack, text/markdown/json output."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from megacpp_env.cli import main
from megacpp_env.lock import diff
from megacpp_env.lock.pylock import Artifact, Lock, LockedPackage, LockFormatError, Vcs
from megacpp_env.lock.reqtxt import read_requirements_text

DATA = Path(__file__).parent / "data" / "locks" / "torch-aarch64"
OLD, NEW = DATA / "pylock.torch2130.toml", DATA / "pylock.torch2141.toml"
OLD_TXT, NEW_TXT = DATA / "torch2130.aarch64.requirements.txt", DATA / "torch2141.aarch64.requirements.txt"


def pkg(name, version, *, sha="a" * 64, url=None, index="", marker="", direct=False, vcs=None):
    url = url or f"https://files.example/{name}-{version}-py3-none-any.whl"
    arts = () if vcs else (Artifact(kind="wheel", url=url, sha256=sha),)
    return LockedPackage(name=name, version=version, index=index, marker=marker, direct=direct, artifacts=arts, vcs=vcs)


def changes(old, new):
    d = diff.diff_locks(Lock(packages=tuple(old)), Lock(packages=tuple(new)), title="t")
    return {c.name: (c.kinds, c.level, c.old, c.new) for c in d.changes}


def test_classifies_every_kind():
    old = [
        pkg("gone", "1.0"),
        pkg("major", "1.9"),
        pkg("minor", "1.1.5"),
        pkg("patch", "1.1.5"),
        pkg("pre", "2.13.0.dev20261101+cu132"),
        pkg("down", "2.0"),
        pkg("rehash", "1.0", sha="b" * 64),
        pkg("moved", "1.0", index="https://pypi.org/simple"),
        pkg("marked", "1.0"),
        pkg("src", "", vcs=Vcs(type="git", url="https://git.example/src.git", commit="1" * 40)),
        pkg("same", "1.0"),
    ]
    new = [
        pkg("major", "2.0"),
        pkg("minor", "1.2.0"),
        pkg("patch", "1.1.6"),
        pkg("pre", "2.13.0"),
        pkg("down", "1.9"),
        pkg("rehash", "1.0", sha="c" * 64),
        pkg("moved", "1.0", index="https://download.pytorch.org/whl/nightly/cu132"),
        pkg("marked", "1.0", marker="platform_machine == 'aarch64'"),
        pkg("src", "", vcs=Vcs(type="git", url="https://git.example/src.git", commit="2" * 40)),
        pkg("same", "1.0"),
        pkg("new", "0.1"),
    ]
    assert changes(old, new) == {
        "gone": (("removed",), "", "1.0", ""),
        "new": (("added",), "", "", "0.1"),
        "major": (("upgraded",), "major", "1.9", "2.0"),
        "minor": (("upgraded",), "minor", "1.1.5", "1.2.0"),
        "patch": (("upgraded",), "patch", "1.1.5", "1.1.6"),
        "pre": (("upgraded",), "pre-release", "2.13.0.dev20261101+cu132", "2.13.0"),
        "down": (("downgraded",), "major", "2.0", "1.9"),
        "rehash": (("hashes-changed",), "", "1.0", "1.0"),
        "moved": (("index-changed",), "", "1.0", "1.0"),
        "marked": (("marker-changed",), "", "1.0", "1.0"),
        "src": (("commit-moved",), "", "111111111111", "222222222222"),
    }


def test_reupload_detail_names_the_file():
    d = diff.diff_locks(
        Lock(packages=(pkg("torch", "2.13.0", sha="b" * 64),)), Lock(packages=(pkg("torch", "2.13.0", sha="c" * 64),))
    )
    assert d.changes[0].details == (
        "re-uploaded torch-2.13.0-py3-none-any.whl: sha256 bbbbbbbbbbbb.. -> cccccccccccc..",
    )


def _versions(path):
    data = tomllib.loads(path.read_text())
    return {p["name"]: p["version"] for p in data["packages"]}


def test_large_real_stack_reports_every_changed_package():
    old, new = _versions(OLD), _versions(NEW)
    assert len(old) == 61  # the fixture really is the large stack
    expected = {n for n in old.keys() | new.keys() if old.get(n) != new.get(n)}
    d = diff.diff_locks(diff.read_any(OLD), diff.read_any(NEW), title="aarch64")
    assert {c.name for c in d.changes} == expected
    assert expected == {"torch", "triton", "nvidia-cudnn-cu13", "nvidia-nccl-cu13"}
    by = {c.name: c for c in d.changes}
    assert (by["torch"].kinds, by["torch"].level, by["torch"].old, by["torch"].new) == (
        ("upgraded",),
        "minor",
        "2.13.0",
        "2.14.1",
    )
    assert (by["nvidia-cudnn-cu13"].old, by["nvidia-cudnn-cu13"].new) == ("9.20.0.48", "9.24.0.43")
    assert d.unchanged == 57


def test_requirements_txt_with_hashes_reads_like_pylock():
    from_pylock = diff.diff_locks(diff.read_any(OLD), diff.read_any(NEW))
    from_txt = diff.diff_locks(diff.read_any(OLD_TXT), diff.read_any(NEW_TXT))
    summary = lambda d: {(c.name, c.kinds, c.level, c.old, c.new) for c in d.changes}  # noqa: E731
    assert summary(from_txt) == summary(from_pylock)
    txt = diff.read_any(OLD_TXT).by_name()
    pyl = diff.read_any(OLD).by_name()
    assert {n: p.version for n, p in txt.items()} == {n: p.version for n, p in pyl.items()}
    assert txt["accelerate"].direct and not txt["annotated-doc"].direct  # "# via -r in-2.13.0.txt"


def test_requirements_parser_handles_markers_vcs_and_options():
    text = (
        "--index-url https://example/simple\n"
        "numpy==2.4.6 ; platform_machine == 'x86_64' \\\n    --hash=sha256:" + "a" * 64 + "\n"
        "    # via -r requirements.in\n"
        "mylib @ git+https://git.example/mylib.git@" + "3" * 40 + "\n"
        "    # via numpy\n"
    )
    lock = read_requirements_text(text)
    numpy, mylib = lock.by_name()["numpy"], lock.by_name()["mylib"]
    assert (numpy.version, numpy.marker, numpy.hashes, numpy.direct) == (
        "2.4.6",
        'platform_machine == "x86_64"',
        frozenset({"a" * 64}),
        True,
    )
    assert mylib.vcs == Vcs(type="git", url="https://git.example/mylib.git", commit="3" * 40)


def test_markdown_direct_first_and_verdict_last(capsys):
    rc = main(["lock", "diff", str(OLD_TXT), str(NEW_TXT), "--format", "markdown"])
    out = capsys.readouterr().out
    assert rc == 0
    lines = out.strip().splitlines()
    assert lines[0] == f"### `{OLD_TXT} -> {NEW_TXT}`"
    assert lines[-1] == "Verdict: 4 package change(s)"
    rows = [ln for ln in lines if ln.startswith("| `")]
    assert rows[0].startswith("| `torch` | yes | upgraded (minor) | `2.13.0` | `2.14.1` |")
    assert rows[1].startswith("| `triton` | yes | upgraded (minor) | `3.7.1` | `3.8.0` |")
    assert [r.split("|")[2].strip() for r in rows] == ["yes", "yes", "", ""]


def test_json_and_text_formats(capsys):
    assert main(["lock", "diff", str(OLD), str(NEW), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["locks"][0]["counts"] == {"upgraded": 4}
    assert main(["lock", "diff", str(OLD), str(NEW)]) == 0
    out = capsys.readouterr().out
    assert "4 upgraded (57 unchanged)" in out.splitlines()[0]
    assert "torch" in out and "2.13.0 -> 2.14.1" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lock", "diff", "only-one"], "the following arguments are required: NEW"),
        (["lock", "diff"], "the following arguments are required: OLD, NEW"),
        (["lock", "diff", "a", "b", "c"], "unrecognized arguments: c"),
        (["lock", "diff", "a", "b", "--format", "html"], "argument --format: invalid choice: 'html'"),
        (["lock", "diff", "--check", "a", "b"], "unrecognized arguments: --check"),
    ],
)
def test_diff_usage_errors_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: megacpp-env lock diff ")
    assert f"megacpp-env lock diff: error: {message}" in err


def test_options_before_between_and_after_the_files(capsys):
    assert main(["lock", "diff", "--format", "markdown", str(OLD_TXT), str(NEW_TXT)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("Verdict: 4 package change(s)")
    assert main(["lock", "diff", "--json", str(OLD), "--format", "text", str(NEW)]) == 0
    assert json.loads(capsys.readouterr().out)["locks"][0]["counts"] == {"upgraded": 4}
    assert main(["lock", "diff", str(OLD), str(NEW), "--format", "markdown"]) == 0
    assert capsys.readouterr().out.startswith(f"### `{OLD} -> {NEW}`")


def test_unreadable_file_is_a_one_line_error(tmp_path, capsys):
    missing = tmp_path / "nonexist.toml"
    assert main(["lock", "diff", str(OLD), str(missing)]) == 1
    assert capsys.readouterr().err == f"megacpp-env lock: error: {missing}: no such file\n"
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00lock")
    assert main(["lock", "diff", str(binary), str(OLD)]) == 1
    assert capsys.readouterr().err == f"megacpp-env lock: error: {binary}: not UTF-8 text (byte 0xff at offset 0)\n"


def test_a_broken_toml_lock_is_a_toml_error_not_a_requirements_error(tmp_path, capsys):
    broken = tmp_path / "pylock.broken.toml"
    broken.write_text(OLD.read_text().replace('lock-version = "1.0"', "lock-version = 1.0.0", 1))
    assert main(["lock", "diff", str(broken), str(OLD)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"megacpp-env lock: error: {broken}: not valid TOML: ") and "requirement" not in err
    text = 'lock-version = "1.0"\ncreated-by = "me"\n[[packages]]\nname = "x"\nversion = "1"\nwheels = [{ url = "u" }]\n'
    with pytest.raises(LockFormatError, match=r"x\.toml: packages\[0\]\.wheels\[0\]"):
        diff.read_any_text(text, "x.toml")


def test_pylock_with_a_comment_header_and_no_packages_is_pep751(tmp_path):
    text = '# generated by hand\n# for the empty target\n\nlock-version = "1.0"\ncreated-by = "me"\n'
    lock = diff.read_any_text(text, "empty.toml")
    assert (lock.packages, lock.created_by) == ((), "me")
    full = diff.read_any(OLD)
    d = diff.diff_locks(lock, full)
    assert d.count("added") == 61 and d.unchanged == 0


def test_entries_split_by_marker_are_compared_one_by_one():
    x86, arm = "platform_machine == 'x86_64'", "platform_machine == 'aarch64'"
    old = Lock(packages=(pkg("numpy", "2.4.6", marker=x86), pkg("numpy", "2.5.5", marker=arm), pkg("six", "1.0")))
    new = Lock(packages=(pkg("numpy", "2.4.6", marker=x86), pkg("numpy", "2.5.6", marker=arm), pkg("six", "1.0")))
    assert set(old.by_key()) == {("numpy", x86), ("numpy", arm), ("six", "")}
    d = diff.diff_locks(old, new, title="t")
    assert [(c.name, c.marker, c.kinds, c.old, c.new) for c in d.changes] == [
        ("numpy", arm, ("upgraded",), "2.5.5", "2.5.6")
    ]
    assert d.unchanged == 2
    assert f"numpy ; {arm}" in diff.render([d], "text")
    assert f"| `numpy ; {arm}` |" in diff.render([d], "markdown")


def test_a_fifo_named_as_a_lock_is_refused_not_waited_on(tmp_path):
    """Issue 19: `lock diff OLD f.toml` blocked forever on a FIFO nobody writes."""
    import os
    import subprocess
    import sys

    old = tmp_path / "old.txt"
    old.write_text("")
    fifo = tmp_path / "f.toml"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "megacpp_env", "lock", "diff", str(old), str(fifo)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1, proc.stderr
    assert f"{fifo}: is a FIFO, not a regular file; refusing to read it" in proc.stderr
    assert "Traceback" not in proc.stderr
