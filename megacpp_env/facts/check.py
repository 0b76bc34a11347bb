"""Offline checks of the committed facts against the spec: every source has facts, read at its pin
(stale otherwise), readable, and verified (a warning says which are provisional and why)."""

from __future__ import annotations

from typing import Any

from megacpp_env.facts.store import FACTS_DIR, FactsSet, load_facts
from megacpp_env.findings import CodeDoc, Finding, Severity
from megacpp_env.spec.model import Source, Spec

# state -> code: the facts check's findings (``explain FC001``)
CODE_OF = {"ok": "FC000", "missing": "FC001", "stale": "FC002", "unreadable": "FC003", "mismatch": "FC004",
           "provisional": "FC005", "orphan": "FC006"}  # fmt: skip
_FAMILY = "facts check (megacpp-env facts check; check reports it as FA001/FA002)"
_SILENCE = "through the rule check reports it as: `ignore: {FA001: why}` under the source (FA002 for provisional)"


def finding(src: str, state: str, severity: Severity, message: str, remedy: str = "") -> Finding:
    """A finding of the facts check on source ``src`` (its key ``sources.SRC``, its file the facts file)."""
    return Finding(
        code=CODE_OF[state],
        severity=severity,
        message=message,
        file=f"{FACTS_DIR}/{src}.toml",
        key=f"sources.{src}",
        remedy=remedy,
        area=state,
    )


def source_of(f: Finding) -> str:
    return f.key.removeprefix("sources.")


def state_of(f: Finding) -> str:
    """ok, missing, stale, unreadable, mismatch, provisional or orphan (the finding's area)."""
    return f.area


CODES = (
    CodeDoc(
        code="FC000",
        severity="ok",
        summary="a source's facts are present, read at its pin, verified",
        family=_FAMILY,
        silence="nothing to silence: it records a check that passed",
        example="ok: vllm: facts/vllm.toml at 5d3e1a2b3c4d",
    ),
    CodeDoc(
        code="FC001",
        severity="error",
        summary="every built source has facts (or fetched one an `unread` reason)",
        family=_FAMILY,
        silence=_SILENCE,
        doc="A source's requirements and the build variables it reads are upstream facts "
        "(facts/<source>.toml), extracted from a checkout at its pin. Without them the lock and the rules "
        "guess. A source only fetched by another's build may declare `unread: why` instead.",
        example="missing: vllm: no facts/vllm.toml: the source's requirements and build env reads are unknown "
        "(remedy: megacpp-env facts extract vllm --from <a checkout at ...>)",
    ),
    CodeDoc(
        code="FC002",
        severity="error",
        summary="facts were read at the source's pin",
        family=_FAMILY,
        silence=_SILENCE,
        doc="Facts read at another commit describe another tree: re-extract them when the pin moves.",
        example="stale: vllm: facts/vllm.toml was read at 1111..., the pin is 2222...",
    ),
    CodeDoc(
        code="FC003",
        severity="error",
        summary="a facts file can be read",
        family=_FAMILY,
        silence=_SILENCE,
        example="unreadable: vllm: facts/vllm.toml: invalid TOML ...",
    ),
    CodeDoc(
        code="FC004",
        severity="error",
        summary="facts describe what the spec builds",
        family=_FAMILY,
        silence=_SILENCE,
        doc="The project directory the facts describe is the one the spec builds (`subdir`), and a source "
        "with an `unread` reason has no facts.",
        example="mismatch: flashinfer_jit_cache: facts/flashinfer_jit_cache.toml describes the project in '.', "
        "the spec builds 'flashinfer-jit-cache'",
    ),
    CodeDoc(
        code="FC005",
        severity="warning",
        summary="provisional facts are reported",
        family=_FAMILY,
        silence=_SILENCE,
        doc="Facts read from an sdist or another tree than the pin are provisional: they say so, with why.",
        example="provisional: vllm_deepgemm: facts/vllm_deepgemm.toml is provisional (read from the sdist ...)",
    ),
    CodeDoc(
        code="FC006",
        severity="warning",
        summary="no facts file belongs to no source",
        family=_FAMILY,
        silence=_SILENCE,
        example="orphan: old: facts/old.toml belongs to no source of the spec (remedy: delete facts/old.toml)",
    ),
)


def spec_facts(spec: Spec) -> FactsSet:
    return load_facts(spec.root, tuple(spec.sources))


def extract_hint(src: Source) -> str:
    return f"megacpp-env facts extract {src.name} --from <a checkout of {src.repo} at {src.commit[:12]}>"


def check_facts(spec: Spec) -> list[Finding]:
    """Every source a target builds needs facts. A source only fetched by another one's build (a
    ``fetches`` tree such as vLLM's CUTLASS) needs facts or an ``unread`` reason (its tree cannot be read
    here: UP015 reports what that leaves unverified), never neither; facts it has must be at its pin."""
    facts = spec_facts(spec)
    built = {s.name for t in spec.targets.values() for s in t.sources}
    fetched = {n for s in spec.sources.values() if s.name in built for n in s.fetches.values()}
    out: list[Finding] = []
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
            finding(
                name,
                "orphan",
                "warning",
                f"{FACTS_DIR}/{name}.toml belongs to no source of the spec",
                f"delete {FACTS_DIR}/{name}.toml",
            )
        )
    return out


def _unaccounted(src: Source) -> Finding:
    return finding(
        src.name,
        "missing",
        "error",
        f"no {FACTS_DIR}/{src.name}.toml and no `unread` reason: a build fetches this tree, and neither "
        "what it holds (its submodules) is read nor why it cannot be",
        f"{extract_hint(src)}, or declare sources.{src.name}.unread: <why its tree cannot be read here>",
    )


def _read_after_all(src: Source) -> Finding:
    return finding(
        src.name,
        "mismatch",
        "error",
        f"sources.{src.name}.unread says its tree cannot be read here, but {FACTS_DIR}/{src.name}.toml holds its facts",
        f"drop sources.{src.name}.unread",
    )


def _one(src: Source, facts: FactsSet) -> Finding:
    """The finding of one source's facts file: its first problem, else ok."""
    path = f"{FACTS_DIR}/{src.name}.toml"
    f = facts.get(src.name)
    verdict: tuple[str, Severity, str, str]  # state, severity, message, remedy
    if src.name in facts.errors:
        verdict = ("unreadable", "error", facts.errors[src.name], f"re-extract it: {extract_hint(src)}")
    elif f is None:
        verdict = (
            "missing",
            "error",
            f"no {path}: the source's requirements and build env reads are unknown",
            extract_hint(src),
        )
    elif f.commit != src.commit:
        verdict = (
            "stale",
            "error",
            f"{path} was read at {f.commit}, the pin is {src.commit}",
            f"re-extract at the pin: {extract_hint(src)}",
        )
    elif f.distribution.path != (src.subdir or "."):
        verdict = (
            "mismatch",
            "error",
            f"{path} describes the project in {f.distribution.path!r}, the spec builds {src.subdir or '.'!r}",
            f"re-extract: {extract_hint(src)}",
        )
    elif not f.verified:
        verdict = (
            "provisional",
            "warning",
            f"{path} is provisional (read from {_origin(f)}, not from the pin): {f.reason}",
            f"when the pin is readable: {extract_hint(src)}",
        )
    else:
        verdict = ("ok", "ok", f"{path} at {f.commit[:12]}", "")
    state, severity, message, remedy = verdict
    return finding(src.name, state, severity, message, remedy)


def _origin(f: Any) -> str:
    rf = f.read_from
    if rf.kind == "sdist":
        return f"the sdist {rf.path} (sha256 {rf.sha256[:12]}...)"
    if rf.kind == "git":
        return f"a checkout at {rf.head[:12]}"
    return f"the directory {rf.path}"
