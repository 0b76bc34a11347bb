"""The wheel is reproducible: with SOURCE_DATE_EPOCH set, `pip wheel` of the tree and `uv build`
(sdist, then the wheel from it) give the same bytes, and the epoch is what the entries carry.

setuptools' bdist_wheel takes every entry's time from SOURCE_DATE_EPOCH and its mode from the file.
A checkout's modes follow its umask (git writes 0644/0755 under umask 022; a group-writable umask
gives 0664), while an sdist stores them as they were; the tree here is checked out the way git
does under umask 022, which is what CI and a user's clone have.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path

from uv import find_uv_bin

from tests.fixtures.install import REPO_ROOT, copy_tree, offline_env

EPOCH = 1700000000


def _checkout(dest: Path) -> Path:
    copy_tree(dest)
    out = subprocess.run(["git", "ls-files", "-s", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    executable = {e.split("\t", 1)[1] for e in out.decode().split("\0") if e.startswith("100755")}
    for path in dest.rglob("*"):
        if path.is_file():
            path.chmod(0o755 if path.relative_to(dest).as_posix() in executable else 0o644)
    return dest


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_pip_wheel_and_uv_build_give_the_same_wheel(tmp_path, wheelhouse):
    src = _checkout(tmp_path / "megacpp-env")
    env = offline_env(wheelhouse, SOURCE_DATE_EPOCH=str(EPOCH), UV_CACHE_DIR=str(tmp_path / "uv-cache"))
    pip_out, uv_out = tmp_path / "pip", tmp_path / "uv"
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(pip_out), str(src)]
    proc = subprocess.run(pip, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = subprocess.run([find_uv_bin(), "build", "-q", "--out-dir", str(uv_out), str(src)], env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (by_pip,), (by_uv,) = pip_out.glob("*.whl"), uv_out.glob("*.whl")
    assert by_pip.name == by_uv.name
    assert _sha(by_pip) == _sha(by_uv)
    stamp = datetime.fromtimestamp(EPOCH, tz=UTC).timetuple()[:6]
    with zipfile.ZipFile(by_pip) as whl:
        assert {info.date_time for info in whl.infolist()} == {stamp}  # the epoch, not the files' mtimes
