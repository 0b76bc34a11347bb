"""Terminal output shared by the commands: JSON printing, colour, verbosity and progress on a TTY.

* Colour: on a terminal only; ``NO_COLOR`` (any non-empty value, https://no-color.org) turns it off,
  ``FORCE_COLOR`` (non-empty, not ``0``) turns it on even in a pipe or CI. Plain ANSI SGR codes:
  nothing here is worth a dependency (rich costs ~60 ms of import and a lock entry in every image).
* Verbosity: ``-q`` (results and errors only: no progress, no streamed logs), default, ``-v`` (also
  every external command megacpp-env runs, through the ``megacpp_env.*`` loggers).
* Progress: one status line on stderr, only when stderr is a terminal, CI is not set, output is
  not ``--json`` and not ``-q``; logs and pipes stay clean.
* The standard streams themselves (closed, full, a reader gone): ``megacpp_env.streams``.

Domain modules never print; they accept callbacks that the commands connect to these helpers.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, TextIO

QUIET, NORMAL, VERBOSE = -1, 0, 1

_SGR = {
    "error": "1;31",
    "warning": "33",
    "ok": "32",
    "added": "32",
    "removed": "31",
    "heading": "1",
    "dim": "2",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    verbosity: int = NORMAL


class _Current:
    """The process-wide settings (one CLI invocation, one setting)."""

    settings = Settings()


def configure(*, verbosity: int = NORMAL) -> Settings:
    """Set the process-wide verbosity (the CLI calls this once per invocation, from -q/-v)."""
    chosen = Settings(verbosity=max(QUIET, min(VERBOSE, verbosity)))
    _Current.settings = chosen
    if chosen.verbosity >= VERBOSE or "logging" in sys.modules:
        _log_external_commands(chosen.verbosity >= VERBOSE)
    return chosen


def _log_external_commands(on: bool) -> None:
    """-v: the ``megacpp_env.*`` loggers (every git/uv command line) go to stderr; off again otherwise."""
    import logging  # only for -v: --help and plain runs never pay for it

    logger = logging.getLogger("megacpp_env")
    mine = [h for h in logger.handlers if getattr(h, "megacpp_env_cli", False)]
    if on and not mine:
        handler = logging.StreamHandler()  # writes to the current sys.stderr
        handler.setFormatter(logging.Formatter("megacpp-env: %(name)s: %(message)s"))
        handler.megacpp_env_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    for old in mine if not on else []:
        logger.removeHandler(old)
    logger.setLevel(logging.DEBUG if on else logging.NOTSET)


def settings() -> Settings:
    return _Current.settings


def print_json(obj: Any, *, stream: TextIO | None = None) -> None:
    out = stream or sys.stdout
    out.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def _isatty(stream: TextIO) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


def color_enabled(stream: TextIO | None = None) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    force = os.environ.get("FORCE_COLOR", "")
    if force and force != "0":
        return True
    return _isatty(stream or sys.stdout) and os.environ.get("TERM") != "dumb"


def paint(text: str, role: str, *, stream: TextIO | None = None) -> str:
    """``text`` in the colour of ``role`` (error, warning, ok, added, removed, heading, dim) when
    ``stream`` (default stdout) takes colour; unchanged otherwise."""
    if not text or not color_enabled(stream):
        return text
    return f"\x1b[{_SGR[role]}m{text}\x1b[0m"


def paint_diff(diff: str, *, stream: TextIO | None = None) -> str:
    """A unified diff with its added/removed/hunk lines coloured (unchanged without colour)."""
    if not color_enabled(stream):
        return diff
    out = []
    for line in diff.splitlines(keepends=True):
        if line.startswith(("+++", "---")):
            out.append(paint(line.rstrip("\n"), "heading", stream=stream) + "\n")
        elif line.startswith("+"):
            out.append(paint(line.rstrip("\n"), "added", stream=stream) + "\n")
        elif line.startswith("-"):
            out.append(paint(line.rstrip("\n"), "removed", stream=stream) + "\n")
        elif line.startswith("@@"):
            out.append(paint(line.rstrip("\n"), "dim", stream=stream) + "\n")
        else:
            out.append(line)
    return "".join(out)


def progress_enabled(stream: TextIO | None = None) -> bool:
    s = stream or sys.stderr
    return _isatty(s) and not os.environ.get("CI") and _Current.settings.verbosity > QUIET


class Progress:
    """A single status line on a TTY (``[3/10] label``); silent elsewhere."""

    def __init__(self, total: int = 0, *, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.enabled = progress_enabled(self.stream) if enabled is None else enabled
        self._last = 0.0
        self._shown = False

    def step(self, label: str, *, advance: int = 1) -> None:
        self.done += advance
        self.show(label, force=self.done >= self.total > 0)

    def show(self, label: str, *, force: bool = False) -> None:
        """Replace the status line with ``label`` (at most 20 times a second unless ``force``)."""
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.05 and not force):
            return
        self._last = now
        self._shown = True
        count = f"[{self.done}/{self.total}] " if self.total else ""
        width = max(20, _columns(self.stream) - 1)
        self.stream.write("\r\x1b[2K" + f"{count}{label}"[:width])
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._shown:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _columns(stream: TextIO) -> int:
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80  # a terminal may report 0 columns
    except (OSError, ValueError, AttributeError):
        return 80
