"""``lock check`` and ``lock export``: the committed locks against the spec, offline (no network,
no uv: nothing here imports the module that runs it), and the pip exports re-written from them.
Each returns one record that renders itself as text or JSON; never prints."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from megacpp_env.lock.consistency import GroupReport, check_locks
from megacpp_env.lock.escape import plain, scrub
from megacpp_env.lock.state import UNLOCKED, LockJob, LockState, check_job, export_only, jobs_for, rel
from megacpp_env.spec.model import Spec


@dataclass(frozen=True, kw_only=True, slots=True)
class Selection:
    """Which locks: the named targets (none: every target) on the named platforms (none: each
    target's own)."""

    names: tuple[str, ...] = ()
    platforms: tuple[str, ...] = ()

    def jobs(self, spec: Spec) -> list[LockJob]:
        return jobs_for(spec, list(self.names) or None, list(self.platforms) or None)


def to_json(data: object) -> str:
    """A lock report as JSON: credentials in any value scrubbed (``lock.escape.scrub``)."""
    return json.dumps(scrub(data), indent=2, sort_keys=True) + "\n"


def touching(reports: Sequence[GroupReport], jobs: Sequence[LockJob]) -> tuple[GroupReport, ...]:
    """The consistency groups a selected lock is in."""
    keys = {j.key for j in jobs}
    return tuple(r for r in reports if keys & set(r.group.members))


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckRun:
    states: tuple[LockState, ...]
    reports: tuple[GroupReport, ...]
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        return {"locks": [s.to_dict() for s in self.states], "consistency": [r.to_dict() for r in self.reports],
                "ok": self.ok}  # fmt: skip

    def render(self, fmt: str, *, quiet: bool = False) -> str:
        """``json`` (credentials scrubbed), or text: every lock's state and every consistency group
        (``quiet``: only what is not ok), every line made ``plain``."""
        if fmt == "json":
            return to_json(self.to_dict())
        lines = [s.line() for s in self.states if not (quiet and s.ok)]
        for r in self.reports:
            if quiet and not r.failing:
                continue
            lines.append(("warning: " if r.failing else "") + r.summary())
            lines += [f"  {dv.line()}" for dv in r.failing]
        return "".join(f"{plain(line)}\n" for line in lines)


def check_committed(spec: Spec, selection: Selection, *, allow_unlocked: bool = False) -> CheckRun:
    """``lock check``: every selected lock against the spec, offline; and the groups it is in."""
    jobs = selection.jobs(spec)
    states = tuple(check_job(job, spec.root) for job in jobs)
    failing = [s for s in states if not s.ok and not (allow_unlocked and s.state == UNLOCKED)]
    return CheckRun(states=states, reports=touching(check_locks(spec), jobs), ok=not failing)


@dataclass(frozen=True, kw_only=True, slots=True)
class ExportRow:
    label: str
    path: str
    state: str  # "wrote" | "unchanged" | "missing" (no lock to export from)

    def to_dict(self) -> dict[str, Any]:
        return {"lock": self.label, "path": self.path, "state": self.state}


@dataclass(frozen=True, kw_only=True, slots=True)
class ExportRun:
    rows: tuple[ExportRow, ...]

    @property
    def missing(self) -> tuple[ExportRow, ...]:
        return tuple(r for r in self.rows if r.state == "missing")

    @property
    def ok(self) -> bool:
        return not self.missing

    def to_dict(self) -> dict[str, Any]:
        return {"exports": [r.to_dict() for r in self.rows], "ok": self.ok}

    def render(self, fmt: str) -> str:
        """What was written (``text``), or the whole run (``json``)."""
        if fmt == "json":
            return to_json(self.to_dict())
        return "".join(f"{r.state}: {r.path}\n" for r in self.rows if r.state != "missing")

    def problems(self) -> str:
        """Which locks are missing, a line each (stderr)."""
        return "".join(f"missing: {plain(r.label)}: {r.path}\n" for r in self.missing)


def export_committed(spec: Spec, selection: Selection) -> ExportRun:
    """``lock export``: re-write each selected lock's pip export from the committed lock."""
    rows = []
    for job in selection.jobs(spec):
        if not job.lock_path.exists():
            rows.append(ExportRow(label=job.label, path=rel(job.lock_path, spec.root), state="missing"))
            continue
        state = "wrote" if export_only(job, spec.root) else "unchanged"
        rows.append(ExportRow(label=job.label, path=rel(job.export_path, spec.root), state=state))
    return ExportRun(rows=tuple(rows))
