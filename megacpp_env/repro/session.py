"""The ``snapshot`` verb's one domain call: ``session(request)`` checks every argument that can be
wrong, loads the golden to check against, takes the snapshot, writes the document, the PEP 751 lock
and the golden (with its capture) that were asked for, and diffs against the golden. It returns one
record (``SnapshotSession``); the verb renders it (which stream, which parts, the exit code). Here
and not in ``snapshot/`` because storing a golden's capture and exporting a lock are ``repro``'s,
which stands above ``snapshot``.

Import-light on purpose: the lock exporter and the capture (YAML, packaging's pylock) are imported
only when ``--export-lock`` or ``--golden`` asks for them, never on a plain snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from megacpp_env.errors import VerificationError
from megacpp_env.snapshot import golden
from megacpp_env.snapshot.document import check_output, errors, write_snapshot

if TYPE_CHECKING:
    from megacpp_env.snapshot.diff import DiffReport
    from megacpp_env.snapshot.document import Snapshot
    from megacpp_env.spec.model import Spec

# take(repo, load_spec) -> the snapshot; the verb builds it from its parsed options and its progress line
Take = Callable[[Path | None, Callable[[], "Spec | None"]], "Snapshot"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotRequest:
    take: Take  # the verb's snapshot: its options and its progress line
    spec_path: Path | None = None  # the spec when that file exists (loaded at most once, when needed)
    schema: bool = False  # only the document's JSON Schema: no snapshot
    repo: Path | None = None  # the training repository (None: the git work tree of the working directory)
    output: Path | None = None
    export_lock: Path | None = None
    golden: str | None = None  # store as this golden
    check_golden: str | None = None  # diff against this golden
    golden_dir: Path | None = None
    ignore: Sequence[str] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotSession:
    """What ``snapshot`` did; its parts render themselves (``summary``, ``timings``, ``drift``)."""

    snapshot: Snapshot | None  # None: only the schema was asked for
    schema: str = ""  # the document's JSON Schema (``--schema``)
    notes: list[str] = field(default_factory=list)  # what was written, one line each
    report: DiffReport | None = None  # the diff against --check-golden's golden
    failed: tuple[str, ...] = ()  # what could not be read (``document.errors``): the verb exits 1
    started: float | None = None  # seconds from the process's start to the session's (``--timings``)
    clock: float = 0.0  # perf_counter at the session's start

    def summary(self) -> str:
        from megacpp_env.snapshot.report import render_summary

        return render_summary(self.snapshot) if self.snapshot is not None else ""

    def timings(self) -> str:
        """Where the time went, per collector; ``total``: from the process's start to now."""
        import time

        from megacpp_env.snapshot.report import render_timings

        if self.snapshot is None:
            return ""
        total = None if self.started is None else self.started + time.perf_counter() - self.clock
        return render_timings(self.snapshot, started=self.started, total=total)

    def drift(self) -> str:
        """The diff against the golden (``--check-golden``), as text; "" without one."""
        from megacpp_env.snapshot.report import render

        return render(self.report, "text") if self.report is not None else ""

    @property
    def exit_code(self) -> int:
        """1 when something could not be read or the machine drifted from the golden checked against."""
        return 1 if self.failed or (self.report is not None and self.report.drift) else 0


def session(request: SnapshotRequest) -> SnapshotSession:
    """Everything ``megacpp-env snapshot`` does apart from printing (see the module docstring)."""
    import time

    from megacpp_env.snapshot.proc import process_age

    started, clock = process_age(), time.perf_counter()
    if request.schema:
        from megacpp_env.snapshot.document import json_schema

        return SnapshotSession(snapshot=None, schema=json_schema())
    from megacpp_env.repro.goldens import spec_once
    from megacpp_env.snapshot.collectors.repo import check_repo

    repo = check_repo(request.repo) if request.repo is not None else None
    output = check_output(request.output) if request.output else None
    lock_file = _check_lock(request.export_lock)
    spec = spec_once(request.spec_path)
    gold = golden.prepare(store=request.golden, check=request.check_golden, directory=request.golden_dir, spec=spec)
    snap = request.take(repo, spec)
    loaded = spec()  # cached; raises here if the spec is broken
    if output is not None:
        write_snapshot(snap, output)  # kept even when incomplete: the document records what failed
    failed = errors(snap.facts)
    if failed and request.golden:
        raise VerificationError(
            f"snapshot incomplete, golden {request.golden!r} not stored: {'; '.join(failed)[:2000]} "
            "(remedy: fix what could not be read, then store the golden again)"
        )
    notes: list[str] = []
    exported = None
    if lock_file is not None:
        from megacpp_env.repro.export import export_lock

        exported = export_lock(snap, lock_file)
        notes.append(f"lock of this environment written: {lock_file}")
    if request.golden and gold is not None:
        notes += _store_golden(snap, gold.directory, request.golden, exported)
    report = None
    if gold is not None and gold.reference is not None and request.check_golden:
        ignore = golden.ignore_patterns(request.ignore, loaded)
        report = golden.check_golden(snap, gold.reference, request.check_golden, ignore=ignore)
    return SnapshotSession(
        snapshot=snap, notes=notes, report=report, failed=tuple(failed), started=started, clock=clock
    )


def _check_lock(path: Path | None) -> Path | None:
    if path is None:
        return None
    from megacpp_env.repro.export import check_lock_path

    return check_lock_path(path)


def _store_golden(snap: Snapshot, directory: Path, name: str, exported: object) -> list[str]:
    """The golden document, then its capture (diffs, untracked files, distributions) beside it."""
    from megacpp_env.repro.capture import store_capture
    from megacpp_env.repro.export import ExportedLock

    lock = exported if isinstance(exported, ExportedLock) else None
    path, _changed = golden.store_golden(snap, directory, name)
    capture_file, capture = store_capture(
        snap, path, name, artifacts=lock.artifacts if lock else None, artifacts_from=lock.path if lock else ""
    )
    return [
        f"golden {name} stored: {path} (capture: {capture_file})",
        *(f"  not captured: {problem}" for problem in capture.problems),
    ]
