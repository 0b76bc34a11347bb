"""The one registry of policy rules over a loaded Spec (``megacpp-env check``).

A rule is a module-level :class:`Rule` made by one of the decorators below, in any module of this
package: :func:`all_rules` imports every module here (``pkgutil``, no list to keep) and collects the
rules it finds. A new rule is one decorated function in a topic module (``gb10``, ``toolchain``,
``env``, ``sources``, ``deps``, ``facts``) or a new module, plus its trip case in tests/test_policy.py.

The decorator names the loop: ``spec_rule`` gets the whole spec, ``target_rule`` one target,
``platform_rule`` one (target, platform, base image), ``source_rule`` one source and ``build_rule``
one (target, source) pair the target builds. Each yields ``(key, message, remedy)``; the registry
adds the code, the severity and the spec line. A rule stays callable on a spec by its own name.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal, TypeVar

from megacpp_env.errors import MegacppEnvError
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


# -- the registry ----------------------------------------------------------------------------------
def rule_modules() -> list[ModuleType]:
    """Every module of this package, imported (a new one is found by being here)."""
    return [importlib.import_module(m.name) for m in pkgutil.iter_modules(__path__, f"{__name__}.")]


def all_rules() -> tuple[Rule, ...]:
    """Every rule of every module here, by code; two rules with one code are a bug."""
    found: dict[str, Rule] = {}
    for module in rule_modules():
        for value in vars(module).values():
            if isinstance(value, Rule) and found.setdefault(value.code, value) is not value:
                raise MegacppEnvError(f"{module.__name__}: rule code {value.code} is used twice (rename one)")
    return tuple(found[code] for code in sorted(found))


def check_rule_ids(ids: Iterable[str]) -> tuple[str, ...]:
    """The rule codes a user named, all of them known; an unknown one is a user error naming the rules."""
    known = {r.code for r in all_rules()}
    ids = tuple(ids)
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise MegacppEnvError(f"unknown rule {unknown[0]!r} (rules: {', '.join(sorted(known))}; see --list-rules)")
    return ids


def failing(findings: Iterable[Finding], *, strict: bool = False) -> list[Finding]:
    """The findings that fail ``check``: errors, and with ``--strict`` warnings too."""
    return [f for f in findings if f.severity == "error" or strict]


def run_rules(spec: Spec, *, only: tuple[str, ...] = ()) -> list[Finding]:
    findings = [
        Finding(rule=r.code, severity=r.severity, key=key, message=message, remedy=remedy, line=spec.line_of(key))
        for r in all_rules()
        if not only or r.code in only
        for key, message, remedy in r(spec)
    ]
    return sorted(findings, key=lambda f: (f.severity != "error", f.line, f.rule, f.key))


@dataclass(frozen=True, kw_only=True, slots=True)
class Checked:
    spec: Spec
    findings: list[Finding]
    errors: list[Finding]  # the failing ones


def check(
    spec: Callable[[], Spec], ids: Iterable[str], *, strict: bool = False, list_rules: bool = False
) -> Checked | tuple[Rule, ...]:
    """``check [--rule ID]``: the named rules (known, else a user error before the spec loads) or
    every rule over the spec, and the findings that fail it; ``--list-rules``: every rule, no spec."""
    if list_rules:
        return all_rules()
    only = check_rule_ids(ids)
    loaded = spec()
    findings = run_rules(loaded, only=only)
    return Checked(spec=loaded, findings=findings, errors=failing(findings, strict=strict))
