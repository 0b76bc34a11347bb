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
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from megacpp_env.errors import ToolError

log = logging.getLogger("megacpp_env.pip")

TIMEOUT_S = 1800.0
COMMANDS: list[tuple[str, ...]] = []
_LOCK = threading.Lock()


@dataclass(frozen=True, kw_only=True, slots=True)
class PipRun:
    argv: tuple[str, ...]
    stdout: str
    stderr: str


def run_pip(
    python: Path | str, args: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> PipRun:
    """Run ``PYTHON -m pip ARGS``; ToolError with pip's last error lines when it fails."""
    argv = (str(python), "-m", "pip", *args)
    with _LOCK:
        COMMANDS.append(argv)
    log.debug("pip: %s", " ".join(argv))
    full = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    full.update({"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", **(env or {})})
    try:
        proc = subprocess.run(argv, cwd=cwd, env=full, capture_output=True, text=True, check=False, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ToolError(f"pip {' '.join(args[:1])} did not finish in {TIMEOUT_S:g}s") from None
    except OSError as exc:
        raise ToolError(f"cannot run {python} -m pip: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        raise ToolError(f"pip {' '.join(args[:1])} failed:\n{error_lines(proc.stderr or proc.stdout)}")
    return PipRun(argv=argv, stdout=proc.stdout, stderr=proc.stderr)


def error_lines(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("WARNING: Location")]
    return "\n".join(lines[-20:]) or "(no output)"
