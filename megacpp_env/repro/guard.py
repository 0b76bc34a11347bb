"""``run --golden NAME -- CMD``: a benchmark runs only on the golden's environment, or says it did not.

The pre-check inspects what the golden inspected (``goldens.options_like``: its interpreter, its
checkouts, its spec, ``--torch`` if it imported torch) with the warm hash cache, and diffs the result
against the golden (the spec's ``snapshot.ignore`` and ``--ignore`` apply). On drift: refuse, or run
anyway with ``allow_drift``. Either way one JSON line is appended to the run record (``runrecord``):
the command (its secrets redacted: ``redact.redact_argv``), its exit code and wall time, the snapshot
digest and the drift summary, so a number in a spreadsheet leads back to the exact environment it came from.
"""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.cmdline import redact_argv
from megacpp_env.errors import Terminated, ToolError
from megacpp_env.repro.goldens import GoldenRef, find, options_like, spec_loader, spec_once
from megacpp_env.repro.runrecord import RunRecord, append, check_record_path
from megacpp_env.snapshot.collect import take_snapshot
from megacpp_env.snapshot.context import SnapshotOptions
from megacpp_env.snapshot.diff import DiffReport, diff_snapshots
from megacpp_env.snapshot.document import Snapshot
from megacpp_env.snapshot.golden import ignore_patterns
from megacpp_env.snapshot.report import render

if TYPE_CHECKING:
    pass

SHOWN_FINDINGS = 20


@dataclass(frozen=True, kw_only=True, slots=True)
class PreCheck:
    golden: GoldenRef
    snapshot: Snapshot
    report: DiffReport
    seconds: float

    @property
    def drift(self) -> bool:
        return self.report.drift

    def summary(self) -> dict[str, Any]:
        shown = [f.message for f in self.report.findings if f.severity != "note"]
        return {
            "counts": self.report.counts(),
            "findings": shown[:SHOWN_FINDINGS],
            "more": max(0, len(shown) - SHOWN_FINDINGS),
        }


def precheck(golden: GoldenRef, opts: SnapshotOptions, *, ignore: Sequence[str] = ()) -> PreCheck:
    start = time.perf_counter()
    live = take_snapshot(opts)
    report = diff_snapshots(golden.snapshot, live, ignore=ignore, a_label=f"golden {golden.name}", b_label="live")
    return PreCheck(golden=golden, snapshot=live, report=report, seconds=time.perf_counter() - start)


def record_of(check: PreCheck, cmd: Sequence[str], *, ran: bool, exit_code: int | None, wall: float | None,
              allowed: bool) -> RunRecord:  # fmt: skip
    return RunRecord(
        time=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), golden=check.golden.name,
        golden_digest=check.golden.snapshot.digest, snapshot_digest=check.snapshot.digest, cmd=tuple(redact_argv(cmd)),
        cwd=str(Path.cwd()), ran=ran, exit_code=exit_code, wall_s=None if wall is None else round(wall, 3),
        drift=check.drift, allowed_drift=allowed and check.drift, drift_summary=check.summary(),
        precheck_s=round(check.seconds, 3),
    )  # fmt: skip


def run_command(cmd: Sequence[str]) -> tuple[int, float]:
    """Run CMD with this process's stdio; (exit code, wall seconds). A signal that killed it gives
    128 + its number, as a shell reports it. ^C reaches CMD (same process group); SIGTERM or SIGHUP sent
    to this program alone is passed on to CMD; either way we wait for it and record how it ended."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(list(cmd))
    except OSError as exc:
        raise ToolError(f"cannot run {cmd[0]}: {exc.strerror or exc}") from None
    while True:
        try:
            code = proc.wait()
            break
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
        except Terminated as exc:  # SIGTERM or SIGHUP to this program: CMD gets it too; we still wait
            proc.send_signal(exc.signum)
    wall = time.monotonic() - start
    return (128 - code if code < 0 else code), wall


def default_record_file(golden: GoldenRef) -> Path:
    """``<golden dir>/<name>.runs.jsonl``."""
    return golden.path.with_name(f"{golden.name}.runs.jsonl")


@dataclass(frozen=True, kw_only=True, slots=True)
class GuardRequest:
    golden: str
    golden_dir: Path | None
    cmd: tuple[str, ...]
    record: Path | None  # the run record file; default: beside the golden
    paths: Sequence[Path] | None
    ignore: Sequence[str]
    allow_drift: bool
    argv: Sequence[str]  # this command line, recorded redacted
    spec_path: Path | None = None  # the spec the command line names or the search found (loaded if needed)
    python: str | None = None  # --python, checked; None: the interpreter the golden inspected


@dataclass(frozen=True, kw_only=True, slots=True)
class Guarded:
    golden: str
    record_file: Path
    record: RunRecord
    refused: bool
    exit_code: int


def run_guarded(req: GuardRequest, *, checked: Callable[[PreCheck, str, str], None]) -> Guarded:
    """``run --golden NAME -- CMD``: snapshot this environment, compare it with the golden, then
    run CMD (refused on drift unless ``allow_drift``) and append the run record. ``checked(check,
    golden name, drift text)`` is told the comparison before CMD runs."""
    spec = spec_once(req.spec_path)
    ref = find(req.golden, req.golden_dir, spec)
    record_file = check_record_path(req.record or default_record_file(ref))
    opts = options_like(
        ref.snapshot, python=req.python, paths=req.paths, spec=spec_loader(ref.snapshot, spec),
        command=" ".join(["megacpp-env", *redact_argv(req.argv)]),
    )  # fmt: skip
    check = precheck(ref, opts, ignore=ignore_patterns(req.ignore, spec()))
    checked(check, ref.name, render(check.report, "text") if check.drift else "")
    if check.drift and not req.allow_drift:
        record = record_of(check, req.cmd, ran=False, exit_code=None, wall=None, allowed=False)
        append(record_file, record.to_dict())
        return Guarded(golden=ref.name, record_file=record_file, record=record, refused=True, exit_code=1)
    code, wall = run_command(req.cmd)
    record = record_of(check, req.cmd, ran=True, exit_code=code, wall=wall, allowed=req.allow_drift)
    append(record_file, record.to_dict())
    return Guarded(golden=ref.name, record_file=record_file, record=record, refused=False, exit_code=code)
