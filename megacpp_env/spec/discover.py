"""Which spec file a command reads: ``--spec``, else ``$MEGACPP_ENV_SPEC``, else the nearest
``stack.yaml`` in the working directory or one of its parents (the way git finds ``.git``).

Never prints, never exits. Imports nothing heavy: the CLI calls it before any verb module loads.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from megacpp_env.errors import SpecError

if TYPE_CHECKING:
    from megacpp_env.spec.model import Spec

SPEC_ENV = "MEGACPP_ENV_SPEC"
SPEC_NAME = "stack.yaml"


def search_upward(start: Path, name: str = SPEC_NAME) -> Path | None:
    """The first ``name`` file in ``start`` or its parents, nearest first; None when there is none."""
    here = start.absolute()
    for directory in (here, *here.parents):
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def chosen_path(explicit: str | None, cwd: Path | None = None) -> Path | None:
    """The spec path the user chose or the search found; None when neither named nor found."""
    if explicit:
        return Path(explicit)
    from_env = os.environ.get(SPEC_ENV, "")
    if from_env:
        return Path(from_env)
    return search_upward(cwd or Path.cwd())


def required_path(explicit: str | None, cwd: Path | None = None) -> Path:
    """Like ``chosen_path``, but a spec that cannot be found is a ``SpecError`` naming where it looked."""
    return required(chosen_path(explicit, cwd), cwd)


def load_present(path: Path | None) -> Spec | None:
    """The spec at ``path`` when that file exists (errors in it still fail); None without one: for the
    commands that also work where there is no stack.yaml."""
    if path is None or not path.is_file():
        return None
    from megacpp_env.spec.loader import load_spec

    return load_spec(path)


def required(path: Path | None, cwd: Path | None = None) -> Path:
    """``path`` (what ``chosen_path`` gave), or, when there is none, the ``SpecError`` naming where
    the search looked: for a command that loads the spec only when it needs it."""
    if path is not None:
        return path
    here = (cwd or Path.cwd()).absolute()
    raise SpecError(
        f"no {SPEC_NAME} in {here} or any parent directory (searched up to {here.anchor})",
        remedy=f"run inside the project, pass --spec PATH or set {SPEC_ENV}",
    )
