"""The one wrapper around pip, run as ``PYTHON -m pip`` with the interpreter of the environment it
installs into. Every call goes through ``run_pip``, which logs the command line (logger
``megacpp_env.pip``) and appends it to ``COMMANDS`` for tests. Never prints, never exits.

pip reads the user's configuration (its index, find-links, certificates) on purpose: ``reproduce``
installs "from the indexes" the user has. No version check, no prompt.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from megacpp_env.toolrun import Tool, run_tool

log = logging.getLogger("megacpp_env.pip")

TIMEOUT_S = 1800.0
COMMANDS: list[tuple[str, ...]] = []


def run_pip(
    python: Path | str, args: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``PYTHON -m pip ARGS``; ToolError with pip's last error lines when it fails."""
    argv = (str(python), "-m", "pip", *args)
    log.debug("pip: %s", " ".join(argv))
    full = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    full.update({"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", **(env or {})})
    tool = Tool(
        what=f"pip {' '.join(args[:1])}",
        program=f"{python} -m pip",
        errors=lambda proc: error_lines(proc.stderr or proc.stdout),
    )
    return run_tool(argv, tool, commands=COMMANDS, env=full, timeout_s=TIMEOUT_S, cwd=cwd)


def error_lines(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("WARNING: Location")]
    return "\n".join(lines[-20:]) or "(no output)"
