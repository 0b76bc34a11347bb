"""What a rule module imports: the :class:`Rule` type (its findings are ``megacpp_env.findings.Finding``),
the decorators that make a rule and name its loop, and :func:`builds` (each (target, source) a target
builds).

A module of its own so rule modules never import the package ``__init__``, which discovers and loads
them (no import circle through the registry).
"""

from __future__ import annotations

import inspect
import re
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
_TRIP = "Trip:"
_EXAMPLE = "Example:"


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    code: str
    severity: Severity
    summary: str
    scope: Scope
    check: Check  # the whole spec: the scope's loop around the rule's body
    once: bool = False  # report a repeated (key, message) once (a source seen through several targets)
    body: Callable[..., Any] | None = None  # the decorated function (its docstring documents the rule)
    why: str = ""  # the docstring's paragraphs after the summary, but Trip: and Example:
    # Edits of the shipped stack.yaml that make it fire (the docstring's ``Trip:`` lines; ``explain`` shows
    # them, tests/test_policy.py applies them and sees it fire): "set KEY = VALUE", "add KEY = VALUE" (to a
    # list), "drop KEY", "drop KEY = VALUE" (from a list); KEY a dotted key path, VALUE YAML.
    trip: tuple[str, ...] = ()
    example: str = ""  # what trips it, in words, where no edit of the shipped spec shows it (``Example:``)

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
            doc=self.why,
            example=self.example_text(),
            silence=f'`ignore: {{{self.code}: "why it cannot be fixed here"}}` under the {WHERE[self.scope]} '
            "that its findings' key names",
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Docstring:
    """A rule's documentation, all of it in its body's docstring (PEP 257's shape): the first paragraph is
    the summary (without a closing period); a paragraph of ``Trip:`` lines holds the edits of the shipped
    stack.yaml that make it fire, one a line; a paragraph that starts ``Example:`` says in words what trips
    it where no edit shows it; the other paragraphs are the doc (a docstring of one paragraph: the summary)."""

    summary: str
    doc: str
    trip: tuple[str, ...] = ()
    example: str = ""


def _docstring(code: str, body: Callable[..., Any] | None) -> Docstring:
    text = inspect.cleandoc(body.__doc__ or "") if body is not None else ""
    paragraphs = [p.strip() for p in re.split(r"\n[ \t]*\n", text) if p.strip()]
    if not paragraphs:
        raise TypeError(f"rule {code}: its function has no docstring (its first paragraph is the rule's summary)")
    first, trip, example, doc = paragraphs[0], [], "", []
    for p in paragraphs[1:]:
        lines = p.splitlines()
        if lines[0].startswith(_TRIP):
            if not all(line.startswith(_TRIP) and line[len(_TRIP) :].strip() for line in lines):
                raise TypeError(f"rule {code}: its docstring's Trip paragraph has a line that is not one edit: {p!r}")
            trip += [line[len(_TRIP) :].strip() for line in lines]
        elif p.startswith(_EXAMPLE):
            if example:
                raise TypeError(f"rule {code}: its docstring has two Example paragraphs: make them one")
            example = " ".join(p[len(_EXAMPLE) :].split())
        elif any(line.startswith(_TRIP) for line in lines):
            raise TypeError(f"rule {code}: its docstring has a Trip line inside prose (a paragraph of its own): {p!r}")
        else:
            doc.append(p)
    return Docstring(
        summary=" ".join(first.split()).rstrip("."),
        doc=" ".join(" ".join(doc or [first]).split()),
        trip=tuple(trip),
        example=example,
    )


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


def _decorator(
    code: str, severity: Severity, scope: Scope, loop: Callable[[Body], Check], *, once: bool
) -> Callable[[Body], Rule]:
    def make(body: Body) -> Rule:
        text = _docstring(code, body)
        return Rule(
            code=code, severity=severity, summary=text.summary, scope=scope, check=loop(body), body=body,
            once=once, why=text.doc, trip=text.trip, example=text.example,
        )  # fmt: skip

    return make


def spec_rule(code: str, severity: Severity, *, once: bool = False) -> Callable[[Check], Rule]:
    """A rule on the whole spec."""
    return _decorator(code, severity, "spec", lambda body: body, once=once)


def target_rule(
    code: str, severity: Severity, *, once: bool = False
) -> Callable[[Callable[[Spec, Target], Iterator[Hit]]], Rule]:
    """A rule on each target, in spec order."""
    return _decorator(code, severity, "target", _targets, once=once)


def platform_rule(
    code: str, severity: Severity, *, once: bool = False
) -> Callable[[Callable[[Spec, Target, str, ImageRef], Iterator[Hit]]], Rule]:
    """A rule on each (target, platform, base image)."""
    return _decorator(code, severity, "platform", _platforms, once=once)


def source_rule(
    code: str, severity: Severity, *, once: bool = False
) -> Callable[[Callable[[Spec, Source], Iterator[Hit]]], Rule]:
    """A rule on each source, in spec order."""
    return _decorator(code, severity, "source", _sources, once=once)


def build_rule(
    code: str, severity: Severity, *, wheels: bool = False, once: bool = False
) -> Callable[[Callable[[Spec, Target, Source], Iterator[Hit]]], Rule]:
    """A rule on each (target, source) the target builds (``wheels``: only those built into a wheel)."""
    return _decorator(code, severity, "build", lambda body: _builds(body, wheels=wheels), once=once)
