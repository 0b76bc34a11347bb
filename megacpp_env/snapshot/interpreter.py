"""Which interpreter a snapshot inspects: ``--python``, the active virtual environment's, or the
first ``python3`` on ``PATH``. Import-light: the snapshot verb asks before it imports the rest."""

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


def choose_interpreter(python: str | None, environ: Mapping[str, str]) -> Interpreter:
    """``--python`` if given, else the active virtual environment's python, else the first ``python3`` on
    ``PATH`` (the user's, not the venv that ``uv tool install`` or pipx made for megacpp-env), else this
    interpreter. The path is kept as found, never resolved: a venv's python is a link to its base."""
    if python:
        return Interpreter(path=python, reason="given with --python")
    venv = environ.get("VIRTUAL_ENV")
    if venv:
        candidate = Path(venv) / "bin" / "python"
        if candidate.exists():
            return Interpreter(path=str(candidate), reason=f"the active virtual environment (VIRTUAL_ENV={venv})")
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
