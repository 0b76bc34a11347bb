"""Which interpreter a snapshot inspects, decided in the snapshot's plan: ``--python``, the active venv,
else the project's ``.venv`` as uv finds it (the spec's directory, else the project root of the working
directory, ``$UV_PROJECT_ENVIRONMENT`` honoured), else the first python3 on PATH; ``snapshot`` and
``doctor`` say which and why."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from megacpp_env.cli import main
from megacpp_env.snapshot import plan as plan_mod
from megacpp_env.snapshot.options import SnapshotOptions
from tests.fixtures.snapshot import make_venv
from tests.fixtures.spec import REPO_ROOT


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "sub" / "dir").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\nversion = '0'\n")
    return root


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    return {**env, **extra}


def _resolve(cwd: Path, monkeypatch, spec: Path | None = None, **environ: str):
    monkeypatch.chdir(cwd)
    return plan_mod.resolve(SnapshotOptions(environ=_env(**environ), spec_path=spec, use_cache=False)).interpreter


def test_the_project_root_venv_as_uv_finds_it(project, monkeypatch):
    venv = make_venv(project / ".venv")
    chosen = _resolve(project / "sub" / "dir", monkeypatch)
    assert chosen.path == str(venv.python)
    assert chosen.reason == (
        f"no virtual environment is active: the project's .venv, in the project root {project} (pyproject.toml), "
        "as uv finds it"
    )


def test_uv_project_environment_names_another_directory(project, monkeypatch):
    venv = make_venv(project / "envs" / "dev")
    make_venv(project / ".venv")
    assert _resolve(project, monkeypatch, UV_PROJECT_ENVIRONMENT="envs/dev").path == str(venv.python)


def test_the_spec_directory_comes_first(project, tmp_path, monkeypatch):
    make_venv(project / ".venv")
    elsewhere = tmp_path / "stack"
    elsewhere.mkdir()
    spec_venv = make_venv(elsewhere / ".venv")
    chosen = _resolve(project, monkeypatch, spec=elsewhere / "stack.yaml")
    assert chosen.path == str(spec_venv.python) and f"the spec's directory {elsewhere}" in chosen.reason


def test_an_active_venv_and_python_win(project, tmp_path, monkeypatch):
    make_venv(project / ".venv")
    active = make_venv(tmp_path / "active")
    assert _resolve(project, monkeypatch, VIRTUAL_ENV=str(active.root)).path == str(active.python)


def test_no_project_venv_falls_back_to_python3_on_path(project, monkeypatch):
    chosen = _resolve(project, monkeypatch)  # a project root without .venv
    assert chosen.reason == "no virtual environment is active: the first python3 on PATH"


def test_snapshot_and_doctor_inspect_the_project_venv_and_say_so(project, monkeypatch, capsys, tmp_path):
    venv = make_venv(project / ".venv")
    (project / "stack.yaml").write_text((REPO_ROOT / "stack.yaml").read_text())
    monkeypatch.chdir(project / "sub")
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.delenv("MEGACPP_ENV_SPEC", raising=False)
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["snapshot", "--json", "--no-cache"]) == 0
    out, err = capsys.readouterr()
    host = json.loads(out)["host"]
    assert host["inspected_python"] == str(venv.python)
    assert "the project's .venv, in the spec's directory" in host["inspected_python_reason"]
    assert f"megacpp-env: inspected {venv.python} (no virtual environment is active: the project's .venv" in err
    assert main(["doctor", "smoke", "--json"]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert report["inspected_python"]["path"] == str(venv.python)


def test_an_environment_with_no_distribution_is_snapshotted(tmp_path, monkeypatch, capsys):
    """A fresh `uv venv` has no distribution at all (not even pip): the snapshot is complete, not an
    AssertionError of the python area."""
    venv = make_venv(tmp_path / "empty")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["snapshot", "--json", "--no-cache", "--python", str(venv.python), "--spec", str(tmp_path / "none")]) == 0
    assert json.loads(capsys.readouterr().out)["facts"]["python"]["distributions"] == {}


def test_the_readme_shows_uv_run():
    text = (REPO_ROOT / "README.md").read_text()
    assert "uv run megacpp-env snapshot" in text and "the project's `.venv` as uv" in text
