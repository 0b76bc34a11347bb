"""Which interpreter a snapshot inspects: ``--python``, the active virtual environment's, the
project's ``.venv`` as uv finds it, or the first ``python3`` on ``PATH``. Import-light: the snapshot
verb asks before it imports the rest."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from megacpp_env.errors import SpecError


def check_interpreter(python: str) -> str:
    """An explicitly given ``--python`` must be an executable file (a bare name is looked up on
    ``PATH``); raises ``SpecError`` before anything is collected."""
    found = shutil.which(python)
    if found is None:
        raise SpecError(f"{python}: not an executable file", key="--python")
    return python if os.sep in python else found


PICK_ANOTHER = "pick another with --python PATH, or activate a virtual environment"


@dataclass(frozen=True, kw_only=True, slots=True)
class Interpreter:
    path: str
    reason: str  # why this one was inspected


def _venv_python(venv: Path) -> Path | None:
    candidate = venv / "bin" / "python"
    return candidate if candidate.exists() else None


def project_root(cwd: Path) -> Path | None:
    """The project root as uv finds it: the nearest directory, ``cwd`` or a parent, holding pyproject.toml."""
    here = cwd.absolute()
    return next((d for d in (here, *here.parents) if (d / "pyproject.toml").is_file()), None)


def project_venv(spec_dir: Path | None, cwd: Path, environ: Mapping[str, str]) -> tuple[Path, str] | None:
    """The project's virtual environment when none is active, as uv finds it: ``.venv`` in the directory
    holding the spec, else the project root's (``$UV_PROJECT_ENVIRONMENT``, relative to the root, or
    ``.venv``); (its python, where it was found)."""
    if spec_dir is not None and (found := _venv_python(spec_dir.absolute() / ".venv")):
        return found, f"the spec's directory {spec_dir.absolute()}"
    root = project_root(cwd)
    if root is None:
        return None
    venv = root / (environ.get("UV_PROJECT_ENVIRONMENT") or ".venv")
    found = _venv_python(venv)
    return (found, f"the project root {root} (pyproject.toml), as uv finds it") if found else None


def choose_interpreter(
    python: str | None, environ: Mapping[str, str], *, spec_dir: Path | None = None, cwd: Path | None = None
) -> Interpreter:
    """``--python`` if given, else the active virtual environment's python, else the project's ``.venv``
    (uv's convention: ``uv run`` would use it; ``project_venv``), else the first ``python3`` on ``PATH``
    (the user's, not the venv that ``uv tool install`` or pipx made for megacpp-env), else this
    interpreter. The path is kept as found, never resolved: a venv's python is a link to its base."""
    if python:
        return Interpreter(path=python, reason="given with --python")
    venv = environ.get("VIRTUAL_ENV")
    if venv:
        candidate = Path(venv) / "bin" / "python"
        if candidate.exists():
            return Interpreter(path=str(candidate), reason=f"the active virtual environment (VIRTUAL_ENV={venv})")
    project = project_venv(spec_dir, cwd or Path.cwd(), environ)
    if project is not None:
        path, where = project
        return Interpreter(path=str(path), reason=f"no virtual environment is active: the project's .venv, in {where}")
    found = shutil.which("python3", path=environ.get("PATH", os.defpath))
    if found:
        return Interpreter(
            path=str(Path(found).absolute()), reason="no virtual environment is active: the first python3 on PATH"
        )
    return Interpreter(
        path=sys.executable, reason="no virtual environment is active and no python3 on PATH: megacpp-env's own"
    )


def interpreter_for(python: str | None, environ: Mapping[str, str]) -> str:
    """The path of ``choose_interpreter``."""
    return choose_interpreter(python, environ).path
