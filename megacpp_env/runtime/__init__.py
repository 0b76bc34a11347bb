"""Import-time runtime patches, each gated by its own environment variable.

This package must stay importable without jinja2/yaml/packaging: it runs inside training jobs.

How it is wired: ``python -m megacpp_env.runtime install`` writes a NEW file,
``megacpp_env_runtime.pth``, into the running interpreter's purelib (never an edit of an installed
file). Its one line checks the gates with ``os`` only (already imported at startup) and imports
``megacpp_env.runtime.hook`` only when at least one gate is on, so with every gate off nothing
of megacpp_env is imported and no module is touched. ``--uninstall`` removes the file.

A gate is on when its variable is ``1``, ``true``, ``yes`` or ``on`` (any case); anything else,
or unset, is off. The catalog (``catalog.PATCHES``) names the patches and their gates.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

from megacpp_env.runtime.catalog import PATCHES, TRUTHY

__all__ = ["HOME_ENV", "PATCHES", "TRUTHY", "enabled", "gate_on", "hook_path", "status"]
HOME_ENV = "MEGACPP_ENV_HOME"


def gate_on(gate: str, environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get(gate, "").strip().lower() in TRUTHY


def enabled(name: str, environ: Mapping[str, str] | None = None) -> bool:
    return gate_on(PATCHES[name][0], environ)


def status(environ: Mapping[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """Patch name -> {gate, enabled, applied, state, detail} for this process.

    ``state``: ``off`` (gate off), ``not-hooked`` (gate on but the .pth hook did not run in this
    process), ``armed`` (waiting for the target module's import), ``applied``, ``skipped`` (the
    documented precondition is not met; ``detail`` says which) or ``error``.
    """
    hooked = "megacpp_env.runtime.hook" in sys.modules  # the .pth hook ran in this process
    finders = sys.modules.get("megacpp_env.runtime.finders")
    recorded: dict[str, dict[str, str]] = getattr(finders, "STATE", {}) if hooked and finders else {}
    out: dict[str, dict[str, Any]] = {}
    for name, (gate, _desc) in sorted(PATCHES.items()):
        on = gate_on(gate, environ)
        rec = recorded.get(name, {})
        state = rec.get("state") or ("not-hooked" if on else "off")
        out[name] = {
            "gate": gate,
            "enabled": on,
            "applied": state == "applied",
            "state": state,
            "detail": rec.get("detail", ""),
        }
    return out


def hook_path() -> str | None:
    """Where this interpreter's ``megacpp_env_runtime.pth`` is installed, or None."""
    from megacpp_env.runtime import pth

    found = pth.installed()
    return str(found) if found else None
