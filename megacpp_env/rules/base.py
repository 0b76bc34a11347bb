"""What a rule module imports: the :class:`Rule` type (its findings are ``megacpp_env.findings.Finding``),
the decorators that make a rule and name its loop, and :func:`builds` (each (target, source) a target
builds).

A module of its own so rule modules never import the package ``__init__``, which discovers and loads
them (no import circle through the registry).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from megacpp_env.findings import CodeDoc
from megacpp_env.spec.model import ImageRef, Source, Spec, Target

Severity = Literal["error", "warning"]
Scope = Literal["spec", "target", "platform", "source", "build"]
Hit = tuple[str, str, str]  # (key, message, remedy)
SCOPES = {
    "spec": "the whole spec",
    "target": "each target",
    "platform": "each (target, platform, base image)",
    "source": "each source",
    "build": "each (target, source) a target builds",
}
WHERE = {"spec": "target or source", "target": "target", "platform": "target", "source": "source",
         "build": "target or source"}  # fmt: skip
Check = Callable[[Spec], Iterator[Hit]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    code: str
    severity: Severity
    summary: str
    scope: Scope
    check: Check  # the whole spec: the scope's loop around the rule's body
    once: bool = False  # report a repeated (key, message) once (a source seen through several targets)
    body: Callable[..., Any] | None = None  # the decorated function (its docstring documents the rule)
    # Edits of the shipped stack.yaml that make it fire (``explain`` shows them; tests/test_policy.py
    # applies them and sees it fire): "set KEY = VALUE", "add KEY = VALUE" (to a list), "drop KEY",
    # "drop KEY = VALUE" (from a list); KEY a dotted key path, VALUE YAML.
    trip: tuple[str, ...] = ()
    example: str = ""  # what trips it, in words, where no edit of the shipped spec shows it

    def __call__(self, spec: Spec) -> Iterator[Hit]:
        return unique(self.check(spec)) if self.once else self.check(spec)

    def to_dict(self) -> dict[str, str]:
        return {"id": self.code, "severity": self.severity, "title": self.summary}

    def example_text(self) -> str:
        return _example_text(self.trip, self.example)

    def doc(self) -> CodeDoc:
        """Its documentation (``explain``): the summary, the rest of the rule body's docstring, the loop it
        runs in."""
        return CodeDoc(
            code=self.code,
            severity=self.severity,
            summary=self.summary,
            family=f"policy rule (megacpp-env check), on {SCOPES[self.scope]}",
            doc=_docstring(self.code, self.body)[1],
            example=self.example_text(),
            silence=f'`ignore: {{{self.code}: "why it cannot be fixed here"}}` under the {WHERE[self.scope]} '
            "that its findings' key names",
        )


def _docstring(code: str, body: Callable[..., Any] | None) -> tuple[str, str]:
    """(summary, doc) of a rule from its body's docstring: the first paragraph is the summary (without a
    closing period) and the rest the doc; a docstring of one paragraph is both."""
    text = (body.__doc__ or "").strip() if body is not None else ""
    first, _, rest = text.partition("\n\n")
    summary = " ".join(first.split()).rstrip(".")
    if not summary:
        raise TypeError(f"rule {code}: its function has no docstring (its first paragraph is the rule's summary)")
    return summary, " ".join((rest or first).split())


def _example_text(trip: tuple[str, ...], example: str) -> str:
    if not trip:
        return example
    edits = "\n".join(f"  {e}" for e in trip)
    return f"this edit of the shipped stack.yaml makes it fire:\n{edits}" + (f"\n{example}" if example else "")


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


@dataclass(frozen=True, kw_only=True, slots=True)
class Doc:
    """What a decorator takes besides the code and the severity (``Rule``'s fields; the summary is the first
    paragraph of the rule's docstring)."""

    once: bool = False
    trip: tuple[str, ...] = ()
    example: str = ""


def _decorator(
    code: str, severity: Severity, scope: Scope, loop: Callable[[Body], Check], doc: Doc
) -> Callable[[Body], Rule]:
    return lambda body: Rule(
        code=code, severity=severity, summary=_docstring(code, body)[0], scope=scope, check=loop(body), body=body,
        once=doc.once, trip=doc.trip, example=doc.example,
    )  # fmt: skip


def spec_rule(
    code: str, severity: Severity, *, once: bool = False, trip: tuple[str, ...] = (), example: str = ""
) -> Callable[[Check], Rule]:
    """A rule on the whole spec."""
    return _decorator(code, severity, "spec", lambda body: body, Doc(once=once, trip=trip, example=example))


def target_rule(
    code: str, severity: Severity, *, once: bool = False, trip: tuple[str, ...] = (), example: str = ""
) -> Callable[[Callable[[Spec, Target], Iterator[Hit]]], Rule]:
    """A rule on each target, in spec order."""
    return _decorator(code, severity, "target", _targets, Doc(once=once, trip=trip, example=example))


def platform_rule(
    code: str, severity: Severity, *, once: bool = False, trip: tuple[str, ...] = (), example: str = ""
) -> Callable[[Callable[[Spec, Target, str, ImageRef], Iterator[Hit]]], Rule]:
    """A rule on each (target, platform, base image)."""
    return _decorator(code, severity, "platform", _platforms, Doc(once=once, trip=trip, example=example))


def source_rule(
    code: str, severity: Severity, *, once: bool = False, trip: tuple[str, ...] = (), example: str = ""
) -> Callable[[Callable[[Spec, Source], Iterator[Hit]]], Rule]:
    """A rule on each source, in spec order."""
    return _decorator(code, severity, "source", _sources, Doc(once=once, trip=trip, example=example))


def build_rule(
    code: str,
    severity: Severity,
    *,
    wheels: bool = False,
    once: bool = False,
    trip: tuple[str, ...] = (),
    example: str = "",
) -> Callable[[Callable[[Spec, Target, Source], Iterator[Hit]]], Rule]:
    """A rule on each (target, source) the target builds (``wheels``: only those built into a wheel)."""
    doc = Doc(once=once, trip=trip, example=example)
    return _decorator(code, severity, "build", lambda body: _builds(body, wheels=wheels), doc)
