"""Every finding code of every check family, from the families' own registries: what ``explain CODE``
prints, what docs/CODES.md holds (``explain --all --format markdown``), the rules SARIF declares, and
the set a suppression's code is checked against.

The families: the policy rules (``rules``: each rule's summary, docstring and trip edits), the spec's
own errors and its suppressions (``spec.codes``), the lock gate (``lock.gate``), ``doctor``, snapshot
``diff`` (one code per area of the collector registry), the facts check and the post-install
dependency check. A top-level module: it reads every family, and nothing below reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from megacpp_env.errors import unknown_name
from megacpp_env.findings import CodeDoc, docs_anchor


def documented() -> tuple[CodeDoc, ...]:
    """Every code's documentation, by code; a code documented twice is a bug."""
    from megacpp_env import depcheck, doctor, rules
    from megacpp_env.facts import check as facts_check
    from megacpp_env.lock import gate
    from megacpp_env.snapshot import diff
    from megacpp_env.spec import codes as spec_codes

    docs = [
        *(r.doc() for r in rules.all_rules()),
        *spec_codes.CODES,
        *gate.CODES,
        *doctor.codes(),
        *diff.codes(),
        *facts_check.CODES,
        *depcheck.CODES,
    ]
    by_code: dict[str, CodeDoc] = {}
    for d in docs:
        if by_code.setdefault(d.code, d) is not d:
            raise AssertionError(f"the code {d.code} is documented twice")
    return tuple(by_code[c] for c in sorted(by_code))


def known() -> frozenset[str]:
    return frozenset(d.code for d in documented())


@dataclass(frozen=True, kw_only=True, slots=True)
class Explained:
    docs: tuple[CodeDoc, ...]
    text: str


def explain(codes: Iterable[str], *, every: bool = False, fmt: str = "text") -> Explained:
    """The documentation of ``codes`` (each known, else a usage error with the closest code), or of
    every code (``every``), as text, markdown (docs/CODES.md) or a list (``list``: code, severity, summary)."""
    docs = documented()
    by_code = {d.code: d for d in docs}
    chosen: list[CodeDoc] = []
    for code in codes:
        wanted = code.strip().upper()
        if wanted not in by_code:
            raise unknown_name("code", wanted, sorted(by_code))
        chosen.append(by_code[wanted])
    shown = tuple(docs if every or not chosen else chosen)
    render: Callable[[CodeDoc], str] = {"markdown": _markdown, "list": _line}.get(fmt, _text)
    text = "".join(render(d) for d in shown)
    if fmt == "markdown":
        text = _MARKDOWN_HEAD + text
    return Explained(docs=shown, text=text)


def _line(d: CodeDoc) -> str:
    return f"{d.code}  {d.severity:<7}  {d.summary}\n"


def _text(d: CodeDoc) -> str:
    out = [f"{d.code} ({d.severity}): {d.summary}", f"  reported by: {d.family}"]
    if d.doc:
        out.append(f"  {d.doc}")
    if d.example:
        out.append("  example: " + d.example.replace("\n", "\n    "))
    if d.silence:
        out.append(f"  silence it: {d.silence}")
    out.append(f"  docs: {docs_anchor(d.code)}")
    return "\n".join(out) + "\n\n"


_MARKDOWN_HEAD = """\
# Finding codes

Written by `megacpp-env explain --all --format markdown` from the registries of the check families
(tests/test_explain.py keeps this file so). `megacpp-env explain CODE` prints one.

"""


def _markdown(d: CodeDoc) -> str:
    out = [f"## {d.code}", "", f"**{d.summary}** ({d.severity}; {d.family})", ""]
    if d.doc:
        out += [d.doc, ""]
    if d.example:
        out += ["Example:", "", "```", d.example, "```", ""]
    if d.silence:
        out += [f"Silence it: {d.silence}", ""]
    return "\n".join(out) + "\n"
