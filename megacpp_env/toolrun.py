"""What the wrappers of external tools share (``pip.py``, ``uv.py``): a time limit read from an
environment variable, and one bounded run of the tool with its output captured. Every way a run can
fail (too slow, cannot start, non-zero exit) is a ToolError naming the tool. Never prints, never exits.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from megacpp_env.errors import ToolError

MAX_SECONDS = 1e7  # about 115 days: a larger limit is a typo
_LOCK = threading.Lock()  # guards the wrappers' COMMANDS lists (runs may come from several threads)


def env_seconds(name: str, default: float, *, error: Callable[[str], Exception] = ToolError) -> float:
    """``default``, unless the environment variable ``name`` is set: then it must be a positive number
    of seconds (below ``MAX_SECONDS``), else ``error(message)`` naming the variable and its value."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < MAX_SECONDS:
        raise error(f"{name}={raw[:40]!r}: expected a positive number of seconds")
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class Tool:
    """How one wrapper names its tool in errors: ``what`` the run (``uv pip compile``), ``program``
    what could not start, ``hint`` after a timeout, ``errors`` the lines of a failed run worth showing."""

    what: str
    program: str
    errors: Callable[[subprocess.CompletedProcess[str]], str]
    hint: str = ""


def run_tool(
    argv: Sequence[str],
    tool: Tool,
    *,
    commands: list[tuple[str, ...]],
    env: Mapping[str, str],
    timeout_s: float,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (appended to ``commands`` first) with ``env`` as its whole environment, its output
    captured, killed after ``timeout_s``; the finished run, or a ToolError unless it exits 0."""
    argv = tuple(argv)
    with _LOCK:
        commands.append(argv)
    try:
        proc = subprocess.run(
            argv, cwd=cwd, env=dict(env), capture_output=True, text=True, check=False, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        raise ToolError(f"{tool.what} did not finish in {timeout_s:g}s{tool.hint}") from None
    except OSError as exc:
        raise ToolError(f"cannot run {tool.program}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        raise ToolError(f"{tool.what} failed:\n{tool.errors(proc)}")
    return proc
