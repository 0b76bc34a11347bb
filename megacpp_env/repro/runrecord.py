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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megacpp_env.errors import FormatError, RefusedError
from megacpp_env.records import Record, Table


class RunRecordError(FormatError):
    """A run record line that cannot be read."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecord(Record):
    """One attempt of ``run --golden``: what ran, how it ended, on which environment."""

    time: str  # UTC, when the command started (or was refused)
    golden: str
    golden_digest: str
    snapshot_digest: str
    cmd: tuple[str, ...]
    cwd: str
    ran: bool
    exit_code: int | None
    wall_s: float | None
    drift: bool
    allowed_drift: bool
    drift_summary: dict[str, Any]
    precheck_s: float

    @classmethod
    def read(cls, t: Table) -> RunRecord:
        t.only(cls.__dataclass_fields__)
        wall, precheck = t.data.get("wall_s"), t.data.get("precheck_s")
        for key, value in (("wall_s", wall), ("precheck_s", precheck)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                t.fail(f"expected a number, got {value!r}", key)
        summary = t.table("drift_summary")
        return cls(
            time=t.text("time"), golden=t.text("golden"), golden_digest=t.text("golden_digest"),
            snapshot_digest=t.text("snapshot_digest"), cmd=t.texts("cmd", verbatim=True),
            cwd=t.text("cwd", verbatim=True), ran=t.flag("ran"),
            exit_code=t.number("exit_code", None), wall_s=wall, drift=t.flag("drift"),
            allowed_drift=t.flag("allowed_drift"), drift_summary=dict(summary.data), precheck_s=precheck or 0.0,
        )  # fmt: skip


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


def read(path: Path) -> list[RunRecord]:
    """Every record of a run-record file; a bad line is an error naming the file and the line."""
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise RunRecordError(f"not JSON: {exc}", file=str(path), line=n) from None
        out.append(RunRecord.read(Table.root(value, f"{path}:{n}", RunRecordError)))
    return out
