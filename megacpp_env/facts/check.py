"""Offline checks of the committed facts against the spec: every source has facts, read at its pin
(stale otherwise), readable, and verified (a warning says which are provisional and why)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from megacpp_env.facts.store import FACTS_DIR, FactsSet, load_facts
from megacpp_env.spec.model import Source, Spec

Severity = Literal["error", "warning"]


@dataclass(frozen=True, kw_only=True, slots=True)
class FactsFinding:
    source: str
    state: str  # ok | missing | stale | unreadable | provisional | orphan | mismatch
    severity: Severity | Literal["ok"]
    message: str
    remedy: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "state": self.state,
            "severity": self.severity,
            "message": self.message,
            "remedy": self.remedy,
        }


def spec_facts(spec: Spec) -> FactsSet:
    return load_facts(spec.root, tuple(spec.sources))


def extract_hint(src: Source) -> str:
    return f"megacpp-env facts extract {src.name} --from <a checkout of {src.repo} at {src.commit[:12]}>"


def check_facts(spec: Spec) -> list[FactsFinding]:
    """Every source a target builds needs facts. A source only fetched by another one's build (a
    ``fetches`` tree such as vLLM's CUTLASS) needs facts or an ``unread`` reason (its tree cannot be read
    here: UP015 reports what that leaves unverified), never neither; facts it has must be at its pin."""
    facts = spec_facts(spec)
    built = {s.name for t in spec.targets.values() for s in t.sources}
    fetched = {n for s in spec.sources.values() if s.name in built for n in s.fetches.values()}
    out: list[FactsFinding] = []
    for src in spec.sources.values():
        have = facts.get(src.name) is not None or src.name in facts.errors
        if src.name not in built and not have:
            if src.name in fetched and not src.unread:
                out.append(_unaccounted(src))
            continue
        if src.unread and have:
            out.append(_read_after_all(src))
            continue
        out.append(_one(src, facts))
    for name in facts.orphans:
        out.append(
            FactsFinding(
                source=name,
                state="orphan",
                severity="warning",
                message=f"{FACTS_DIR}/{name}.toml belongs to no source of the spec",
                remedy=f"delete {FACTS_DIR}/{name}.toml",
            )
        )
    return out


def _unaccounted(src: Source) -> FactsFinding:
    return FactsFinding(
        source=src.name,
        state="missing",
        severity="error",
        message=f"no {FACTS_DIR}/{src.name}.toml and no `unread` reason: a build fetches this tree, and neither "
        "what it holds (its submodules) is read nor why it cannot be",
        remedy=f"{extract_hint(src)}, or declare sources.{src.name}.unread: <why its tree cannot be read here>",
    )


def _read_after_all(src: Source) -> FactsFinding:
    return FactsFinding(
        source=src.name,
        state="mismatch",
        severity="error",
        message=f"sources.{src.name}.unread says its tree cannot be read here, but {FACTS_DIR}/{src.name}.toml "
        "holds its facts",
        remedy=f"drop sources.{src.name}.unread",
    )


def _one(src: Source, facts: FactsSet) -> FactsFinding:
    """The finding of one source's facts file: its first problem, else ok."""
    path = f"{FACTS_DIR}/{src.name}.toml"
    f = facts.get(src.name)
    verdict: tuple[str, Severity | Literal["ok"], str, str]  # state, severity, message, remedy
    if src.name in facts.errors:
        verdict = ("unreadable", "error", facts.errors[src.name], f"re-extract it: {extract_hint(src)}")
    elif f is None:
        verdict = ("missing", "error", f"no {path}: the source's requirements and build env reads are unknown",
                   extract_hint(src))  # fmt: skip
    elif f.commit != src.commit:
        verdict = ("stale", "error", f"{path} was read at {f.commit}, the pin is {src.commit}",
                   f"re-extract at the pin: {extract_hint(src)}")  # fmt: skip
    elif f.distribution.path != (src.subdir or "."):
        verdict = ("mismatch", "error",
                   f"{path} describes the project in {f.distribution.path!r}, the spec builds {src.subdir or '.'!r}",
                   f"re-extract: {extract_hint(src)}")  # fmt: skip
    elif not f.verified:
        verdict = ("provisional", "warning",
                   f"{path} is provisional (read from {_origin(f)}, not from the pin): {f.reason}",
                   f"when the pin is readable: {extract_hint(src)}")  # fmt: skip
    else:
        verdict = ("ok", "ok", f"{path} at {f.commit[:12]}", "")
    state, severity, message, remedy = verdict
    return FactsFinding(source=src.name, state=state, severity=severity, message=message, remedy=remedy)


def _origin(f: Any) -> str:
    rf = f.read_from
    if rf.kind == "sdist":
        return f"the sdist {rf.path} (sha256 {rf.sha256[:12]}...)"
    if rf.kind == "git":
        return f"a checkout at {rf.head[:12]}"
    return f"the directory {rf.path}"
