"""The exact spec inputs of one lock (target + platform) and their hash.

The inputs are everything that decides a resolution and comes from the spec and the committed
upstream facts: the requirements (the target's own, every source's runtime and build requirements from
``facts/<source>.toml``, what the spec adds per source, ``uv==<toolchain.uv>``, the tool's runtime
deps; requirements on distributions the target builds from its own sources are checked, not resolved),
the reviewed overrides, the Python version, the platform and the explicit indexes. Their sha256 over
canonical JSON is recorded in the lock (``[tool.megacpp-env].inputs-hash``); ``lock check``
recomputes it offline.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from megacpp_env.fsutil import canonical_hash, canonical_json
from megacpp_env.layout import TOOL_REQUIREMENTS
from megacpp_env.spec.model import Index, Spec, Target

INPUTS_VERSION = 2  # bump when the meaning of the inputs changes: every lock becomes stale
# 2: requirements are sorted canonically (their order in stack.yaml does not decide a resolution)


@dataclass(frozen=True, kw_only=True, slots=True)
class LockInputs:
    target: str
    platform: str
    python: str
    requirements: tuple[str, ...]  # deduplicated, sorted canonically (see lock_requirements)
    indexes: tuple[Index, ...]  # every explicit index of the spec, by name
    overrides: tuple[str, ...] = ()  # uv override-dependencies (targets.T.resolutions.overrides), sorted
    prereleases: tuple[str, ...] = ()  # packages allowed pre-releases from any index (resolutions.prereleases)
    part: str = ""  # a toolchain lock of the target ("cuda": toolchain.cuda.pypi); "" for the venv lock

    @property
    def direct_names(self) -> tuple[str, ...]:
        return tuple(sorted({parse_requirement(r)[1] for r in self.requirements}))

    def prerelease_packages(self) -> tuple[str, ...]:
        """Packages allowed to resolve to pre-releases: those of indexes with ``prerelease: true``."""
        scoped = {canonicalize_name(p) for i in self.indexes if i.prerelease for p in i.packages}
        return tuple(sorted(scoped | {canonicalize_name(p) for p in self.prereleases}))

    def index_of(self, package: str) -> Index | None:
        name = canonicalize_name(package)
        for index in self.indexes:
            if name in {canonicalize_name(p) for p in index.packages}:
                return index
        return None

    def needed_indexes(self) -> tuple[Index, ...]:
        """The explicit indexes a direct requirement is pinned to (the ones this lock cannot do without)."""
        names = set(self.direct_names)
        return tuple(i for i in self.indexes if names & {canonicalize_name(p) for p in i.packages})

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": INPUTS_VERSION,
            "target": self.target,
            "platform": self.platform,
            "python": self.python,
            "requirements": list(canonical_order(self.requirements)),
            "indexes": [_index_dict(i) for i in self.indexes],
        }
        if self.overrides:  # absent when none, so locks without overrides keep their hash
            out["overrides"] = list(self.overrides)
        if self.prereleases:
            out["prereleases"] = list(self.prereleases)
        if self.part:
            out["part"] = self.part
        return out

    def digest(self) -> str:
        return canonical_hash(self.to_dict())

    def canonical_json(self) -> str:
        return canonical_json(self.to_dict())


def _index_dict(index: Index) -> dict[str, Any]:
    # reachable_here describes this machine, not the resolution: it is not an input.
    return {
        "name": index.name,
        "url": index.url,
        "explicit": index.explicit,
        "packages": sorted(canonicalize_name(p) for p in index.packages),
        "prerelease": index.prerelease,
    }


@functools.lru_cache(maxsize=4096)
def parse_requirement(req: str) -> tuple[str, str]:
    """(normalised requirement string, canonical name); cached: the same strings recur across targets."""
    parsed = Requirement(req)
    return str(parsed), canonicalize_name(parsed.name)


def lock_requirements(spec: Spec, target: Target) -> tuple[str, ...]:
    """The target's requirements, its sources' (facts) and the spec's additions, the pinned uv, the tool's
    own runtime deps; deduplicated and sorted by canonical name, then by the normalised string:
    reordering stack.yaml changes no lock."""
    from megacpp_env.deps.graph import target_deps

    found = target_deps(spec, target).lock_requirements()
    return canonical_order((*found, f"uv=={target.toolchain.uv}", *TOOL_REQUIREMENTS))


def canonical_order(requirements: Iterable[str]) -> tuple[str, ...]:
    """Normalised, deduplicated, sorted by (canonical name, normalised string)."""
    parsed = {parse_requirement(r) for r in requirements}
    return tuple(text for text, _name in sorted(parsed, key=lambda r: (r[1], r[0])))


def toolchain_lock_inputs(spec: Spec, target: Target, part: str, platform: str) -> LockInputs:
    """The inputs of a target's toolchain lock: only the toolchain's own requirements (CUDA wheels),
    resolved for the target's Python and platform, with no overrides: nothing of the venv enters."""
    if part != "cuda":
        raise ValueError(f"unknown toolchain lock part {part!r}")
    return LockInputs(
        target=target.name,
        platform=platform,
        python=target.toolchain.python,
        requirements=canonical_order(target.toolchain.cuda_pypi),
        indexes=spec.target_indexes(target),
        part=part,
    )


def lock_inputs(spec: Spec, target: Target, platform: str) -> LockInputs:
    return LockInputs(
        target=target.name,
        platform=platform,
        python=target.toolchain.python,
        requirements=lock_requirements(spec, target),
        indexes=spec.target_indexes(target),
        overrides=tuple(sorted(str(Requirement(o.requirement)) for o in target.resolutions.overrides)),
        prereleases=tuple(sorted(canonicalize_name(p) for p in target.resolutions.prereleases)),
    )
