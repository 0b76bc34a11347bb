"""What ``reproduce`` could not re-create, in words, with what to do about it; and its report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from megacpp_env.records import Record
from megacpp_env.repro.portable import Comparison


@dataclass(frozen=True, kw_only=True, slots=True)
class Unrecreated(Record):
    what: str  # "numpy 1.26.0", "checkout mamba", "the venv's Python"
    why: str
    remedy: str

    def line(self) -> str:
        return f"{self.what}: {self.why} -> {self.remedy}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ReproduceReport:
    golden: str
    venv: str
    python: str  # the interpreter the venv was made from
    checkouts: dict[str, str]  # name -> re-created directory
    installed: dict[str, str]  # distribution -> how (index, mirror, rebuilt, editable, vcs, url)
    unrecreated: tuple[Unrecreated, ...]
    comparison: Comparison | None  # None when nothing could be compared
    notes: tuple[str, ...] = ()
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        return self.comparison is not None and self.comparison.identical and not self.unrecreated

    def to_dict(self) -> dict[str, Any]:
        comparison = self.comparison
        return {
            "golden": self.golden,
            "identical": self.identical,
            "venv": self.venv,
            "python": self.python,
            "checkouts": dict(sorted(self.checkouts.items())),
            "installed": dict(sorted(self.installed.items())),
            "unrecreated": [u.to_dict() for u in self.unrecreated],
            "golden_portable_digest": comparison.golden_digest if comparison else None,
            "reproduced_portable_digest": comparison.live_digest if comparison else None,
            "diff": comparison.report.to_dict() if comparison else None,
            "differing_facts": list(comparison.differing) if comparison else [],
            "notes": list(self.notes),
            "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
        }


def render(report: ReproduceReport) -> str:
    """The text a user reads: the verdict first, then what differs and what could not be made."""
    lines = [
        f"reproduce {report.golden}: {'identical' if report.identical else 'NOT identical'}",
        f"  venv {report.venv} (from {report.python}); {len(report.installed)} distributions installed",
        *(f"  checkout {name}: {path}" for name, path in sorted(report.checkouts.items())),
    ]
    if report.comparison is not None:
        c = report.comparison
        lines.append(f"  portable digest: golden {c.golden_digest}, reproduced {c.live_digest}")
        explained = [f"  differs: {f.message}" for f in c.report.findings if f.severity != "note"]
        lines += explained or [f"  differs: {key}" for key in c.differing[:20]]
    lines += [f"  could not re-create {u.line()}" for u in report.unrecreated]
    lines += [f"  note: {n}" for n in report.notes]
    return "\n".join(lines) + "\n"
