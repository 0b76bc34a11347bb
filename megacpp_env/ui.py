"""Output helpers shared by the commands: JSON printing and progress on a TTY.

Progress goes to stderr, only when stderr is a terminal and CI is not set, so logs and pipes
stay clean. Domain modules never print; they may accept a ``Progress`` to report into.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, TextIO


def print_json(obj: Any, *, stream: TextIO | None = None) -> None:
    out = stream or sys.stdout
    out.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def progress_enabled(stream: TextIO | None = None) -> bool:
    s = stream or sys.stderr
    return bool(getattr(s, "isatty", lambda: False)()) and not os.environ.get("CI")


class Progress:
    """A single status line on a TTY (``[3/10] label``); silent elsewhere."""

    def __init__(self, total: int = 0, *, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.enabled = progress_enabled(self.stream) if enabled is None else enabled
        self._last = 0.0

    def step(self, label: str, *, advance: int = 1) -> None:
        self.done += advance
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.05 and self.done < self.total):
            return
        self._last = now
        count = f"[{self.done}/{self.total}] " if self.total else ""
        self.stream.write(f"\r\x1b[2K{count}{label}"[:200])
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()
