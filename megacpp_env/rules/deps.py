"""Rules on the dependency graph of each target: no two requirers that cannot both be satisfied
(unless a reviewed override resolves it), and no two distributions that own the same modules."""

from __future__ import annotations

from collections.abc import Iterator

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from megacpp_env.deps.conflicts import find_conflicts
from megacpp_env.deps.graph import target_deps
from megacpp_env.rules.base import Hit, source_rule, spec_rule, target_rule
from megacpp_env.rules.readers import spec_facts
from megacpp_env.spec.model import Source, Spec, Target

# Distributions that install another distribution's top-level package under a different name.
KNOWN_PROVIDERS = {"pytorch-triton": "triton"}
NEVER = "sys_platform == 'never'"


@target_rule("DP001", "error")
def requirement_conflicts(spec: Spec, t: Target) -> Iterator[Hit]:
    """requirers of one package can all be satisfied

    Every requirer of one package can be satisfied at once (the facts' requirements and the stack's, with the
    target's resolutions): a conflict would only show when the lock fails.

    Trip: add targets.gb10.requirements = quack-kernels==0.3.0
    """
    deps = target_deps(spec, t)
    if deps.missing_facts:
        return  # FA001 says so; the graph is incomplete
    for c in find_conflicts(deps):
        yield (f"targets.{t.name}.resolutions", f"{c.message} [{', '.join(c.platforms)}]", c.remedy)


def _removed(req_text: str) -> bool:
    req = Requirement(req_text)
    return req.marker is not None and not req.marker.evaluate({"sys_platform": "linux"})


@target_rule("DP002", "error")
def module_owners(spec: Spec, t: Target) -> Iterator[Hit]:
    """one distribution per module tree (pytorch-triton vs triton)

    One distribution per module tree: pytorch-triton and triton both own site-packages/triton/, so a target must
    override triton away where pytorch-triton provides it.

    Trip: drop targets.gb10.resolutions.overrides[0]
    """
    deps = target_deps(spec, t)
    names = {n.name for n in deps.needs}
    declared: dict[str, str] = {
        canonicalize_name(p.provider): canonicalize_name(p.provides) for p in t.resolutions.provides
    }
    pairs: dict[str, str] = {**KNOWN_PROVIDERS, **declared}
    for provider, provided in pairs.items():
        if provider not in names or provided not in names:
            continue
        override = deps.override_for(provided)
        requirers = sorted({n.requirer for n in deps.on(provided)})
        if override is None or not _removed(override.requirement):
            yield (
                f"targets.{t.name}.resolutions.overrides",
                f"{provider} and {provided} both install site-packages/{provided.replace('-', '_')}/ and "
                f"overwrite each other; {', '.join(requirers)} require {provided}",
                f'override "{provided} ; {NEVER}" (reason: {provider} provides it) and declare '
                f"provides: {{provider: {provider}, provides: {provided}}}",
            )
        elif provider not in declared:
            yield (
                f"targets.{t.name}.resolutions.provides",
                f"{provided} is removed by an override but no provides alias says {provider} supplies it: "
                f"the post-install check cannot accept {', '.join(requirers)}'s requirement",
                f"declare provides: {{provider: {provider}, provides: {provided}, reason: ...}}",
            )


@spec_rule("DP003", "error")
def resolutions_apply(spec: Spec) -> Iterator[Hit]:
    """resolutions apply: drops name facts requirements, overrides spare explicit indexes

    Resolutions apply: a dropped requirement names one the facts have, and no override replaces a package pinned to
    an explicit index (uv would resolve it without its index).

    Trip: set sources.vllm.drop_requirements.no-such-package = stripped
    """
    for src in spec.sources.values():
        yield from _drops_apply(spec, src)
    for t in spec.targets.values():
        for i, o in enumerate(t.resolutions.overrides):
            index = spec.index_for(Requirement(o.requirement).name, t)
            if index is not None and index.explicit:
                yield (
                    f"targets.{t.name}.resolutions.overrides[{i}]",
                    f"{o.requirement}: {Requirement(o.requirement).name} comes only from the explicit index "
                    f"{index.name}, and uv resolves an overridden requirement without its index (from PyPI)",
                    "drop the requirement at its requirer instead (sources.NAME.drop_requirements), or change the "
                    "target's own requirement",
                )


def _drops_apply(spec: Spec, src: Source) -> Iterator[Hit]:
    f = spec_facts(spec).get(src.name)
    if f is None:
        return
    lines = (*f.distribution.runtime_requires, *f.distribution.build_requires)
    required = {canonicalize_name(Requirement(r).name) for r in lines}
    for name in src.drop_requirements:
        if canonicalize_name(name) not in required:
            yield (
                f"sources.{src.name}.drop_requirements.{name}",
                f"facts/{src.name}.toml does not require {name}: nothing to drop",
                "remove the entry (the source stopped requiring it), or re-extract its facts",
            )


USE_EXISTING_TORCH = "use_existing_torch.py"


@source_rule("DP004", "error")
def stripped_by_pre_build(spec: Spec, src: Source) -> Iterator[Hit]:
    """requirements a pre_build step strips are declared dropped

    vLLM's ``use_existing_torch.py`` deletes every requirement line that contains "torch" (its
    default mode) before the build: the built wheel lacks them, so the lock must not resolve them.

    Trip: drop sources.vllm.drop_requirements.torchcodec
    """
    f = spec_facts(spec).get(src.name)
    if f is None or not any(USE_EXISTING_TORCH in cmd for cmd in src.pre_build):
        return
    lines = (*f.distribution.runtime_requires, *f.distribution.build_requires)
    stripped = sorted({canonicalize_name(Requirement(r).name) for r in lines if "torch" in r.lower()})
    declared = {canonicalize_name(n) for n in src.drop_requirements}
    missing = [n for n in stripped if n not in declared]
    if missing:
        yield (
            f"sources.{src.name}.drop_requirements",
            f"{USE_EXISTING_TORCH} (pre_build) strips {', '.join(missing)} from {src.name}'s requirements "
            f"(every line naming torch, facts/{src.name}.toml), but the lock would still resolve them",
            f"declare them under sources.{src.name}.drop_requirements with the reason",
        )
