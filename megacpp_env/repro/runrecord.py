"""The run record: one JSON object per line (JSON Lines), appended, never rewritten.

Each append is one ``write`` of one complete line on a descriptor opened with ``O_APPEND``, then
``fsync``: concurrent runs never interleave within a line, and a crash leaves the earlier lines
intact (at worst a last line that did not get its newline, which the reader reports by line number).
Only regular files are written (a FIFO or device named by mistake is refused).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from megacpp_env.errors import FormatError, RefusedError


class RunRecordError(FormatError):
    """A run record line that is not a JSON object."""


def check_record_path(path: Path) -> Path:
    """A regular file (or none yet) in an existing directory; refused before CMD runs."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise RefusedError(f"--record {path}: not a regular file")
    if not path.absolute().parent.is_dir():
        raise RefusedError(f"--record {path}: directory {path.absolute().parent} does not exist")
    return path


def append(path: Path, record: dict[str, Any]) -> None:
    line = (json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(check_record_path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def read(path: Path) -> list[dict[str, Any]]:
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise RunRecordError(f"not JSON: {exc}", file=str(path), line=n) from None
        if not isinstance(value, dict):
            raise RunRecordError("expected a JSON object", file=str(path), line=n)
        out.append(value)
    return out
