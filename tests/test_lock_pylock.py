"""PEP 751 read/write and the requirements export, on the committed smoke locks and uv's raw output."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from megacpp_env.lock.outputs import export_header
from megacpp_env.lock.pylock import LockFormatError, read_pylock, read_pylock_text, render_pylock
from megacpp_env.lock.reqtxt import read_requirements, render_requirements

ROOT = Path(__file__).resolve().parent.parent
SMOKE = sorted((ROOT / "locks").glob("pylock.smoke.*.toml"))
RAW = Path(__file__).parent / "data" / "locks" / "torch-aarch64" / "pylock.torch2130.toml"


def test_smoke_locks_are_committed_for_both_platforms():
    assert [p.name for p in SMOKE] == ["pylock.smoke.linux-amd64.toml", "pylock.smoke.linux-arm64.toml"]


@pytest.mark.parametrize("path", SMOKE, ids=lambda p: p.name)
def test_committed_lock_round_trips_byte_for_byte(path):
    assert render_pylock(read_pylock(path)) == path.read_text()


@pytest.mark.parametrize("path", SMOKE, ids=lambda p: p.name)
def test_committed_export_matches_lock(path):
    lock = read_pylock(path)
    target, slug = path.name.split(".")[1:3]
    export = ROOT / "locks" / f"{target}.{slug}.requirements.txt"
    assert render_requirements(lock, header=export_header(lock, f"locks/{export.name}")) == export.read_text()
    exported = read_requirements(export)
    assert {p.name: (p.version, p.hashes) for p in exported.packages} == {
        p.name: (p.version, p.hashes) for p in lock.packages
    }


def test_uv_output_survives_our_writer():
    lock = read_pylock(RAW)
    again = read_pylock_text(render_pylock(lock))
    assert again.packages == lock.packages
    data = tomllib.loads(render_pylock(lock))  # valid TOML, PEP 751 keys
    assert data["lock-version"] == "1.0" and data["packages"][0]["wheels"][0]["hashes"]["sha256"]


def test_not_a_lock_is_an_error():
    with pytest.raises(LockFormatError, match="not a PEP 751 lock"):
        read_pylock_text("[project]\nname = 'x'\n", path="x.toml")
    with pytest.raises(LockFormatError, match="not valid TOML"):
        read_pylock_text("lock-version = \n", path="y.toml")


def test_export_refuses_unhashable_entries():
    from megacpp_env.lock.pylock import Lock, LockedPackage

    with pytest.raises(LockFormatError, match="cannot export"):
        render_requirements(Lock(packages=(LockedPackage(name="x", version="1"),)))
