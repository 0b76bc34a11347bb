"""Location-independent comparison: roots replaced at path boundaries only; RECORD digests that
ignore where a venv is but not what it holds; checkouts compared by what they are."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path

import pytest

from megacpp_env.repro import portable
from megacpp_env.repro.portable import Roots
from megacpp_env.snapshot.document import Snapshot
from tests.fixtures.snapshot import make_venv

ROOTS = Roots.of([("/data/venv", "{venv}"), ("/data/src/mamba", "{checkout:mamba}")])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/data/venv", "{venv}"),
        ("/data/venv/bin/python", "{venv}/bin/python"),
        ("file:///data/src/mamba/x.whl", "file://{checkout:mamba}/x.whl"),
        ("/data/venv/bin:/usr/bin:/data/src/mamba", "{venv}/bin:/usr/bin:{checkout:mamba}"),
        ("/data/venv2/bin", "/data/venv2/bin"),  # a longer name is another directory
        ("/x/data/venv", "/x/data/venv"),  # a suffix of another path is not the root
        ("/data/venv.old", "/data/venv.old"),
        ("no path at all", "no path at all"),
    ],
)
def test_roots_replace_whole_paths_only(text, expected):
    assert ROOTS.text(text) == expected
    if expected != text:
        assert ROOTS.resolve(expected) == text


def _record(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel_with_script(directory: Path) -> Path:
    """demo 1.0 with a data script (``#!python``: the installer writes the venv's interpreter)."""
    files = {
        "demo/__init__.py": b"X = 1\n",
        "demo-1.0.data/scripts/demo-tool": b"#!python\nprint('tool')\n",
        "demo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\n",
        "demo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{k},{_record(v)},{len(v)}\n" for k, v in files.items()) + "demo-1.0.dist-info/RECORD,,\n"
    path = directory / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in {**files, "demo-1.0.dist-info/RECORD": record.encode()}.items():
            zf.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), data)
    return path


def test_record_digest_ignores_the_venv_location_but_not_the_files(tmp_path):
    wheel = _wheel_with_script(tmp_path)
    venvs = [make_venv(tmp_path / name) for name in ("one", "elsewhere")]
    for venv in venvs:
        venv.install(wheel)
    infos = [next(v.site.glob("demo-1.0.dist-info")) for v in venvs]
    assert (infos[0] / "RECORD").read_text() != (infos[1] / "RECORD").read_text()  # the shebang differs
    digests = [portable.record_digest(i, Roots.of([(str(v.root), "{venv}")])) for i, v in zip(infos, venvs, strict=True)]
    assert digests[0] == digests[1] != ""
    (venvs[1].root / "bin" / "demo-tool").write_text("#!/usr/bin/python3\nprint('tool')\n")
    changed = portable.record_digest(infos[1], Roots.of([(str(venvs[1].root), "{venv}")]))
    assert changed != digests[0]


def test_checkouts_compare_by_what_they_are_not_where(tmp_path):
    entry = {"has_git": True, "head": "a" * 40, "dirty": False, "diff_hash": "d", "untracked": 0,
             "untracked_hash": "u", "changed": [], "submodules": [], "remotes": {"origin": "/r/mamba.git"}}  # fmt: skip
    golden = Snapshot(facts={"checkouts": {"mamba": {**entry, "path": "/a/src/mamba", "source": "mamba_ssm",
                                                     "expected": "a" * 40, "overlay_status": {"state": "clean"}}}})  # fmt: skip
    live = Snapshot(facts={"checkouts": {"/b/src/mamba": {**entry, "path": "/b/src/mamba", "source": None}}})
    a = portable.comparable(golden, portable.roots_of(golden), {})
    b = portable.comparable(live, portable.roots_of(live), {})
    assert a == b == {"checkouts": {"{checkout:mamba}": dict(entry)}}
    moved = Snapshot(facts={"checkouts": {"/b/src/mamba": {**entry, "path": "/b/src/mamba", "head": "b" * 40}}})
    c = portable.comparable(moved, portable.roots_of(moved), {})
    report = portable.compare(golden, a, moved, c).report
    assert [f.key for f in report.findings if f.severity != "note"] == ["checkouts.{checkout:mamba}.head"]
