"""From the spec to what the source-build package reads: build plans and source mirror requests.

Kept out of ``megacpp_env.srcbuild`` on purpose: it needs the spec, which images' source stages
never load. Never prints.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from megacpp_env import layout
from megacpp_env.errors import SpecError
from megacpp_env.spec.model import Source, Spec, Target
from megacpp_env.srcbuild.mirror import MirrorRequest, Pin
from megacpp_env.srcbuild.plan import SourcePlan, plan_for


def plan_of(spec: Spec, target: Target, source: Source) -> SourcePlan:
    """The plan of ``source`` on ``target``, with the target's own sanity checks for it added."""
    checked = replace(source, sanity=target.sanity_for(source))
    return plan_for(target, checked, {name: spec.source(name) for name in source.fetches.values()})


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
    pins = [Pin(url=source.repo, commit=source.commit, submodules=source.submodules)]
    for name in sorted(set(source.fetches.values())):
        fetched = spec.source(name)
        pins.append(Pin(url=fetched.repo, commit=fetched.commit, submodules=fetched.submodules))
    return MirrorRequest(source=source.name, pins=tuple(pins))


def mirror_requests(spec: Spec, target: Target) -> list[MirrorRequest]:
    return [mirror_request(spec, src) for src in target.sources]


def plan_path(root: Path, target: str, source: str) -> Path:
    return layout.source_plans_dir(root, target) / f"{source}.json"
