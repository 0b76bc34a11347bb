"""The one finding record of every check family, and its one severity vocabulary.

The policy rules (``check``), the spec's own validation, the lock gate, ``doctor``, snapshot ``diff``,
the facts check and the post-install dependency check each report ``Finding`` records; the verbs
render them (``findings.formats``: text, JSON, GitHub workflow annotations, SARIF 2.1.0), and
``explain CODE`` prints the documentation of every code (``CodeDoc``) from the families' registries.

Severities (``SEVERITIES``, worst first), the same words in every family:

* ``error``: the check fails (exit 1);
* ``warning``: a problem that does not fail the check, except under ``check --strict``;
* ``info``: a difference worth a look (``diff`` counts it as drift; no check fails on it);
* ``note``: shown, never a problem (a host difference, a timing);
* ``ok``: checked and passed (``doctor`` and the facts check record what they verified).

A finding a reviewed suppression covers keeps its severity and carries the reason in
``suppressed``: it is reported as suppressed, never dropped, and fails nothing.

Stdlib only: ``depcheck`` runs inside images with nothing else of the tool.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Severity = Literal["error", "warning", "info", "note", "ok"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info", "note", "ok")
DOCS_PAGE = "docs/CODES.md"  # every code's documentation, written by `megacpp-env explain --all`

__all__ = ["DOCS_PAGE", "SEVERITIES", "CodeDoc", "Finding", "Severity", "counts", "failing", "ranked"]


def docs_anchor(code: str) -> str:
    """Where a code is documented: ``docs/CODES.md#tc005`` (GitHub's anchor of the heading ``TC005``)."""
    return f"{DOCS_PAGE}#{code.lower()}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    """What one check found at one place: ``code`` (documented by ``explain CODE``), ``severity`` (one of
    ``SEVERITIES``), where (``file``, ``line``, ``key``: the dotted key path in that file, or the
    package, area or lock the family reports on), what is wrong and how to fix it."""

    code: str
    severity: Severity
    message: str
    file: str = ""
    line: int = 0
    key: str = ""
    remedy: str = ""
    suppressed: str = ""  # the reason of the suppression (or acknowledgement) that covers it; "": it counts
    area: str = ""  # the part of what is checked that it is about, where a family groups by it (a snapshot area)

    @property
    def location(self) -> str:
        """``file:line:key``, with the parts it has."""
        return ":".join(p for p in (self.file, str(self.line) if self.line else "", self.key) if p)

    @property
    def docs(self) -> str:
        return docs_anchor(self.code)

    def fails(self, *, strict: bool = False) -> bool:
        """Whether it fails its check: an error, or under ``strict`` a warning; never when suppressed."""
        if self.suppressed:
            return False
        return self.severity == "error" or (strict and self.severity == "warning")

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "file": self.file,
            "line": self.line,
            "key": self.key,
            "location": self.location,
            "remedy": self.remedy,
            "docs": self.docs,
            "suppressed": self.suppressed,
            **({"area": self.area} if self.area else {}),
        }

    def format(self) -> str:
        """One text line: ``FILE:LINE: SEVERITY CODE KEY: message (remedy: ...)``; a suppressed finding
        says so and gives the reason instead of the remedy."""
        where = ":".join(p for p in (self.file, str(self.line) if self.line else "") if p)
        head = f"{where}: " if where else ""
        key = f" {self.key}" if self.key else ""
        if self.suppressed:
            return f"{head}suppressed {self.severity} {self.code}{key}: {self.message} (reason: {self.suppressed})"
        text = f"{head}{self.severity} {self.code}{key}: {self.message}"
        return f"{text} (remedy: {self.remedy})" if self.remedy else text


@dataclass(frozen=True, kw_only=True, slots=True)
class CodeDoc:
    """The documentation of one code, from its family's registry: what ``explain CODE`` prints and
    docs/CODES.md holds."""

    code: str
    severity: Severity  # the severity its findings have (a family that varies it says so in ``doc``)
    summary: str
    family: str  # which check reports it and where: "policy rule (megacpp-env check)"
    doc: str = ""  # what it checks and why
    example: str = ""  # an example: what reports it, what the finding reads
    silence: str = ""  # how to silence it, where it can be

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "summary": self.summary,
            "family": self.family,
            "doc": self.doc,
            "example": self.example,
            "silence": self.silence,
            "docs": docs_anchor(self.code),
        }


def failing(findings: Iterable[Finding], *, strict: bool = False) -> list[Finding]:
    """The findings that fail their check (``Finding.fails``)."""
    return [f for f in findings if f.fails(strict=strict)]


def counts(findings: Iterable[Finding]) -> dict[str, int]:
    """How many findings of each severity count (suppressed ones under ``suppressed``), every key present."""
    out = dict.fromkeys([*SEVERITIES, "suppressed"], 0)
    for f in findings:
        out["suppressed" if f.suppressed else f.severity] += 1
    return out


def ranked(findings: Iterable[Finding], order: Mapping[str, int] | None = None) -> list[Finding]:
    """Worst first, then by file, line, code and key (``order``: the rank of a key's first part)."""
    rank = order or {}
    return sorted(
        findings,
        key=lambda f: (
            SEVERITIES.index(f.severity), rank.get(f.key.split(".", 1)[0], 0), f.file, f.line, f.code, f.key,
        ),
    )  # fmt: skip
