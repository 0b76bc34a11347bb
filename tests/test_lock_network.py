"""Lock the real smoke target against PyPI for both platforms (network; run in CI)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from megacpp_env.cli import main
from megacpp_env.lock.pylock import read_pylock

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.network


def test_smoke_locks_from_pypi_for_both_platforms(tmp_path, capsys, monkeypatch):
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL"):
        monkeypatch.delenv(var, raising=False)
    shutil.copy(ROOT / "stack.yaml", tmp_path / "stack.yaml")
    shutil.copytree(ROOT / "facts", tmp_path / "facts")  # the sources' own requirements
    rc = main(["lock", "resolve", "smoke", "--spec", str(tmp_path / "stack.yaml")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "smoke (platforms): consistent" in out
    amd = read_pylock(tmp_path / "locks" / "pylock.smoke-linux-amd64.toml")
    arm = read_pylock(tmp_path / "locks" / "pylock.smoke-linux-arm64.toml")
    assert {p.name: p.version for p in amd.packages} == {p.name: p.version for p in arm.packages}
    assert all(p.index == "https://pypi.org/simple" for p in amd.packages)
    assert any("x86_64" in a.filename for p in amd.packages for a in p.artifacts)
    assert any("aarch64" in a.filename for p in arm.packages for a in p.artifacts)
    assert not any("aarch64" in a.filename for p in amd.packages for a in p.artifacts)
    # the inputs are the committed locks' inputs: a fresh lock is checkable against the repo's spec
    committed = read_pylock(ROOT / "locks" / "pylock.smoke-linux-amd64.toml")
    assert amd.inputs_hash == committed.inputs_hash
    assert main(["lock", "check", "smoke", "--spec", str(tmp_path / "stack.yaml")]) == 0
