"""README's install commands ("Install and use it anywhere"), each run as written: from a copy of the
working tree made into a git clone, offline from the wheelhouse (tests/fixtures/install.py), every one
in its own throwaway HOME and tool directories. The git URL is the one substitution: this clone's
``git+file://`` URL for the repository's public one. Then, from that `uv tool install`, with no venv
active, `snapshot` and `doctor` inspect the first python3 on PATH and say which and why."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from uv import find_uv_bin

from megacpp_env import __version__
from tests.fixtures.install import copy_tree, fresh_venv, offline_env

REPO = Path(__file__).resolve().parent.parent
PUBLIC_URL = "git+https://github.com/megacpp/megacpp-env"


def readme_install_lines() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Install and use it anywhere", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert block, "README.md: no ```sh block under 'Install and use it anywhere'"
    lines = [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line]


def test_the_readme_offers_a_clone_a_git_url_and_a_wheel_and_no_index_name():
    lines = readme_install_lines()
    assert "uv tool install ." in lines and "pipx install ." in lines and "python -m pip install ." in lines
    assert f"uv tool install {PUBLIC_URL}" in lines
    assert f"uv build && uv tool install ./dist/megacpp_env-{__version__}-py3-none-any.whl" in lines
    assert not any(line.endswith(" megacpp-env") for line in lines)  # on no index: that would fail


@pytest.fixture(scope="module")
def clone(tmp_path_factory, wheelhouse) -> Path:
    """The working tree's files as a git repository (what `git clone` of this commit gives)."""
    del wheelhouse  # skips (or fails under CI) without it, before any copying
    src = copy_tree(tmp_path_factory.mktemp("clone") / "megacpp-env")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "init.defaultBranch=main"]
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-gpg-sign", "-m", "clone"]):
        subprocess.run([*git, *argv], cwd=src, check=True, capture_output=True)
    return src


def _tool_env(wheelhouse: Path, home: Path, *path_first: Path) -> dict[str, str]:
    bins = [home / "bin", *path_first, Path(find_uv_bin()).parent]
    base_path = os.environ.get("PATH", "")
    return offline_env(
        wheelhouse,
        HOME=str(home), UV_TOOL_DIR=str(home / "uv-tools"), UV_TOOL_BIN_DIR=str(home / "bin"),
        UV_CACHE_DIR=str(home / "uv-cache"), PIPX_HOME=str(home / "pipx"), PIPX_BIN_DIR=str(home / "bin"),
        PIPX_MAN_DIR=str(home / "man"), XDG_DATA_HOME=str(home / "data"),
        PATH=os.pathsep.join([*map(str, bins), base_path]),
    )  # fmt: skip


def _run_line(line: str, *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{line}: {proc.stdout[-2000:]}{proc.stderr[-3000:]}"
    return proc


def _pipx_dir(tmp_path: Path) -> Path:
    """A directory with `pipx` (the dev extra's, run by this interpreter's venv) and nothing else."""
    pipx = shutil.which("pipx")
    assert pipx, "pipx not installed (the dev extra brings it)"
    (tmp_path / "pipx-bin").mkdir()
    (tmp_path / "pipx-bin" / "pipx").symlink_to(pipx)
    return tmp_path / "pipx-bin"


@pytest.mark.parametrize("line", readme_install_lines())
def test_each_readme_install_command_as_written(line, clone, wheelhouse, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    extra: list[Path] = []
    if line.startswith("python "):  # "into any venv": a fresh one, first on PATH, never activated
        extra.append(fresh_venv(tmp_path / "venv"))
    if line.startswith("pipx "):
        extra.append(_pipx_dir(tmp_path))
    env = _tool_env(wheelhouse, home, *extra)
    work = tmp_path / "clone"
    shutil.copytree(clone, work, symlinks=True)
    _run_line(line.replace(PUBLIC_URL, f"git+file://{work}"), cwd=work, env=env)
    exe = (tmp_path / "venv" / "bin" if extra and line.startswith("python ") else home / "bin") / "megacpp-env"
    version = subprocess.run([exe, "--version"], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert version.stdout == f"megacpp-env {__version__}\n", version.stderr


def test_a_uv_tool_install_inspects_python3_on_path_not_its_own_venv(clone, wheelhouse, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    user_bin = fresh_venv(tmp_path / "user-python")  # the user's python3: first on PATH, not activated
    env = _tool_env(wheelhouse, home, user_bin)
    env.pop("VIRTUAL_ENV", None)
    work = tmp_path / "clone"
    shutil.copytree(clone, work, symlinks=True)
    _run_line("uv tool install .", cwd=work, env=env)
    exe = str(home / "bin" / "megacpp-env")
    expected = str(user_bin / "python3")
    reason = "no virtual environment is active: the first python3 on PATH"
    hint = "pick another with --python PATH, or activate a virtual environment"

    snap = subprocess.run([exe, "snapshot", "--json", "--no-cache"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert snap.returncode == 0, snap.stderr[-2000:]
    host = json.loads(snap.stdout)["host"]
    assert (host["inspected_python"], host["inspected_python_reason"]) == (expected, reason)
    assert host["tool_python"].startswith(str(home / "uv-tools"))  # the tool itself runs in its own venv
    assert f"megacpp-env: inspected {expected} ({reason}); {hint}\n" in snap.stderr
    names = set(json.loads(snap.stdout)["facts"]["python"]["distributions"])  # keyed by name
    assert "megacpp-env" not in names  # the user's environment, not the tool's

    doctor = subprocess.run([exe, "doctor", "smoke", "--json", "--spec", str(work / "stack.yaml")], cwd=tmp_path,
                            env=env, capture_output=True, text=True, check=False)  # fmt: skip
    assert doctor.returncode in (0, 1), doctor.stderr[-2000:]
    assert json.loads(doctor.stdout)["inspected_python"] == {"path": expected, "reason": reason}
    assert f"megacpp-env: inspected {expected} ({reason}); {hint}\n" in doctor.stderr

    chosen = subprocess.run([exe, "snapshot", "--json", "--no-cache", "--python", host["tool_python"]],
                            cwd=tmp_path, env=env, capture_output=True, text=True, check=False)  # fmt: skip
    picked = json.loads(chosen.stdout)["host"]
    assert (picked["inspected_python"], picked["inspected_python_reason"]) == (
        host["tool_python"],
        "given with --python",
    )
    assert "megacpp-env" in set(json.loads(chosen.stdout)["facts"]["python"]["distributions"])  # the tool's venv
