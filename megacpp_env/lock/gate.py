"""The lock gate: diff the committed locks at a git ref against the working tree and apply the policy.

Policy (each finding is a Violation unless a reviewed acknowledgement matches it):
  * hashes-changed  -- same version, different artifact hashes (a re-upload or a swapped file);
  * index-changed   -- a package now comes from another index;
  * downgraded      -- any version going down;
  * toolchain       -- any change of torch, triton, pytorch-triton, nvidia-*, cuda-* in an existing lock;
  * divergence      -- locks that must agree (platforms of a target, aligned targets) resolve differently.
A lock that did not exist at the base ref is new: it is shown, only the divergence rule applies to it.

Acknowledgements live in ``locks/ACKNOWLEDGED.toml`` (committed, reviewed in the pull request; the
format and its reader are in ``megacpp_env.lock.acks``).
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from megacpp_env import layout
from megacpp_env.findings import CodeDoc, Finding
from megacpp_env.layout import parse_lock_name
from megacpp_env.lock.acks import DIVERGENCE, Ack, ack_path, load_acks
from megacpp_env.lock.consistency import GroupReport, check_locks
from megacpp_env.lock.diff import DOWNGRADED, HASHES, INDEX, LockDiff
from megacpp_env.lock.gitlocks import lock_pairs
from megacpp_env.records import HIDDEN, Record
from megacpp_env.spec.model import Spec

TOOLCHAIN_PACKAGES = ("torch", "triton", "pytorch-triton", "nvidia-*", "cuda-*")
RULES = {HASHES: "same version, different hashes", INDEX: "index changed", DOWNGRADED: "downgrade"}


def is_toolchain(name: str) -> bool:
    return any(fnmatch.fnmatchcase(canonicalize_name(name), pat) for pat in TOOLCHAIN_PACKAGES)


# the gate's codes (``explain LG001``), by the rule a violation breaks
CODE_OF = {RULES[HASHES]: "LG001", RULES[INDEX]: "LG002", RULES[DOWNGRADED]: "LG003", "toolchain package": "LG004",
           "cross-target divergence": "LG005"}  # fmt: skip
UNUSED_ACK = "LG006"
ACK_REMEDY = "acknowledge it in locks/ACKNOWLEDGED.toml (reviewed in the pull request) or undo it"


@dataclass(frozen=True, kw_only=True, slots=True)
class Violation(Record):
    lock: str  # "gb10 linux/arm64" or a divergence group name
    package: str
    change: str
    rule: str
    detail: str = ""
    version: str = ""  # the new version, when there is one
    # where a CI annotation points (not in to_dict): the lock file (a divergence: the spec) and the line of
    # the package's entry in it (0: not in the file)
    file: str = field(default="", metadata=HIDDEN)
    at: int = field(default=0, metadata=HIDDEN)

    def line(self) -> str:
        tail = f": {self.detail}" if self.detail else ""
        return f"{self.lock}: {self.package} {self.change} ({self.rule}){tail}"

    def finding(self, acknowledged: str = "") -> Finding:
        """The finding of this violation (``acknowledged``: the reviewed reason that covers it)."""
        return Finding(
            code=CODE_OF[self.rule],
            severity="error",
            message=self.line(),
            file=self.file,
            line=self.at,
            key=f"{self.lock}: {self.package}",
            remedy=ACK_REMEDY,
            suppressed=acknowledged,
            area=self.lock,
        )


_FAMILY = "lock gate (megacpp-env gate --base REF)"
_SILENCE = "an entry in locks/ACKNOWLEDGED.toml: [[ack]] package, change, reason (and target, platform, version)"
CODES = (
    CodeDoc(
        code="LG001",
        severity="error",
        summary="same version, different artifact hashes",
        family=_FAMILY,
        doc="A package kept its version but its wheels or sdist hash differently: a re-upload or a swapped "
        "file. Review where the new artifact comes from before acknowledging it.",
        example="gb10 linux/arm64: torch hashes-changed (same version, different hashes): 2.13.0 -> 2.13.0",
        silence=_SILENCE,
    ),
    CodeDoc(
        code="LG002",
        severity="error",
        summary="a package now comes from another index",
        family=_FAMILY,
        example="gb10 linux/arm64: numpy index-changed (index changed): https://pypi.org/simple -> ...",
        silence=_SILENCE,
    ),
    CodeDoc(
        code="LG003",
        severity="error",
        summary="a version went down",
        family=_FAMILY,
        example="smoke linux/amd64: packaging downgraded (downgrade): 25.0 -> 24.2",
        silence=_SILENCE,
    ),
    CodeDoc(
        code="LG004",
        severity="error",
        summary="a toolchain package changed in an existing lock",
        family=_FAMILY,
        doc="Any change of torch, triton, pytorch-triton, nvidia-* or cuda-* in a lock "
        "that existed at the base ref: the kernels are built against them.",
        example="gb10 linux/arm64: torch upgraded (toolchain package): 2.13.0.dev20260412 -> 2.13.0.dev20260413",
        silence=_SILENCE,
    ),
    CodeDoc(
        code="LG005",
        severity="error",
        summary="locks that must agree resolve differently",
        family=_FAMILY,
        doc="The platforms of one target, and the targets of an `aligned` group of stack.yaml, resolve "
        "every package to one version unless the group allows it to diverge.",
        example="gb10+cloud: numpy divergence (cross-target divergence): gb10: 2.3.0, cloud: 2.2.6",
        silence=_SILENCE + "; or allow_divergence in the aligned group",
    ),
    CodeDoc(
        code=UNUSED_ACK,
        severity="warning",
        summary="every acknowledgement covers a change",
        family=_FAMILY,
        doc="An acknowledgement that covers no violation would silently cover a later one.",
        example="Unused acknowledgements (remove them): torch upgraded (target gb10)",
        silence="cannot be suppressed: remove the entry",
    ),
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


def covers(ack: Ack, v: Violation) -> bool:
    """The acknowledgement is for this violation: package (pattern), change and, where it names
    them, the target (or divergence group), the platform and the new version."""
    if ack.change != v.change or not fnmatch.fnmatchcase(canonicalize_name(v.package), ack.package):
        return False
    if ack.target and ack.target not in v.lock.replace("+", " ").split():
        return False
    if ack.platform and ack.platform not in v.lock.split():
        return False
    return not ack.version or ack.version == v.version


def apply_acks(violations: Sequence[Violation], acks: Sequence[Ack]) -> Verdict:
    open_, acked, used = [], [], set()
    for v in violations:
        match = next((i for i, a in enumerate(acks) if covers(a, v)), None)
        if match is None:
            open_.append(v)
        else:
            acked.append((v, acks[match]))
            used.add(match)
    unused = dict.fromkeys(a for i, a in enumerate(acks) if i not in used)  # an entry written twice: once
    return Verdict(violations=tuple(open_), acknowledged=tuple(acked), unused=tuple(unused))


@dataclass(frozen=True, kw_only=True, slots=True)
class GateReport:
    """Everything ``gate`` found: the diff of each lock against the base ref, the consistency of the
    groups, and the verdict after the acknowledgements. Rendered by ``lock.report.render_gate``."""

    base: str
    commit: str
    diffs: tuple[LockDiff, ...]
    new_locks: tuple[str, ...]  # titles of locks that did not exist at the base
    reports: tuple[GroupReport, ...]
    verdict: Verdict
    ack_name: str
    ack_path: str = ""  # the acknowledgement file (where an unused entry is reported)

    def findings(self) -> list[Finding]:
        """Every violation (acknowledged ones suppressed, with the reason) and every unused acknowledgement."""
        v = self.verdict
        ack_file = self.ack_path
        return [
            *(x.finding() for x in v.violations),
            *(x.finding(a.reason) for x, a in v.acknowledged),
            *(
                Finding(
                    code=UNUSED_ACK,
                    severity="warning",
                    message=f"the acknowledgement {a.label()} covers no change",
                    file=ack_file,
                    key=a.label(),
                    remedy="remove it",
                )
                for a in v.unused
            ),
        ]

    def to_dict(self) -> dict[str, Any]:
        """The JSON keys beside ``locks`` (a user interface: keep them stable)."""
        v = self.verdict
        return {
            "base": self.base,
            "commit": self.commit,
            "passed": v.passed,
            "new_locks": list(self.new_locks),
            "violations": [x.to_dict() for x in v.violations],
            "acknowledged": [{"violation": x.to_dict(), "ack": a.to_dict()} for x, a in v.acknowledged],
            "unused_acks": [a.to_dict() for a in v.unused],
            "consistency": [{"group": r.group.name, "summary": r.summary()} for r in self.reports],
        }


def package_line(text: str, package: str) -> int:
    """The line of the ``[[packages]]`` entry of ``package`` in a pylock's text (0 when it has none)."""
    want = canonicalize_name(package)
    header = 0
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped == "[[packages]]":
            header = number
        elif header and stripped.startswith("name") and "=" in stripped:
            value = stripped.split("=", 1)[1].strip().strip("\"'")
            if canonicalize_name(value) == want:
                return header
    return 0


def _placed(v: Violation, lock: Path) -> Violation:
    """``v`` with its lock file and the line of the package's entry in it."""
    try:
        text = lock.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    return dataclasses.replace(v, file=str(lock.absolute()), at=package_line(text, v.package))


def run_gate(spec: Spec, base: str, ack_file: Path | None = None) -> GateReport:
    """Diff the committed locks at ``base`` against the working tree and apply the policy. An
    ``ack_file`` named explicitly must exist; the default one (locks/ACKNOWLEDGED.toml) may not."""
    commit, pairs = lock_pairs(spec.root, base)
    diffs = tuple(p.diff() for p in pairs)
    locks = layout.locks_dir(spec.root)
    violations = [
        _placed(v, locks / p.name)
        for p, d in zip(pairs, diffs, strict=True)
        for v in diff_violations(d, new_lock=p.base is None)
    ]
    heads = {key: p.head for p in pairs if p.head is not None and (key := parse_lock_name(p.name))}
    reports = tuple(check_locks(spec, heads))  # the locks just read, not read again
    violations += [
        dataclasses.replace(v, file=str(spec.path.absolute()), at=spec.line_of("aligned") or 1)
        for v in divergence_violations(reports)
    ]
    path = ack_file if ack_file is not None else ack_path(spec.root)
    verdict = apply_acks(violations, load_acks(path, required=ack_file is not None))
    return GateReport(
        base=base,
        commit=commit,
        diffs=diffs,
        new_locks=tuple(sorted(p.title for p in pairs if p.base is None)),
        reports=reports,
        verdict=verdict,
        ack_name=path.name,
        ack_path=str(path.absolute()),
    )
