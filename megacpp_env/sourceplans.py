"""From the spec to what the source-build package reads: build plans and source mirror requests.

Kept out of ``megacpp_env.srcbuild`` on purpose: it needs the spec, which images' source stages
never load. Never prints.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from megacpp_env import layout
from megacpp_env.checkout import CheckoutResult, checkout_source, default_dest, find_source
from megacpp_env.errors import SpecError
from megacpp_env.rules.readers import overlay_arch_var, readers, spec_facts
from megacpp_env.spec.model import Source, Spec, Target
from megacpp_env.srcbuild.build import BuildInputs, SourceBuildResult, build_source
from megacpp_env.srcbuild.jobs import JobsDecision, decide, read_resources
from megacpp_env.srcbuild.mirror import (
    MirroredSource,
    MirrorRequest,
    Pin,
    mirror_only_config,
    mirror_sources,
    parse_rewrite,
    require_pins,
)
from megacpp_env.srcbuild.plan import JOBS_ENV, THREADS_ENV, JobsPlan, SourcePlan, plan_for, target_jobs
from megacpp_env.srcbuild.run import resolve_python

ARCH_LIST_RE = re.compile(r"[\s;,]+")


def plan_of(spec: Spec, target: Target, source: Source) -> SourcePlan:
    """The plan of ``source`` on ``target``, with the target's own sanity checks for it added."""
    checked = replace(source, sanity=target.sanity_for(source))
    fetched = {name: spec.source(name) for name in source.fetches.values()}
    return plan_for(target, checked, fetched, jobs_inputs(spec, target, source))


def jobs_inputs(spec: Spec, target: Target, source: Source) -> JobsPlan:
    """The jobs formula's inputs, read from the source's facts (``facts/<name>.toml``), its overlay and
    the build tools the facts show it uses: the parallelism variables the build reads (nothing when it
    has no facts), a hard-coded ``--threads``, the files it compiles, the archs each is compiled for,
    and whether it divides MAX_JOBS by NVCC_THREADS. Never a hand-written list."""
    facts = spec_facts(spec).get(source.name)
    if facts is None:
        return target_jobs(target, nvcc_threads=source.jobs.nvcc_threads)
    names = readers(spec, source, facts).names
    reads = tuple(sorted(name for name in JOBS_ENV if name in names))
    reads_threads = any(name in reads for name in THREADS_ENV)
    hard = 0 if reads_threads else (facts.arch.nvcc_threads or source.jobs.nvcc_threads)
    return target_jobs(
        target,
        reads=reads,
        nvcc_threads=hard,
        units=facts.arch.compile_units,
        archs=_archs(spec, target, source, names, len(facts.arch.gencode)) if target.uses_cuda else 0,
        divides=bool(facts.arch.jobs_divided_at) and reads_threads,
    )


def _archs(spec: Spec, target: Target, source: Source, names: dict[str, str], hard_coded: int) -> int:
    """How many archs each file is compiled for: the overlay's arch variable, else a hard-coded
    -gencode list, else the first CUDA arch list the build reads (FLASHINFER_CUDA_ARCH_LIST,
    TORCH_CUDA_ARCH_LIST); 1 when none says."""
    env = {"TORCH_CUDA_ARCH_LIST": target.gpu.torch_cuda_arch_list} if target.gpu is not None else {}
    env.update(target.build_env_for(source))
    var = overlay_arch_var(spec, source)
    if var and var in env:
        return _count_archs(env[var])
    if hard_coded:
        return hard_coded
    for name in sorted(names):
        if "ARCH" in name and "CUDA" in name and name in env:
            return _count_archs(env[name])
    return 1


def _count_archs(value: str) -> int:
    return max(1, len([a for a in ARCH_LIST_RE.split(value) if a]))


def target_plans(spec: Spec, target: Target) -> list[SourcePlan]:
    """The plan of every source of ``target``, in the target's order."""
    return [plan_of(spec, target, src) for src in target.sources]


def target_for(spec: Spec, source: Source, name: str = "") -> Target:
    """``--target NAME``, else the only target that builds ``source``."""
    if name:
        target = spec.target(name)
        if source not in target.sources:
            raise SpecError(
                f"target {name} does not build source {source.name} "
                f"(its sources: {', '.join(s.name for s in target.sources) or 'none'})",
                file=str(spec.path),
                key=f"targets.{name}.sources",
            )
        return target
    owners = [t for t in spec.targets.values() if source in t.sources]
    if len(owners) != 1:
        listed = ", ".join(t.name for t in owners) or "none"
        raise SpecError(
            f"source {source.name} is built by {len(owners)} targets ({listed}); pass --target",
            file=str(spec.path),
            key=f"sources.{source.name}",
        )
    return owners[0]


def mirror_request(spec: Spec, source: Source) -> MirrorRequest:
    """The source's own pin first, then each declared build-time fetch's."""
    pins = [
        Pin(
            url=source.repo,
            commit=source.commit,
            submodules=source.submodules,
            unobtainable=tuple(sorted(source.unobtainable)),
        )
    ]
    for name in sorted(set(source.fetches.values())):
        fetched = spec.source(name)
        pins.append(Pin(url=fetched.repo, commit=fetched.commit, submodules=fetched.submodules))
    return MirrorRequest(source=source.name, pins=tuple(pins))


def mirror_requests(spec: Spec, target: Target) -> list[MirrorRequest]:
    return [mirror_request(spec, src) for src in target.sources]


def plan_path(root: Path, target: str, source: str) -> Path:
    return layout.source_plans_dir(root, target) / f"{source}.json"


def mirror_targets(
    spec: Spec, targets: list[str], dest: Path | None, rewrites: list[str], *, progress: Callable[[str], None] | None
) -> tuple[Path, list[MirroredSource]]:
    """``mirror-sources TARGET... --to DEST``: every pinned source of the targets (and what their
    builds fetch) into one local source mirror; ``rewrites`` are ``FROM=TO`` URL prefixes."""
    rewrite_map = dict(parse_rewrite(text) for text in rewrites)
    requests = {r.source: r for name in targets for r in mirror_requests(spec, spec.target(name))}
    where = dest or layout.source_mirror_dir(spec.root)
    return where, mirror_sources(where, list(requests.values()), rewrites=rewrite_map, progress=progress)


def checkout_pinned(
    spec: Spec, name: str, dest: Path | None, mirror: Path | None
) -> tuple[Source, Path, CheckoutResult]:
    """``checkout NAME``: a real git checkout of the pinned source (the overlay's manifest beside it);
    with ``mirror``, never the network: a pin the mirror lacks is refused, as build-source does."""
    source = find_source(spec, name)
    where = dest or default_dest(spec.root, source)
    config = None
    if mirror:
        remedy = f"megacpp-env mirror-sources TARGET --to {mirror}"
        require_pins(mirror, source.name, [(source.repo, source.commit)], remedy=remedy)
        config = mirror_only_config(mirror, source.name)
    overlay = layout.overlay_dir(spec.root, source.overlay) if source.overlay else None
    return source, where, checkout_source(source, where, git_config=config, overlay_dir=overlay)


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceBuildRequest:
    name: str
    target: str = ""  # default: the only target that builds the source
    venv: str | None = None
    mirror: Path | None = None
    workdir: Path | None = None
    wheel_dir: Path | None = None
    install: bool = False
    sanity: bool = True
    jobs: int = 0
    dry_run: bool = False
    resources_root: Path | None = None  # read /proc and /sys under it (tests)


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceBuildDone:
    """What ``build-source`` did: the source's plan, and the jobs decision (``dry_run``: nothing was
    built) or the built wheel."""

    plan: SourcePlan
    decision: JobsDecision | None = None  # dry run
    built: SourceBuildResult | None = None


def build_or_plan(
    spec: Spec, req: SourceBuildRequest, *, progress: Callable[[str], None] | None = None
) -> SourceBuildDone:
    """``build-source NAME``: the source's plan on its target and, with ``dry_run``, only the jobs
    decision; else the built wheel (checked out from the pin or ``mirror``, built, maybe installed)."""
    source = find_source(spec, req.name)
    plan = plan_of(spec, target_for(spec, source, req.target), source)
    root = req.resources_root
    resources = read_resources(proc=root / "proc", sys=root / "sys") if root is not None else None
    if req.dry_run:
        return SourceBuildDone(plan=plan, decision=decide(plan.jobs, resources or read_resources(), jobs=req.jobs))
    inputs = BuildInputs(
        python=resolve_python(req.venv),
        workdir=req.workdir or default_dest(spec.root, source),
        wheel_dir=req.wheel_dir or spec.root / ".megacpp" / "wheels" / source.name,
        overlays=layout.overlays_dir(spec.root),
        mirror=req.mirror,
        jobs=req.jobs,
        install=req.install,
        sanity=req.sanity,
        resources=resources,
    )
    return SourceBuildDone(plan=plan, built=build_source(plan, inputs, progress=progress))
