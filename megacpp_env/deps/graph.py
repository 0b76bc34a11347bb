"""The requirements of one target, each with who requires it and where that is written:

* the target's own (``targets.T.requirements``);
* each source's runtime requirements, from its facts (the built wheel's METADATA when the facts carry
  one, otherwise the static read), and its build requirements (``--no-build-isolation`` builds need
  them in the venv; not for ``install: path`` sources, which are never built);
* what the stack adds per source (``sources.S.extra_requirements``);
* declared run-time couplings (``sources.S.needs``), with the version floor upstream gives the
  coupling in an extra when it has one (mamba's ``[causal-conv1d]``: ``causal-conv1d>=1.2.0``).

Distributions built from the target's own sources are not resolved from an index: requirements on
them are checked against the version their facts give (``built``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from megacpp_env.facts.model import SourceFacts
from megacpp_env.facts.store import FACTS_DIR, load_facts
from megacpp_env.layout import PLATFORM_ARCH
from megacpp_env.spec.model import Override, Provides, Source, Spec, Target


@dataclass(frozen=True, kw_only=True, slots=True)
class Need:
    requirer: str  # "target gb10", "mamba_ssm", "vllm (build)", "megatron_lm (stack)"
    requirement: str
    where: str
    kind: str  # target | runtime | build | stack | needs

    @property
    def req(self) -> Requirement:
        return _parse(self.requirement)

    @property
    def name(self) -> str:
        return canonicalize_name(self.req.name)

    def label(self) -> str:
        return f"{self.requirer} requires {self.requirement} ({self.where})"


@dataclass(frozen=True, kw_only=True, slots=True)
class Built:
    source: str
    name: str  # canonical distribution name
    version: str
    where: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TargetDeps:
    target: str
    platforms: tuple[str, ...]
    python: str
    needs: tuple[Need, ...]
    built: dict[str, Built] = field(default_factory=dict)
    overrides: tuple[Override, ...] = ()
    provides: tuple[Provides, ...] = ()
    missing_facts: tuple[str, ...] = ()

    def on(self, name: str) -> list[Need]:
        canon = canonicalize_name(name)
        return [n for n in self.needs if n.name == canon]

    def override_for(self, name: str) -> Override | None:
        canon = canonicalize_name(name)
        return next((o for o in self.overrides if canonicalize_name(_parse(o.requirement).name) == canon), None)

    def lock_requirements(self) -> tuple[str, ...]:
        """What the index must provide: every requirement except those on distributions built here."""
        return tuple(n.requirement for n in self.needs if n.name not in self.built)

    def applies(self, need: Need, platform: str) -> bool:
        return applies(need.req, platform, self.python)


@functools.lru_cache(maxsize=8192)
def _parse(text: str) -> Requirement:
    return Requirement(text)


def marker_env(platform: str, python: str) -> dict[str, str]:
    """The PEP 508 environment of a target platform (Linux, CPython ``python``), no extra."""
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "platform_machine": PLATFORM_ARCH[platform],
        "platform_system": "Linux",
        "sys_platform": "linux",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_version": "",
        "implementation_version": f"{python}.0",
        "extra": "",
    }


def applies(req: Requirement, platform: str, python: str) -> bool:
    return req.marker is None or req.marker.evaluate(marker_env(platform, python))


def _listed(requirer: str, key: str, requirements: Sequence[str], kind: str) -> list[Need]:
    """The requirements stack.yaml lists under ``key``, each where it stands (``key[i]``)."""
    return [
        Need(requirer=requirer, requirement=r, where=f"stack.yaml {key}[{i}]", kind=kind)
        for i, r in enumerate(requirements)
    ]


def target_deps(spec: Spec, target: Target) -> TargetDeps:
    facts = load_facts(spec.root, tuple(s.name for s in target.sources))
    needs = _listed(f"target {target.name}", f"targets.{target.name}.requirements", target.requirements, "target")
    built: dict[str, Built] = {}
    for src in target.sources:
        f = facts.get(src.name)
        if f is not None and f.distribution.name:
            name = canonicalize_name(f.distribution.name)
            built[name] = Built(
                source=src.name,
                name=name,
                version=f.distribution.version,
                where=f"{FACTS_DIR}/{src.name}.toml distribution.version",
            )
            needs += _source_needs(src, f)
        needs += _listed(
            f"{src.name} (stack)", f"sources.{src.name}.extra_requirements", src.extra_requirements, "stack"
        )
        needs += _coupling_needs(spec, src, f, facts.facts)
    missing = tuple(s.name for s in target.sources if facts.get(s.name) is None)
    return TargetDeps(
        target=target.name,
        platforms=target.platforms,
        python=target.toolchain.python,
        needs=tuple(needs),
        built=built,
        overrides=target.resolutions.overrides,
        provides=target.resolutions.provides,
        missing_facts=missing,
    )


def _source_needs(src: Source, f: SourceFacts) -> list[Need]:
    """The facts' requirements of ``src``, less those its build drops (``drop_requirements``)."""
    dist = f.distribution
    path = f"{FACTS_DIR}/{src.name}.toml"
    origin = f"wheel {dist.wheel.file} METADATA" if dist.wheel is not None else dist.requires_from
    out = [
        Need(requirer=src.name, requirement=r, where=f"{path}: {origin}", kind="runtime") for r in dist.runtime_requires
    ]
    if src.install == "wheel":
        out += [
            Need(
                requirer=f"{src.name} (build)", requirement=r, where=f"{path}: {dist.build_requires_from}", kind="build"
            )
            for r in dist.build_requires
        ]
    dropped = {canonicalize_name(n) for n in src.drop_requirements}
    return [n for n in out if n.name not in dropped]


def _coupling_needs(spec: Spec, src: Source, f: SourceFacts | None, all_facts: dict[str, SourceFacts]) -> list[Need]:
    out = []
    for name, reason in src.needs.items():
        other = all_facts.get(name)
        if other is None or not other.distribution.name:
            continue
        dist = canonicalize_name(other.distribution.name)
        floor = _extra_requirement(f, dist) if f is not None else None
        where = f"stack.yaml sources.{src.name}.needs.{name} ({reason})"
        if floor is not None:
            where += f"; version from {FACTS_DIR}/{src.name}.toml extras"
        out.append(Need(requirer=src.name, requirement=floor or other.distribution.name, where=where, kind="needs"))
    return out


def _extra_requirement(f: SourceFacts, dist: str) -> str | None:
    """The requirement on ``dist`` an extra of ``f``'s distribution declares (upstream's version floor)."""
    for reqs in f.distribution.extras.values():
        for r in reqs:
            if canonicalize_name(_parse(r).name) == dist:
                return r
    return None
