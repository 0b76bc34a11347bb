"""Every finding code of every check family, from the families' own registries: what ``explain CODE``
prints, what docs/CODES.md holds (``explain --all --format markdown``; ``findings.formats.render_docs``
writes both), the rules SARIF declares, and the set a suppression's code is checked against.

The families: the policy rules (``rules``: each rule's summary, docstring and trip edits), the spec's
own errors and its suppressions (``spec.codes``), the lock gate (``lock.gate``), ``doctor``, snapshot
``diff`` (one code per area of the collector registry), the facts check and the post-install
dependency check. A top-level module: it reads every family, and nothing below reads it.
"""

from __future__ import annotations

from collections.abc import Iterable

from megacpp_env.errors import unknown_name
from megacpp_env.findings import CodeDoc


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


def explain(codes: Iterable[str], *, every: bool = False) -> tuple[CodeDoc, ...]:
    """The documentation of ``codes`` (each known, else a usage error with the closest code), or of
    every code (``every``, or no code named); ``findings.formats.render_docs`` renders it."""
    docs = documented()
    by_code = {d.code: d for d in docs}
    chosen: list[CodeDoc] = []
    for code in codes:
        wanted = code.strip().upper()
        if wanted not in by_code:
            raise unknown_name("code", wanted, sorted(by_code))
        chosen.append(by_code[wanted])
    return tuple(docs if every or not chosen else chosen)
