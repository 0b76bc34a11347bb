"""The uv floor (megacpp_env/uv.py UV_FLOOR): the oldest uv a real resolution works with, proven by
installing that uv and the release before it from PyPI into throwaway venvs and locking with each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from megacpp_env import uv
from megacpp_env.cli import main
from megacpp_env.lock.pylock import read_pylock
from tests.fixtures.index import write_lock_spec

REPO = Path(__file__).resolve().parent.parent
BEFORE_FLOOR = "0.12.0"  # the uv release before UV_FLOOR: it has no --prerelease-package


def test_the_floor_is_the_same_in_pyproject_the_tool_requirements_and_the_wrapper():
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    assert [str(Requirement(d).specifier) for d in deps if Requirement(d).name == "uv"] == [f">={uv.UV_FLOOR}"]
    lines = (REPO / ".ci" / "tool-requirements.in").read_text().splitlines()
    assert f"uv>={uv.UV_FLOOR}" in lines


def _uv_release(version: str, tmp_path: Path) -> Path:
    venv = tmp_path / f"uv-{version}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           f"uv=={version}"], capture_output=True, text=True, check=False)  # fmt: skip
    if proc.returncode != 0:
        pytest.skip(f"cannot install uv=={version} from the package index: {proc.stderr[-300:]}")
    return venv / "bin" / "uv"


@pytest.mark.network
def test_the_floor_uv_locks_and_the_release_before_it_is_refused_with_a_remedy(
    uv_offline_env, tmp_path, monkeypatch, capsys
):
    spec = write_lock_spec(tmp_path / "repo", uv_offline_env.nightly.url, stack='["torch<2.14", attrs]')
    floor = _uv_release(uv.UV_FLOOR, tmp_path)
    monkeypatch.setenv("MEGACPP_ENV_UV", str(floor))
    assert main(["lock", "resolve", "gpu", "--spec", str(spec)]) == 0, capsys.readouterr()
    out, err = capsys.readouterr()
    assert (  # the spec's toolchain pins uv 0.13.9: a warning with its remedy, not a failure
        f"warning: resolved with uv {uv.UV_FLOOR}; the toolchain pins uv 0.13.9 (a lock made with another uv may "
        "differ: pip install 'uv==0.13.9' in megacpp-env's environment, or point MEGACPP_ENV_UV at it)"
    ) in out + err
    lock = read_pylock(spec.parent / "locks" / "pylock.gpu-linux-arm64.toml")
    assert lock.by_name()["torch"].version == "2.13.0.dev20261101+cu132"  # --prerelease-package torch=allow
    assert uv.uv_version() == uv.UV_FLOOR

    old = _uv_release(BEFORE_FLOOR, tmp_path)
    raw = subprocess.run([str(old), "pip", "compile", "--prerelease-package", "torch=allow", "x.in"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert raw.returncode == 2 and "unexpected argument '--prerelease-package'" in raw.stderr  # why it is the floor
    monkeypatch.setenv("MEGACPP_ENV_UV", str(old))
    capsys.readouterr()
    assert main(["lock", "resolve", "gpu", "--spec", str(spec)]) != 0
    err = capsys.readouterr().err
    assert (
        f"{old} is uv {BEFORE_FLOOR}; megacpp-env needs uv >= {uv.UV_FLOOR} (it passes --prerelease-package, new in "
        f"uv {uv.UV_FLOOR}): upgrade the uv in megacpp-env's environment (pip install 'uv>={uv.UV_FLOOR}', "
        "or reinstall megacpp-env), or point MEGACPP_ENV_UV at a newer uv"
    ) in err
    assert "unexpected argument" not in err
