"""The results of the checks the lock-gate action runs before the gate (``check``, ``render --check``,
``lock check``), so that ``gate --check-results DIR`` puts them in the pull-request comment.

The action writes, per check, ``NAME.rc`` (its exit status) and ``NAME.log`` (its output) into one
directory it owns; the checks run in the name order. A log is read from its end (``LOG_TAIL`` bytes):
the end of a failing check's output says why it failed.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megacpp_env.errors import InputError
from megacpp_env.fsutil import file_kind

LOG_TAIL = 64 * 1024
RC_SUFFIX, LOG_SUFFIX = ".rc", ".log"


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckResult:
    name: str  # the file stem the action chose: check, render-check, lock-check ...
    exit_code: int
    log: str = ""  # the end of its output (decoded leniently: a log is shown, never parsed)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "exit_code": self.exit_code, "passed": self.passed}


def _tail(path: Path, limit: int) -> bytes:
    """The last ``limit`` bytes of the regular file ``path`` ('' when there is none); never blocks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return b""
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path), key="--check-results") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"is {file_kind(info.st_mode)}, not a regular file", file=str(path), key="--check-results")
        os.lseek(fd, max(0, info.st_size - limit), os.SEEK_SET)
        return os.read(fd, limit)
    finally:
        os.close(fd)


def read_check_results(directory: Path, *, log_tail: int = LOG_TAIL) -> tuple[CheckResult, ...]:
    """Every ``NAME.rc`` in ``directory`` with the end of its ``NAME.log``, by name."""
    if not directory.is_dir():
        raise InputError("not a directory", file=str(directory), key="--check-results")
    out = []
    for rc_path in sorted(directory.glob(f"*{RC_SUFFIX}")):
        text = _tail(rc_path, 64).decode("utf-8", "replace").strip()
        if not text.isdigit():
            raise InputError(
                f"expected an exit status (digits), got {text[:40]!r}", file=str(rc_path), key="--check-results"
            )
        log = _tail(rc_path.with_suffix(LOG_SUFFIX), log_tail).decode("utf-8", "replace")
        out.append(CheckResult(name=rc_path.name.removesuffix(RC_SUFFIX), exit_code=int(text), log=log))
    return tuple(out)
