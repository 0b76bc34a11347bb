"""What a rule module imports: the :class:`Rule` and :class:`Finding` types, the decorators that make a
rule and name its loop, and :func:`builds` (each (target, source) a target builds).

A module of its own so rule modules never import the package ``__init__``, which discovers and loads
them (no import circle through the registry).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from megacpp_env.records import as_dict
from megacpp_env.spec.model import ImageRef, Source, Spec, Target

Severity = Literal["error", "warning"]
Scope = Literal["spec", "target", "platform", "source", "build"]
Hit = tuple[str, str, str]  # (key, message, remedy)
Check = Callable[[Spec], Iterator[Hit]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    code: str
    severity: Severity
    summary: str
    scope: Scope
    check: Check  # the whole spec: the scope's loop around the rule's body
    once: bool = False  # report a repeated (key, message) once (a source seen through several targets)

    def __call__(self, spec: Spec) -> Iterator[Hit]:
        return unique(self.check(spec)) if self.once else self.check(spec)

    def to_dict(self) -> dict[str, str]:
        return {"id": self.code, "severity": self.severity, "title": self.summary}


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    rule: str
    severity: Severity
    key: str
    message: str
    remedy: str = ""
    line: int = 0

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)

    def format(self, file: str) -> str:
        where = f"{file}:{self.line}" if self.line else file
        text = f"{where}: {self.severity} {self.rule} {self.key}: {self.message}"
        return f"{text} (remedy: {self.remedy})" if self.remedy else text


def unique(found: Iterable[Hit]) -> Iterator[Hit]:
    """Each (key, message) once, in first-seen order."""
    seen: set[tuple[str, str]] = set()
    for key, message, remedy in found:
        if (key, message) not in seen:
            seen.add((key, message))
            yield key, message, remedy


# -- the loops: one per scope -------------------------------------------------------------------------
def _targets(body: Callable[[Spec, Target], Iterator[Hit]]) -> Check:
    return lambda spec: (hit for t in spec.targets.values() for hit in body(spec, t))


def _platforms(body: Callable[[Spec, Target, str, ImageRef], Iterator[Hit]]) -> Check:
    return lambda spec: (
        hit for t in spec.targets.values() for p, image in t.base_images.items() for hit in body(spec, t, p, image)
    )


def _sources(body: Callable[[Spec, Source], Iterator[Hit]]) -> Check:
    return lambda spec: (hit for src in spec.sources.values() for hit in body(spec, src))


def builds(spec: Spec, *, wheels: bool = False) -> Iterator[tuple[Target, Source]]:
    """Each (target, source) a target builds, in spec order (``wheels``: only those built into a wheel)."""
    return ((t, src) for t in spec.targets.values() for src in t.sources if src.install == "wheel" or not wheels)


def _builds(body: Callable[[Spec, Target, Source], Iterator[Hit]], *, wheels: bool) -> Check:
    return lambda spec: (hit for t, src in builds(spec, wheels=wheels) for hit in body(spec, t, src))


Body = TypeVar("Body", bound=Callable[..., Iterator[Hit]])


def _decorator(
    code: str, severity: Severity, summary: str, scope: Scope, loop: Callable[[Body], Check], once: bool
) -> Callable[[Body], Rule]:
    return lambda body: Rule(code=code, severity=severity, summary=summary, scope=scope, check=loop(body), once=once)


def spec_rule(code: str, severity: Severity, summary: str, *, once: bool = False) -> Callable[[Check], Rule]:
    """A rule on the whole spec."""
    return _decorator(code, severity, summary, "spec", lambda body: body, once)


def target_rule(
    code: str, severity: Severity, summary: str, *, once: bool = False
) -> Callable[[Callable[[Spec, Target], Iterator[Hit]]], Rule]:
    """A rule on each target, in spec order."""
    return _decorator(code, severity, summary, "target", _targets, once)


def platform_rule(
    code: str, severity: Severity, summary: str, *, once: bool = False
) -> Callable[[Callable[[Spec, Target, str, ImageRef], Iterator[Hit]]], Rule]:
    """A rule on each (target, platform, base image)."""
    return _decorator(code, severity, summary, "platform", _platforms, once)


def source_rule(
    code: str, severity: Severity, summary: str, *, once: bool = False
) -> Callable[[Callable[[Spec, Source], Iterator[Hit]]], Rule]:
    """A rule on each source, in spec order."""
    return _decorator(code, severity, summary, "source", _sources, once)


def build_rule(
    code: str, severity: Severity, summary: str, *, wheels: bool = False, once: bool = False
) -> Callable[[Callable[[Spec, Target, Source], Iterator[Hit]]], Rule]:
    """A rule on each (target, source) the target builds (``wheels``: only those built into a wheel)."""
    return _decorator(code, severity, summary, "build", lambda body: _builds(body, wheels=wheels), once)
