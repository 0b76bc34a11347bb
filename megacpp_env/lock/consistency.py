"""Cross-target and cross-platform consistency of locks.

Locks meant to hold the same stack must agree on the version of every package they share:
the platforms of one target (smoke amd64/arm64) and the targets of an ``aligned`` group (gb10 +
cloud). Packages present in only some of the locks (platform-specific dependencies) are reported
but are not divergence. ``allow_divergence`` of the group exempts named packages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from packaging.utils import canonicalize_name

from megacpp_env import layout
from megacpp_env.lock.pylock import Lock, read_pylock
from megacpp_env.records import Record
from megacpp_env.spec.model import Spec

Key = tuple[str, str]  # (target, platform)


@dataclass(frozen=True, kw_only=True, slots=True)
class Group:
    name: str  # "smoke (platforms)" or "aligned gb10+cloud"
    members: tuple[Key, ...]
    allowed: frozenset[str]


@dataclass(frozen=True, kw_only=True, slots=True)
class Divergence(Record):
    group: str
    package: str
    versions: Mapping[str, str]  # "target platform" -> version
    allowed: bool = False

    def line(self) -> str:
        vs = ", ".join(f"{k}: {v}" for k, v in sorted(self.versions.items()))
        tag = " (allowed by spec)" if self.allowed else ""
        return f"{self.group}: {self.package} diverges: {vs}{tag}"


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupReport:
    group: Group
    compared: tuple[Key, ...]  # members that have a lock
    shared: int
    divergences: tuple[Divergence, ...]
    only_in: Mapping[str, tuple[str, ...]]  # "target platform" -> packages no other member has

    @property
    def failing(self) -> tuple[Divergence, ...]:
        return tuple(d for d in self.divergences if not d.allowed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "group": self.group.name,
            "shared": self.shared,
            "divergences": [d.to_dict() for d in self.divergences],
            "only_in": {k: list(v) for k, v in self.only_in.items()},
        }

    def summary(self) -> str:
        n = len(self.failing)
        return (
            f"{self.group.name}: {n} of {self.shared} shared packages diverge"
            if n
            else f"{self.group.name}: consistent ({self.shared} shared packages)"
        )


def groups(spec: Spec) -> list[Group]:
    """Groups to compare: each multi-platform target, then each aligned group."""
    out = []
    for target in spec.targets.values():
        if len(target.platforms) > 1:
            allowed = _allowed_for(spec, target.name)
            out.append(
                Group(
                    name=f"{target.name} (platforms)",
                    members=tuple((target.name, p) for p in target.platforms),
                    allowed=allowed,
                )
            )
    for align in spec.aligned:
        members = tuple((t, p) for t in align.targets if t in spec.targets for p in spec.targets[t].platforms)
        allowed = frozenset(canonicalize_name(n) for n in align.allow_divergence)
        out.append(Group(name=f"aligned {'+'.join(align.targets)}", members=members, allowed=allowed))
    return out


def _allowed_for(spec: Spec, target: str) -> frozenset[str]:
    for align in spec.aligned:
        if target in align.targets:
            return frozenset(canonicalize_name(n) for n in align.allow_divergence)
    return frozenset()


def label(key: Key) -> str:
    return f"{key[0]} {key[1]}"


def compare(group: Group, locks: Mapping[Key, Lock]) -> GroupReport:
    present = tuple(k for k in group.members if k in locks)
    versions: dict[str, dict[str, str]] = {}
    for key in present:
        for pkg in locks[key].packages:
            versions.setdefault(pkg.name, {})[label(key)] = pkg.version
    shared = {n: v for n, v in versions.items() if len(v) > 1}
    divergences = tuple(
        Divergence(group=group.name, package=n, versions=v, allowed=n in group.allowed)
        for n, v in sorted(shared.items())
        if len(set(v.values())) > 1
    )
    only: dict[str, list[str]] = {}
    for n, v in sorted(versions.items()):
        if len(v) == 1 and len(present) > 1:
            only.setdefault(next(iter(v)), []).append(n)
    return GroupReport(
        group=group,
        compared=present,
        shared=len(shared),
        divergences=divergences,
        only_in={k: tuple(v) for k, v in only.items()},
    )


def check(spec: Spec, load: Callable[[Key], Lock | None]) -> list[GroupReport]:
    """Compare every group whose members have at least two locks; ``load`` returns None if missing."""
    cache: dict[Key, Lock | None] = {}
    reports = []
    for group in groups(spec):
        locks = {k: lk for k in group.members if (lk := cache.setdefault(k, load(k))) is not None}
        if len(locks) > 1:
            reports.append(compare(group, locks))
    return reports


def check_locks(spec: Spec, fresh: Mapping[Key, Lock] | None = None) -> list[GroupReport]:
    """``check`` over the committed locks of ``spec.root``, with ``fresh`` (just resolved) taking
    precedence over the files on disk."""

    def load(key: Key) -> Lock | None:
        if fresh and key in fresh:
            return fresh[key]
        path = layout.lock_path(spec.root, *key)
        return read_pylock(path) if path.exists() else None

    return check(spec, load)


def align_constraints(reference: Lock, allowed: frozenset[str]) -> dict[str, str]:
    """``name -> version`` pins from a reference lock, for ``lock resolve --align`` (allowed packages left free)."""
    return {p.name: p.version for p in reference.packages if p.name not in allowed and not p.vcs}
