"""PEP 751 read/write and the requirements export, on the committed smoke locks and uv's raw output."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from megacpp_env.lock.outputs import export_header
from megacpp_env.lock.pylock import LockFormatError, read_pylock, read_pylock_text, render_pylock
from megacpp_env.lock.reqtxt import read_requirements, render_requirements

ROOT = Path(__file__).resolve().parent.parent
SMOKE = sorted((ROOT / "locks").glob("pylock.smoke-*.toml"))
RAW = Path(__file__).parent / "data" / "locks" / "torch-aarch64" / "pylock.torch2130.toml"


def test_smoke_locks_are_committed_for_both_platforms():
    assert [p.name for p in SMOKE] == ["pylock.smoke-linux-amd64.toml", "pylock.smoke-linux-arm64.toml"]


@pytest.mark.parametrize("path", SMOKE, ids=lambda p: p.name)
def test_committed_lock_round_trips_byte_for_byte(path):
    assert render_pylock(read_pylock(path)) == path.read_text()


@pytest.mark.parametrize("path", SMOKE, ids=lambda p: p.name)
def test_committed_export_matches_lock(path):
    lock = read_pylock(path)
    from megacpp_env import layout

    target, platform = layout.parse_lock_name(path.name)
    export = layout.requirements_export_path(ROOT, target, platform)
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


# ---- lock file names uv and pip accept (issue 12, class 10) --------------------------------------------


def _installable_lock(tmp_path, name):
    """A PEP 751 lock (our writer) of two real wheels served over file://, at ``locks/<name>``."""
    import sys

    from megacpp_env.fsutil import sha256_file
    from megacpp_env.lock.pylock import Artifact, Lock, LockedPackage
    from tests.fixtures.snapshot import make_wheel

    wheels = tmp_path / "wheels"
    wheels.mkdir(exist_ok=True)
    pkgs = []
    for dist, version in (("alpha_pkg", "1.0"), ("beta-pkg", "2.0")):
        whl = make_wheel(wheels, dist, version, {f"{dist.replace('-', '_')}.py": "X = 1\n"})
        art = Artifact(kind="wheel", url=whl.as_uri(), sha256=sha256_file(whl), size=whl.stat().st_size)
        pkgs.append(LockedPackage(name=dist.replace("_", "-"), version=version, artifacts=(art,)))
    path = tmp_path / "locks" / name
    path.parent.mkdir(exist_ok=True)
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    path.write_text(render_pylock(Lock(packages=tuple(pkgs), requires_python=f">={py}")))
    return path


def _venv(tmp_path):
    import subprocess
    import sys

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


def test_lock_names_are_pep751_names_and_uv_installs_from_them(tmp_path):
    import subprocess

    from megacpp_env import layout
    from megacpp_env.uv import uv_executable

    for target, platform in (("smoke", "linux/amd64"), ("gb10", "linux/arm64"), ("a_b", "linux/amd64")):
        name = layout.lock_name(target, platform)
        assert layout.parse_lock_name(name) == (target, platform)
        stem = name.removeprefix("pylock.").removesuffix(".toml")
        assert stem and "." not in stem  # PEP 751: pylock.<name>.toml, <name> without dots
    path = _installable_lock(tmp_path, layout.lock_name("smoke", "linux/amd64"))
    py = _venv(tmp_path)
    uv = [uv_executable(), "pip", "install", "--offline", "--no-cache", "--python", str(py)]
    done = subprocess.run([*uv, "-r", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    check = subprocess.run([str(py), "-c", "import alpha_pkg, beta_pkg"], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr
    old = path.with_name("pylock.smoke.linux-amd64.toml")  # the old name: uv refuses it
    old.write_text(path.read_text())
    refused = subprocess.run([*uv, "-r", str(old)], capture_output=True, text=True, check=False)
    assert refused.returncode != 0 and "not a valid PEP 751 filename" in refused.stderr


@pytest.mark.network
def test_pip_installs_from_the_lock_file_name(tmp_path):
    """pip (>= 25.1 reads pylock files, experimentally) installs from the renamed lock. Network: pip
    itself comes from PyPI; the locked wheels come from file:// URLs."""
    import subprocess

    from megacpp_env import layout
    from megacpp_env.uv import uv_executable

    path = _installable_lock(tmp_path, layout.lock_name("smoke", "linux/amd64"))
    py = _venv(tmp_path)
    subprocess.run([uv_executable(), "pip", "install", "--python", str(py), "pip>=25.1"], check=True)
    done = subprocess.run(
        [str(py), "-m", "pip", "install", "--no-index", "-r", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert subprocess.run([str(py), "-c", "import alpha_pkg, beta_pkg"], check=False).returncode == 0


def _lock_with(text: str):
    from megacpp_env.lock.pylock import Artifact, Lock, LockedPackage, LockMeta

    wheel = Artifact(
        kind="wheel",
        url="https://files.example/x/attrs-25.4.0-py3-none-any.whl",
        sha256="a" * 64,
        size=10,
        upload_time="2026-03-19T14:22:23Z",
    )
    pkg = LockedPackage(name="attrs", version="25.4.0", marker='python_version >= "3.11"', artifacts=(wheel,))
    meta = LockMeta(target="t", command=f"megacpp-env lock {text}", requirements=(f"attrs  # {text}",))
    return Lock(packages=(pkg,), requires_python=">=3.11", created_by=f"me {text}", meta=meta)


def test_control_characters_and_del_survive_the_writer():
    """The old writer escaped with json.dumps, which leaves DEL raw: invalid TOML. Every control
    character now round-trips as TOML (the tree tomllib reads back is the tree written)."""
    from megacpp_env.lock.pylock import pylock_document
    from megacpp_env.tomlwrite import dumps

    text = "".join(chr(c) for c in range(0x20)) + "\x7f" + '"\\'
    doc = pylock_document(_lock_with(text))
    parsed = tomllib.loads(dumps(doc))
    assert parsed["tool"]["megacpp-env"]["command"] == f"megacpp-env lock {text}"
    assert parsed["tool"]["megacpp-env"]["requirements"] == [f"attrs  # {text}"]
    assert parsed["created-by"] == f"me {text}"
    assert parsed == tomllib.loads(dumps(parsed))


def test_writer_output_is_read_back_equal():
    lock = _lock_with("plain")
    again = read_pylock_text(render_pylock(lock))
    assert (again.packages, again.meta, again.requires_python) == (lock.packages, lock.meta, lock.requires_python)


def test_a_lock_packaging_refuses_is_not_written():
    """Validated on write as on read: a wheel whose file name names another package is refused
    by packaging.pylock before any text leaves the writer."""
    from dataclasses import replace

    lock = _lock_with("x")
    bad = replace(lock.packages[0], name="other")
    with pytest.raises(LockFormatError, match=r"<lock being written>: packages\[0\]"):
        render_pylock(replace(lock, packages=(bad,)))


def test_empty_lock_has_packages_key():
    from megacpp_env.lock.pylock import Lock

    text = render_pylock(Lock(packages=()))
    assert tomllib.loads(text) == {"lock-version": "1.0", "created-by": "megacpp-env", "packages": []}
