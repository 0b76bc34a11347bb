"""What several rules ask of a target: its GPU class, its requirements with their keys, a package
it gets from a provider, and whether a constraint admits versions below a floor."""

from __future__ import annotations

import re

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from megacpp_env.spec.model import Target


def sm_major(arch: str) -> int:
    m = re.fullmatch(r"sm_([0-9]+?)([0-9])[af]?", arch)
    return int(m.group(1)) if m else 0


def is_gb10_class(target: Target) -> bool:
    """Targets whose GPUs are consumer/DGX-Spark Blackwell (sm_12x): the GB10 rules apply."""
    return bool(target.gpu) and any(sm_major(a) == 12 for a in target.gpu.archs)  # type: ignore[union-attr]


def admits_below(spec_text: str, floor: str) -> bool:
    """Whether a specifier set admits some version below ``floor``.

    It does unless one of its clauses is a lower bound at or above the floor (``>=4.4.2``, ``>4.4.2``,
    ``==4.5.0``, ``~=4.4.2``); ``>4.4.1`` admits 4.4.1.5 and so counts as below.
    """
    floor_v = Version(floor)
    lower_bounds = (">=", "~=", ">", "==", "===")
    for s in SpecifierSet(spec_text):
        if s.operator in lower_bounds and "*" not in s.version and Version(s.version) >= floor_v:
            return False
    return True


def requirements(target: Target) -> list[tuple[str, Requirement]]:
    """(key, requirement) of the target's own requirements and its sources' extra ones."""
    out = [(f"targets.{target.name}.requirements[{i}]", Requirement(r)) for i, r in enumerate(target.requirements)]
    for src in target.sources:
        out += [
            (f"sources.{src.name}.extra_requirements[{i}]", Requirement(r))
            for i, r in enumerate(src.extra_requirements)
        ]
    return out


def provided_instead(target: Target, name: str) -> bool:
    """A package the target removes with an override (``; sys_platform == 'never'``) and gets from a
    declared provider instead (triton from pytorch-triton): it is never installed from any index."""
    canon = canonicalize_name(name)
    provided = {canonicalize_name(p.provides) for p in target.resolutions.provides}
    for o in target.resolutions.overrides:
        req = Requirement(o.requirement)
        if canonicalize_name(req.name) == canon and req.marker is not None and not req.marker.evaluate({}):
            return canon in provided
    return False
