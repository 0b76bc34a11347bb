"""The lock gate: diff the committed locks at a git ref against the working tree and apply the policy.

Policy (each finding is a Violation unless a reviewed acknowledgement matches it):
  * hashes-changed  -- same version, different artifact hashes (a re-upload or a swapped file);
  * index-changed   -- a package now comes from another index;
  * downgraded      -- any version going down;
  * toolchain       -- any change of torch, triton, pytorch-triton, nvidia-*, cuda-* in an existing lock;
  * divergence      -- locks that must agree (platforms of a target, aligned targets) resolve differently.
A lock that did not exist at the base ref is new: it is shown, only the divergence rule applies to it.

Acknowledgements live in ``locks/ACKNOWLEDGED.toml`` (committed, reviewed in the pull request)::

    [[ack]]
    package = "torch"                 # canonical name (fnmatch patterns allowed: "nvidia-*")
    change = "upgraded"               # a change kind or "divergence"
    reason = "nightly 20261120 fixes sm_121a"   # required, non-empty
    target = "gb10"                   # optional: only this target (or divergence group)
    platform = "linux/arm64"          # optional
    version = "2.13.0.dev20261120+cu132"   # optional: only this new version
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from megacpp_env import layout
from megacpp_env.errors import SpecError
from megacpp_env.lock.consistency import GroupReport
from megacpp_env.lock.diff import DOWNGRADED, HASHES, INDEX, KINDS, LockDiff

TOOLCHAIN_PACKAGES = ("torch", "triton", "pytorch-triton", "nvidia-*", "cuda-*")
DIVERGENCE = "divergence"
ACK_FILE = "ACKNOWLEDGED.toml"
RULES = {HASHES: "same version, different hashes", INDEX: "index changed", DOWNGRADED: "downgrade"}


def ack_path(root: Path) -> Path:
    return layout.locks_dir(root) / ACK_FILE


def is_toolchain(name: str) -> bool:
    return any(fnmatch.fnmatchcase(canonicalize_name(name), pat) for pat in TOOLCHAIN_PACKAGES)


@dataclass(frozen=True, kw_only=True, slots=True)
class Violation:
    lock: str  # "gb10 linux/arm64" or a divergence group name
    package: str
    change: str
    rule: str
    detail: str = ""
    version: str = ""  # the new version, when there is one

    def line(self) -> str:
        tail = f": {self.detail}" if self.detail else ""
        return f"{self.lock}: {self.package} {self.change} ({self.rule}){tail}"

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("lock", "package", "change", "rule", "detail", "version")}


@dataclass(frozen=True, kw_only=True, slots=True)
class Ack:
    package: str
    change: str
    reason: str
    target: str = ""
    platform: str = ""
    version: str = ""

    def matches(self, v: Violation) -> bool:
        if self.change != v.change or not fnmatch.fnmatchcase(canonicalize_name(v.package), self.package):
            return False
        if self.target and self.target not in v.lock.replace("+", " ").split():
            return False
        if self.platform and self.platform not in v.lock.split():
            return False
        return not self.version or self.version == v.version

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("package", "change", "reason", "target", "platform", "version")}


def load_acks(path: Path, *, required: bool = False) -> list[Ack]:
    """Read the acknowledgement file; a missing file means no acknowledgements unless ``required``
    (a path the user named explicitly must exist)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if required:
            raise SpecError("acknowledgement file does not exist", file=str(path), key="--ack") from None
        return []
    except OSError as exc:
        raise SpecError(f"cannot read the acknowledgement file: {exc.strerror or exc}", file=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"not valid TOML: {exc}", file=str(path)) from None
    entries = data.get("ack", [])
    if not isinstance(entries, list):
        raise SpecError("expected [[ack]] tables", file=str(path), key="ack")
    return [_ack(entry, i, path) for i, entry in enumerate(entries)]


def _ack(entry: Any, i: int, path: Path) -> Ack:
    key = f"ack[{i}]"
    if not isinstance(entry, dict):
        raise SpecError("expected a table", file=str(path), key=key)
    for field in ("package", "change", "reason"):
        if not str(entry.get(field, "")).strip():
            raise SpecError(
                f"missing {field!r}",
                file=str(path),
                key=f"{key}.{field}",
                remedy="every acknowledgement names the package, the change and a reason",
            )
    change = str(entry["change"])
    if change not in (*KINDS, DIVERGENCE):
        raise SpecError(
            f"unknown change {change!r} (one of: {', '.join((*KINDS, DIVERGENCE))})",
            file=str(path),
            key=f"{key}.change",
        )
    unknown = set(entry) - {"package", "change", "reason", "target", "platform", "version"}
    if unknown:
        raise SpecError(f"unknown keys: {', '.join(sorted(unknown))}", file=str(path), key=key)
    return Ack(
        package=canonicalize_name(str(entry["package"])) if "*" not in str(entry["package"]) else str(entry["package"]),
        change=change,
        reason=str(entry["reason"]).strip(),
        target=str(entry.get("target", "")),
        platform=str(entry.get("platform", "")),
        version=str(entry.get("version", "")),
    )


def diff_violations(d: LockDiff, *, new_lock: bool = False) -> list[Violation]:
    """Policy violations of one lock's diff (``new_lock``: no base lock, so nothing "moved")."""
    if new_lock:
        return []
    out = []
    for c in d.changes:
        detail = "; ".join(c.details) or f"{c.old or '-'} -> {c.new or '-'}"
        if c.marker:
            detail = f"entry for {c.marker}: {detail}"
        for kind in c.kinds:
            if kind in RULES:
                out.append(
                    Violation(lock=d.title, package=c.name, change=kind, rule=RULES[kind], detail=detail, version=c.new)
                )
            elif is_toolchain(c.name):
                out.append(
                    Violation(
                        lock=d.title,
                        package=c.name,
                        change=kind,
                        rule="toolchain package",
                        detail=detail,
                        version=c.new,
                    )
                )
    return out


def divergence_violations(reports: Sequence[GroupReport]) -> list[Violation]:
    return [
        Violation(
            lock=r.group.name,
            package=dv.package,
            change=DIVERGENCE,
            rule="cross-target divergence",
            detail=", ".join(f"{k}: {v}" for k, v in sorted(dv.versions.items())),
        )
        for r in reports
        for dv in r.failing
    ]


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    violations: tuple[Violation, ...]  # not acknowledged
    acknowledged: tuple[tuple[Violation, Ack], ...]
    unused: tuple[Ack, ...]

    @property
    def passed(self) -> bool:
        return not self.violations


def apply_acks(violations: Sequence[Violation], acks: Sequence[Ack]) -> Verdict:
    open_, acked, used = [], [], set()
    for v in violations:
        match = next((i for i, a in enumerate(acks) if a.matches(v)), None)
        if match is None:
            open_.append(v)
        else:
            acked.append((v, acks[match]))
            used.add(match)
    return Verdict(
        violations=tuple(open_), acknowledged=tuple(acked), unused=tuple(a for i, a in enumerate(acks) if i not in used)
    )
