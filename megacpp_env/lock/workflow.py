"""``lock resolve``: resolve every selected lock, check the groups that must agree, re-align them
(``--align``), and write. Returns one record (``LockRun``), which renders itself; never prints.
The offline sub-commands (``lock check``, ``lock export``) are ``lock.offline``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from packaging.utils import canonicalize_name

from megacpp_env import layout
from megacpp_env.deps.graph import TargetDeps, target_deps
from megacpp_env.deps.lockcheck import after_resolution, preflight, requirers_of, wrong_origin
from megacpp_env.errors import SpecError, ToolError
from megacpp_env.lock.consistency import GroupReport, Key, check_locks
from megacpp_env.lock.diff import PackageChange, change_text, diff_locks
from megacpp_env.lock.escape import plain
from megacpp_env.lock.offline import Selection, to_json, touching
from megacpp_env.lock.pylock import Lock, LockFormatError, read_pylock
from megacpp_env.lock.resolve import Relock, Resolved, resolve_all
from megacpp_env.lock.state import LockJob, rel, unreachable_text
from megacpp_env.records import HIDDEN, as_dict
from megacpp_env.spec.model import Spec
from megacpp_env.ui import Progress

WRITTEN_KEYS = ("target", "platform", "state", "path", "export", "packages", "seconds", "uv_runs", "changes")
SKIPPED_KEYS = ("target", "platform", "state", "detail")


@dataclass(frozen=True, kw_only=True, slots=True)
class LockRow:
    """One lock of a ``lock`` run: written, unchanged, or skipped (its index is unreachable here)."""

    target: str
    platform: str
    state: str
    path: str = ""
    export: str = ""
    packages: int = 0
    seconds: float = 0.0
    uv_runs: int = 0
    detail: str = ""
    changes: tuple[PackageChange, ...] = ()  # what moved against the lock it replaced (all: no lock before)

    def to_dict(self) -> dict[str, Any]:
        out = as_dict(self)
        return {k: out[k] for k in (SKIPPED_KEYS if self.state == "skipped" else WRITTEN_KEYS)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Upgrade:
    """What ``lock`` may move: everything (``--upgrade``: no preferences), named packages
    (``--upgrade-package``), and the upload-time cutoff (``--exclude-newer``: None keeps each lock's
    recorded one, "" drops it)."""

    everything: bool = False
    packages: tuple[str, ...] = ()
    exclude_newer: str | None = None


def cutoff(text: str) -> str:
    """``--exclude-newer``: a date (``2026-11-20``, midnight UTC) or an RFC 3339 time (UTC when it has
    no offset) as the UTC timestamp uv is given and the lock records; ``none`` (or "") drops it."""
    import datetime as dt

    if text.strip().lower() in ("", "none"):
        return ""
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise SpecError(
            f"not a date or an RFC 3339 time: {text!r}", key="--exclude-newer",
            remedy="e.g. 2026-11-20 or 2026-11-20T12:00:00Z; none drops the cutoff",
        ) from None  # fmt: skip
    when = when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, kw_only=True, slots=True)
class LockRun:
    rows: tuple[LockRow, ...]
    reports: tuple[GroupReport, ...]
    notes: tuple[str, ...] = ()
    explicit_skip: bool = field(default=False, metadata=HIDDEN)  # a target named on the command line was skipped
    problems: tuple[str, ...] = ()  # dependency problems that refused the run (nothing written)

    @property
    def ok(self) -> bool:
        return not self.explicit_skip and not self.problems and not any(r.failing for r in self.reports)

    def to_dict(self) -> dict[str, Any]:
        out = {"locks": [r.to_dict() for r in self.rows], "consistency": [r.to_dict() for r in self.reports],
               "notes": list(self.notes)}  # fmt: skip
        if self.problems:
            out["problems"] = list(self.problems)
        return out

    def render(self, fmt: str) -> str:
        """``text`` (every line made ``plain``) or ``json`` (credentials scrubbed)."""
        if fmt == "json":
            return to_json(self.to_dict())
        if self.problems:
            return "".join(f"error: {plain(p)}\n" for p in self.problems) + "lock: nothing written\n"
        lines = list(self.notes)
        for row in self.rows:
            if row.state == "skipped":
                lines.append(f"skipped: {row.target} {row.platform}: {row.detail}")
            else:
                lines.append(f"{row.state}: {row.path} ({row.packages} packages, {row.seconds}s) + {row.export}")
                lines += [f"  {c.label}: {change_text(c)} {c.old or '-'} -> {c.new or '-'}" for c in row.changes]
        for r in self.reports:
            lines.append(r.summary())
            lines += [f"  {dv.line()}" for dv in r.divergences]
        return "".join(f"{plain(line)}\n" for line in lines)


@dataclass(frozen=True, kw_only=True, slots=True)
class ResolveRequest:
    """What ``lock resolve`` was asked: which locks, and what may move."""

    selection: Selection = field(default_factory=Selection)
    align: bool = False
    try_unreachable: bool = False
    upgrade: bool = False
    upgrade_packages: tuple[str, ...] = ()
    exclude_newer: str | None = None  # None: each lock keeps the cutoff it records


def resolve_locks(spec: Spec, req: ResolveRequest, *, progress: Callable[[int], Progress]) -> LockRun:
    """``lock resolve [TARGET...]``: resolve the selected locks with uv and write them (``progress``
    makes the progress line for the number of locks that will be resolved)."""
    jobs = req.selection.jobs(spec)
    upgrade = Upgrade(
        everything=req.upgrade,
        packages=tuple(sorted({canonicalize_name(n) for n in req.upgrade_packages})),
        exclude_newer=None if req.exclude_newer is None else cutoff(req.exclude_newer),
    )
    bar = progress(len([j for j in jobs if req.try_unreachable or not j.unreachable]))
    try:
        return lock_targets(
            spec, jobs, align=req.align, try_unreachable=req.try_unreachable, named=bool(req.selection.names),
            progress=bar, upgrade=upgrade,
        )  # fmt: skip
    finally:
        bar.close()


def lock_targets(
    spec: Spec,
    jobs: Sequence[LockJob],
    *,
    align: bool = False,
    try_unreachable: bool = False,
    named: bool = False,
    progress: Progress | None = None,
    upgrade: Upgrade = Upgrade(),
) -> LockRun:
    """Resolve, compare, re-align if asked and diverging, write. Each lock is re-resolved with the
    committed one as uv's preferences, so only what ``upgrade`` names, and what the inputs force, moves.
    Jobs whose explicit index is marked unreachable here are skipped (unless ``try_unreachable``);
    skipping one the user ``named`` fails."""
    runnable = [j for j in jobs if try_unreachable or not j.unreachable]
    skipped = [j for j in jobs if j not in runnable]
    graphs = {j.inputs.target: target_deps(spec, spec.target(j.inputs.target)) for j in runnable}
    problems = [p for g in graphs.values() for p in preflight(g)]
    if problems:  # before uv runs: the requirers name themselves
        return LockRun(rows=(), reports=(), problems=tuple(problems))
    committed = [_committed(j) for j in runnable]
    relocks = [_relock(j, lock, upgrade) for j, lock in zip(runnable, committed, strict=True)]
    _check_upgrade_names(upgrade, runnable, committed)
    results = _resolve_explained(runnable, progress, graphs, relocks)
    problems = _after_resolution(graphs, runnable, results)
    if problems:
        return LockRun(rows=(), reports=(), problems=tuple(problems))
    reports = touching(check_locks(spec, _fresh(runnable, results)), jobs)
    notes = uv_version_notes(runnable)
    if align and any(r.failing for r in reports):
        results, all_reports, align_notes = _realign(spec, runnable, results, reports, relocks)
        reports, notes = touching(all_reports, jobs), [*notes, *align_notes]
    rows = [_write(spec, j, r, old) for j, r, old in zip(runnable, results, committed, strict=True)]
    rows += [_skipped(j) for j in skipped]
    return LockRun(rows=tuple(rows), reports=reports, notes=tuple(notes), explicit_skip=named and bool(skipped))


def _committed(job: LockJob) -> Lock | None:
    """The lock a run replaces; None when there is none, or one uv could not take as preferences."""
    try:
        return read_pylock(job.lock_path) if job.lock_path.exists() else None
    except LockFormatError:
        return None  # resolved from scratch; the diff then shows every package as added


def _relock(job: LockJob, committed: Lock | None, upgrade: Upgrade) -> Relock:
    recorded = committed.meta.exclude_newer if committed is not None and committed.meta else ""
    return Relock(
        previous=None if upgrade.everything else committed,
        upgrade_packages=upgrade.packages,
        exclude_newer=recorded if upgrade.exclude_newer is None else upgrade.exclude_newer,
    )


def _check_upgrade_names(upgrade: Upgrade, jobs: Sequence[LockJob], committed: Sequence[Lock | None]) -> None:
    """Every ``--upgrade-package`` is a package of a selected lock or a requirement: a typo must not pass."""
    known = {p.name for lock in committed if lock for p in lock.packages} | {
        n for j in jobs for n in j.inputs.direct_names
    }
    unknown = [name for name in upgrade.packages if name not in known]
    if unknown:
        raise SpecError(
            f"{', '.join(unknown)}: in no selected lock and no requirement",
            key="--upgrade-package",
            remedy="name a package of the lock (see locks/pylock.*.toml) or select its target",
        )


def _fresh(jobs: Sequence[LockJob], results: Sequence[Resolved]) -> dict[Key, Lock]:
    """The venv locks just resolved, by key (toolchain locks take no part in consistency groups)."""
    return {j.key: r.lock for j, r in zip(jobs, results, strict=True) if not j.part}


def _resolve_explained(
    jobs: Sequence[LockJob], progress: Progress | None, graphs: Mapping[str, TargetDeps], relocks: Sequence[Relock]
) -> list[Resolved]:
    """Resolve; a resolver failure says who requires each package it names."""
    try:
        return _resolve(jobs, progress, relocks)
    except ToolError as exc:
        lines = requirers_of(graphs.values(), str(exc))
        if not lines:
            raise
        raise ToolError(f"{exc}\nrequired by:\n" + "\n".join(lines)) from None


def _after_resolution(
    graphs: Mapping[str, TargetDeps], jobs: Sequence[LockJob], results: Sequence[Resolved]
) -> list[str]:
    out: list[str] = []
    for job, result in zip(jobs, results, strict=True):
        locked = {p.name: p.version for p in result.lock.packages if p.version}
        if job.part:
            out += [f"{job.label}: {line}" for line in toolchain_problems(job, locked)]
        else:
            out += after_resolution(graphs[job.inputs.target], job.inputs.platform, locked)
        explicit = {p.name: index.url for p in result.lock.packages if (index := job.inputs.index_of(p.name))}
        artifacts = {p.name: [a.url for a in p.artifacts] for p in result.lock.packages}
        out += [f"{job.label}: {line}" for line in wrong_origin(explicit, artifacts)]
    return out


# The distribution whose version is the CUDA release of a toolchain lock (nvcc reports it).
CUDA_COMPILER = "nvidia-cuda-nvcc"


def toolchain_problems(job: LockJob, locked: Mapping[str, str]) -> list[str]:
    """A CUDA toolchain lock must hold nvcc of the release the toolchain names (13.2 -> 13.2.x)."""
    want = job.cuda
    have = locked.get(CUDA_COMPILER, "")
    if not have:
        return [f"no {CUDA_COMPILER} in the lock: toolchain.cuda.pypi must install nvcc (e.g. cuda-toolkit[nvcc])"]
    if have.split(".")[:2] != want.split(".")[:2]:
        return [f"{CUDA_COMPILER} {have} is not CUDA {want}: pin toolchain.cuda.pypi to the {want} release"]
    return []


def _resolve(jobs: Sequence[LockJob], progress: Progress | None, relocks: Sequence[Relock]) -> list[Resolved]:
    if progress is None:
        return resolve_all([j.inputs for j in jobs], relocks=relocks)
    progress.step("resolving " + ", ".join(j.label for j in jobs), advance=0)
    return resolve_all(
        [j.inputs for j in jobs], relocks=relocks,
        on_done=lambda r: progress.step(f"locked {r.inputs.target} {r.inputs.platform}"),
    )  # fmt: skip


def _realign(
    spec: Spec, jobs: list[LockJob], results: list[Resolved], reports: Sequence[GroupReport], relocks: list[Relock]
) -> tuple[list[Resolved], list[GroupReport], list[str]]:
    """Re-resolve diverging groups constrained to one member (see megacpp_env.lock.align), each member as
    its own re-lock (the committed lock as preferences, the recorded cut-off)."""
    from megacpp_env.lock.align import align_group

    fresh = _fresh(jobs, results)
    # the venv locks only: a target's CUDA toolchain lock has the same (target, platform) key
    inputs = {j.key: j.inputs for j in jobs if not j.part}
    by_key = {j.key: relock for j, relock in zip(jobs, relocks, strict=True) if not j.part}
    redone: dict[Key, Resolved] = {}
    notes: list[str] = []
    for report in (r for r in reports if r.failing):
        aligned = align_group(report, _with_disk_locks(spec, report, fresh), inputs, by_key)
        redone.update(aligned.results)
        notes += aligned.notes
    results = [r if j.part else redone.get(j.key, r) for j, r in zip(jobs, results, strict=True)]
    return results, check_locks(spec, _fresh(jobs, results)), notes


def _with_disk_locks(spec: Spec, report: GroupReport, fresh: Mapping[Key, Lock]) -> dict[Key, Lock]:
    """Members resolved in this run, plus the committed locks of members not re-resolved now."""
    return {k: fresh[k] if k in fresh else read_pylock(layout.lock_path(spec.root, *k)) for k in report.compared}


def _write(spec: Spec, job: LockJob, result: Resolved, committed: Lock | None) -> LockRow:
    from megacpp_env.lock.state import write_lock

    changed = write_lock(job, result.lock, spec.root)
    moved = diff_locks(committed or Lock(packages=()), result.lock).changes
    return LockRow(
        target=job.inputs.target,
        platform=job.inputs.platform,
        state="written" if changed else "unchanged",
        path=rel(job.lock_path, spec.root),
        export=rel(job.export_path, spec.root),
        packages=len(result.lock.packages),
        seconds=round(result.seconds, 2),
        uv_runs=result.uv_runs,
        changes=moved,
    )


def _skipped(job: LockJob) -> LockRow:
    detail = f"unlocked: {unreachable_text(job.unreachable)}"
    return LockRow(target=job.inputs.target, platform=job.inputs.platform, state="skipped", detail=detail)


def uv_version_notes(jobs: Sequence[LockJob]) -> list[str]:
    """A warning when the uv on PATH is not the one the toolchain pins (a lock may then differ)."""
    from megacpp_env.uv import pin_mismatch, uv_version

    want = {r.removeprefix("uv==") for j in jobs for r in j.inputs.requirements if r.startswith("uv==")}
    have = uv_version() if want else ""
    note = pin_mismatch(have, want)
    return [note] if note else []
