"""Offline state of each lock (target + platform): ok, missing, stale, unlocked; and writing locks.

``lock check`` needs no network and no uv: it recomputes the inputs hash from the spec and compares
it with ``[tool.megacpp-env].inputs-hash``, and re-renders the requirements export from the lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from megacpp_env import layout
from megacpp_env.errors import SpecError, unknown_name
from megacpp_env.fsutil import atomic_write_text
from megacpp_env.lock.inputs import LockInputs, lock_inputs, toolchain_lock_inputs
from megacpp_env.lock.outputs import lock_command, render_export, render_outputs
from megacpp_env.lock.pylock import Lock, LockFormatError, LockMeta, read_pylock
from megacpp_env.records import Record
from megacpp_env.spec.model import Index, Spec, Target

OK, MISSING, STALE, UNLOCKED, EXPORT_STALE = "ok", "missing", "stale", "unlocked", "export-stale"


@dataclass(frozen=True, kw_only=True, slots=True)
class LockJob:
    inputs: LockInputs
    lock_path: Path
    export_path: Path
    unreachable: tuple[Index, ...]  # explicit indexes it needs that spec marks reachable_here: false
    cuda: str = ""  # a CUDA toolchain lock: the release its nvcc must be (toolchain.cuda.version)

    @property
    def key(self) -> tuple[str, str]:
        return (self.inputs.target, self.inputs.platform)

    @property
    def part(self) -> str:
        """ "" for the target's venv lock; the toolchain part ("cuda") for a toolchain lock."""
        return self.inputs.part

    @property
    def label(self) -> str:
        tail = f" ({self.part} toolchain)" if self.part else ""
        return f"{self.inputs.target} {self.inputs.platform}{tail}"


@dataclass(frozen=True, kw_only=True, slots=True)
class LockState(Record):
    target: str
    platform: str
    state: str
    path: str
    detail: str = ""
    remedy: str = ""

    @property
    def ok(self) -> bool:
        return self.state == OK

    def line(self) -> str:
        text = f"{self.state}: {self.target} {self.platform}: {self.detail or self.path}"
        return f"{text} (run: {self.remedy})" if self.remedy else text


def jobs_for(spec: Spec, targets: list[str] | None = None, platforms: list[str] | None = None) -> list[LockJob]:
    """One job per selected target and platform, in spec order.

    A platform none of the selected targets has, or one that a target named in ``targets`` lacks, is
    a SpecError naming the platforms there are: a typo must not select nothing and pass."""
    chosen = [spec.target(name) for name in targets or list(spec.targets)]  # each name looked up once
    _check_platforms(chosen, platforms or [], named=bool(targets))
    return [job for target in chosen for job in target_jobs(spec, target, platforms or [])]


def target_jobs(spec: Spec, target: Target, platforms: Iterable[str] = ()) -> list[LockJob]:
    """The jobs of one resolved target: its venv lock and toolchain locks per platform (default: all
    of its platforms; a platform it lacks selects nothing, so callers pass resolved platforms)."""
    wanted = set(platforms)
    out = []
    for platform in target.platforms:
        if wanted and platform not in wanted:
            continue
        out.append(_job(spec, target, platform))
        out += [_toolchain_job(spec, target, part, platform) for part in toolchain_parts(target)]
    return out


def toolchain_parts(target: Target) -> tuple[str, ...]:
    """The toolchain locks a target has besides its venv lock: ("cuda",) when CUDA comes from PyPI."""
    return ("cuda",) if target.toolchain.cuda_pypi else ()


def _job(spec: Spec, target: Target, platform: str) -> LockJob:
    inputs = lock_inputs(spec, target, platform)
    return LockJob(
        inputs=inputs,
        lock_path=layout.lock_path(spec.root, target.name, platform),
        export_path=layout.requirements_export_path(spec.root, target.name, platform),
        unreachable=tuple(i for i in inputs.needed_indexes() if not i.reachable_here),
    )


def _toolchain_job(spec: Spec, target: Target, part: str, platform: str) -> LockJob:
    inputs = toolchain_lock_inputs(spec, target, part, platform)
    return LockJob(
        inputs=inputs,
        lock_path=layout.toolchain_lock_path(spec.root, target.name, part, platform),
        export_path=layout.toolchain_export_path(spec.root, target.name, part, platform),
        unreachable=tuple(i for i in inputs.needed_indexes() if not i.reachable_here),
        cuda=target.toolchain.cuda,
    )


def _check_platforms(chosen: list[Target], platforms: list[str], *, named: bool) -> None:
    for platform in platforms:
        if platform not in layout.PLATFORMS:  # a typo of the command line: a usage error, with the closest
            raise unknown_name("platform", platform, layout.PLATFORMS)
        lacking = [t for t in chosen if platform not in t.platforms]
        if named and lacking:
            t = lacking[0]
            raise SpecError(
                f"target {t.name} has no platform {platform} (its platforms: {', '.join(t.platforms)})",
                key="--platform",
            )
        if len(lacking) == len(chosen):
            known = sorted({p for t in chosen for p in t.platforms})
            raise SpecError(
                f"no target has platform {platform} (the spec's platforms: {', '.join(known)})", key="--platform"
            )


def unreachable_text(indexes: tuple[Index, ...]) -> str:
    return ", ".join(f"index {i.name} ({i.url}) unreachable here" for i in indexes)


def rel(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def check_job(job: LockJob, root: Path) -> LockState:
    t, p, path = job.inputs.target, job.inputs.platform, rel(job.lock_path, root)
    base = {"target": t, "platform": p, "path": path}
    if not job.lock_path.exists():
        if job.unreachable:
            detail = f"{unreachable_text(job.unreachable)}; lock it where it is reachable and commit {path}"
            return LockState(**base, state=UNLOCKED, detail=detail)
        return LockState(**base, state=MISSING, detail=f"{path} does not exist", remedy=lock_command(t, p))
    try:
        lock = read_pylock(job.lock_path)
    except LockFormatError as exc:
        return LockState(**base, state=STALE, detail=str(exc), remedy=lock_command(t, p))
    if lock.inputs_hash != job.inputs.digest():
        return LockState(
            **base, state=STALE, detail=f"{path}: {stale_reason(lock, job.inputs)}", remedy=lock_command(t, p)
        )
    return _check_export(job, lock, root, base)


def _check_export(job: LockJob, lock: Lock, root: Path, base: dict[str, str]) -> LockState:
    export_rel = rel(job.export_path, root)
    want = render_export(lock, export_rel)
    try:
        have = job.export_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        have = None
    if have != want:
        what = "does not exist" if have is None else "does not match the lock"
        remedy = f"megacpp-env lock export {job.inputs.target} --platform {job.inputs.platform}"
        return LockState(**base, state=EXPORT_STALE, detail=f"{export_rel} {what}", remedy=remedy)
    return LockState(**base, state=OK)


def stale_reason(lock: Lock, inputs: LockInputs) -> str:
    """Say which input changed, as far as the lock's recorded inputs tell."""
    meta = lock.meta or LockMeta()
    old = list(meta.requirements)
    added = [r for r in inputs.requirements if r not in old]
    removed = [r for r in old if r not in inputs.requirements]
    parts = []
    if added:
        parts.append("requirements added: " + ", ".join(added))
    if removed:
        parts.append("requirements removed: " + ", ".join(removed))
    if (meta.python or inputs.python) != inputs.python:
        parts.append(f"python {meta.python} -> {inputs.python}")
    return "; ".join(parts) or "inputs hash differs (indexes or other spec inputs changed)"


def write_lock(job: LockJob, lock: Lock, root: Path) -> bool:
    """Write the lock and its export; True when either file changed."""
    pylock_text, export_text = render_outputs(lock, rel(job.export_path, root))
    changed = atomic_write_text(job.lock_path, pylock_text)
    return atomic_write_text(job.export_path, export_text) or changed


def export_only(job: LockJob, root: Path) -> bool:
    """Re-write the requirements export from the committed lock (offline)."""
    lock = read_pylock(job.lock_path)
    return atomic_write_text(job.export_path, render_export(lock, rel(job.export_path, root)))
