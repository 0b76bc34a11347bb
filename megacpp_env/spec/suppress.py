"""Suppressions with reasons: ``ignore: {CODE: "reason"}`` under a target or a source of stack.yaml.

A suppression covers the findings of its code reported on its target or source (a finding whose key
is ``targets.NAME`` or ``sources.NAME``, or lies under it; for ``doctor``, every finding of the
target it checks). A covered finding keeps its severity and is reported as suppressed, with the
reason; it fails nothing. A suppression of a code the run checked that covered nothing is itself a
warning (``SUP001``); one naming a code that no family has is an error (``SUP002``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from megacpp_env.errors import did_you_mean
from megacpp_env.findings import Finding, Severity
from megacpp_env.spec.codes import UNKNOWN_CODE, UNUSED_SUPPRESSION
from megacpp_env.spec.model import Spec


@dataclass(frozen=True, kw_only=True, slots=True)
class Suppression:
    scope: str  # the spec key it is declared under: "targets.gb10", "sources.vllm"
    code: str
    reason: str

    @property
    def key(self) -> str:
        return f"{self.scope}.ignore.{self.code}"

    def covers(self, finding: Finding, *, whole_run: bool = False) -> bool:
        if finding.code != self.code:
            return False
        return whole_run or any(finding.key == self.scope or finding.key.startswith(self.scope + c) for c in ".[")


def declared(spec: Spec, *, target: str = "") -> tuple[Suppression, ...]:
    """Every suppression of the spec (``target``: only that target's own), in spec order."""
    out = [
        Suppression(scope=f"targets.{t.name}", code=code, reason=reason)
        for t in spec.targets.values()
        if not target or t.name == target
        for code, reason in t.ignore.items()
    ]
    if not target:
        out += [
            Suppression(scope=f"sources.{s.name}", code=code, reason=reason)
            for s in spec.sources.values()
            for code, reason in s.ignore.items()
        ]
    return tuple(out)


def apply(
    spec: Spec,
    findings: Iterable[Finding],
    suppressions: Iterable[Suppression],
    *,
    checked: Collection[str],
    known: Collection[str] | None,
    whole_run: bool = False,
) -> list[Finding]:
    """``findings`` with each one a suppression covers marked suppressed (its reason), then a finding for
    each suppression of a ``checked`` code that covered nothing and each one of a code not ``known``
    (``None``: not told here).
    ``whole_run``: every finding is on the suppressions' scope (``doctor TARGET``)."""
    rules = tuple(suppressions)
    used: set[Suppression] = set()
    out = []
    for f in findings:
        by = next((s for s in rules if s.covers(f, whole_run=whole_run)), None)
        if by is not None:
            used.add(by)
        out.append(f if by is None else dataclasses.replace(f, suppressed=by.reason))
    for s in rules:
        if known is not None and s.code not in known:
            message = f"no finding has the code {s.code}: this suppression silences nothing"
            remedy = f"{did_you_mean(s.code, sorted(known))} (`megacpp-env explain --list` lists every code)"
            out.append(_about(spec, s, UNKNOWN_CODE, "error", message, remedy))
        elif s.code in checked and s not in used:
            message = f"the suppression of {s.code} under {s.scope} silences nothing (its reason: {s.reason})"
            remedy = "remove it: the finding is fixed or reported elsewhere"
            out.append(_about(spec, s, UNUSED_SUPPRESSION, "warning", message, remedy, area="suppressions"))
    return out


def _about(
    spec: Spec, s: Suppression, code: str, severity: Severity, message: str, remedy: str, *, area: str = ""
) -> Finding:
    """A finding about the suppression ``s`` itself, on its line of the spec."""
    return Finding(
        code=code, severity=severity, file=str(spec.path), line=spec.line_of(s.key), key=s.key, area=area,
        message=message, remedy=remedy,
    )  # fmt: skip
