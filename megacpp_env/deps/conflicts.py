"""Conflicts between requirers that can be decided without an index: two requirements on one package
whose specifiers cannot both hold (``tilelang==0.1.8`` from mamba_ssm, ``tilelang==0.1.12`` from vllm),
and a requirement on a distribution built here that its built version does not meet
(vllm's ``flashinfer-python==0.6.18`` against the flashinfer source's 0.6.17). A package with a
declared override is judged by the override alone, as uv resolves it (``override-dependencies``).
Markers are evaluated for each platform of the target; a pair that never meets is no conflict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from packaging.specifiers import SpecifierSet

from megacpp_env.deps.graph import Need, TargetDeps
from megacpp_env.deps.intervals import admits, disjoint


@dataclass(frozen=True, kw_only=True, slots=True)
class Conflict:
    target: str
    package: str
    platforms: tuple[str, ...]
    first: str  # one requirer's label ("mamba_ssm requires tilelang==0.1.8 (facts/...)")
    second: str  # the other's, or what is built
    remedy: str

    @property
    def message(self) -> str:
        return f"{self.package}: {self.first} but {self.second}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "package": self.package,
            "platforms": list(self.platforms),
            "first": self.first,
            "second": self.second,
            "message": self.message,
            "remedy": self.remedy,
        }


def _remedy(deps: TargetDeps, package: str) -> str:
    return (
        f"change one of the pins, or declare a reviewed resolution under targets.{deps.target}.resolutions."
        f'overrides (requirement: "{package}...", reason: why both requirers work with it)'
    )


def find_conflicts(deps: TargetDeps) -> list[Conflict]:
    out: dict[tuple[str, str, str], Conflict] = {}
    for name in sorted({n.name for n in deps.needs}):
        override = deps.override_for(name)
        group = [_override_need(deps, override)] if override is not None else deps.on(name)
        for platform in deps.platforms:
            live = [n for n in group if deps.applies(n, platform)]
            for c in _pairs(deps, name, live, platform) + _built(deps, name, live, platform):
                key = (c.package, c.first, c.second)
                seen = out.get(key)
                out[key] = c if seen is None else _with_platform(seen, platform)
    return list(out.values())


def _override_need(deps: TargetDeps, override: Any) -> Need:
    return Need(
        requirer="override",
        requirement=override.requirement,
        where=f"stack.yaml targets.{deps.target}.resolutions.overrides ({override.reason})",
        kind="override",
    )


def _with_platform(c: Conflict, platform: str) -> Conflict:
    if platform in c.platforms:
        return c
    return Conflict(
        target=c.target,
        package=c.package,
        platforms=(*c.platforms, platform),
        first=c.first,
        second=c.second,
        remedy=c.remedy,
    )


def _pairs(deps: TargetDeps, name: str, live: list[Need], platform: str) -> list[Conflict]:
    out = []
    for i, a in enumerate(live):
        for b in live[i + 1 :]:
            if a.requirer != b.requirer and disjoint(
                SpecifierSet(str(a.req.specifier)), SpecifierSet(str(b.req.specifier))
            ):
                out.append(_conflict(deps, name, platform, a.label(), b.label(), _remedy(deps, name)))
    return out


def _built(deps: TargetDeps, name: str, live: list[Need], platform: str) -> list[Conflict]:
    built = deps.built.get(name)
    if built is None:
        return []
    out = []
    for need in live:
        if not admits(need.req.specifier, built.version):
            second = f"source {built.source} builds {name} {built.version} ({built.where})"
            remedy = (
                f"move the pin of {built.source} to a commit that builds a matching version, or declare a "
                f"reviewed override for {name} under targets.{deps.target}.resolutions.overrides"
            )
            out.append(_conflict(deps, name, platform, need.label(), second, remedy))
    return out


def _conflict(deps: TargetDeps, name: str, platform: str, first: str, second: str, remedy: str) -> Conflict:
    return Conflict(target=deps.target, package=name, platforms=(platform,), first=first, second=second, remedy=remedy)
