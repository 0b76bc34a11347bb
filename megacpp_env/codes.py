"""Every finding code of every check family, from the families' own registries: what ``explain CODE``
prints, what docs/CODES.md holds (``explain --all --format markdown``; ``findings.formats.render_docs``
writes both), the rules SARIF declares, and the set a suppression's code is checked against.

The families: the policy rules (``rules``: each rule's summary, docstring and trip edits), the spec's
own errors and its suppressions (``spec.codes``), the lock gate (``lock.gate``), ``doctor``, snapshot
``diff`` (one code per area of the collector registry), the facts check and the post-install
dependency check. A top-level module: it reads every family, and nothing below reads it. So
``check_spec`` (the ``check`` verb's one domain call: the rules over the spec, its suppressions
checked against every known code) lives here too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from megacpp_env.errors import unknown_name
from megacpp_env.findings import CodeDoc, Finding

if TYPE_CHECKING:
    from megacpp_env.rules import Rule
    from megacpp_env.spec.model import Spec


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


@dataclass(frozen=True, kw_only=True, slots=True)
class Checked:
    """What ``check`` found: the spec (None when it did not load: ``findings`` are its errors), every
    finding (suppressed ones included, marked), the ones that fail the check, the rules that ran (every
    rule, for ``--list-rules``, which loads no spec) and the documentation of every code (SARIF's
    rules)."""

    spec: Spec | None
    file: str
    findings: list[Finding]
    errors: list[Finding]  # the failing ones
    rules: tuple[Rule, ...] = ()
    docs: tuple[CodeDoc, ...] = ()


def check_spec(
    spec_path: Path | None,
    ids: Iterable[str],
    *,
    strict: bool = False,
    list_rules: bool = False,
    file_errors: bool = False,
) -> Checked:
    """``check [--rule ID]``: the named rules (known, else a usage error before the spec loads) or
    every rule over the spec at ``spec_path`` (None: none was named or found, an error), with the
    spec's suppressions applied; a spec that does not load gives every error it has as findings;
    ``file_errors``: a spec file that cannot be read or parsed too (CI formats annotate it), else that
    stays one error. ``list_rules``: every rule, and no spec is read. The spec is loaded here, not by
    the verb: its errors are this check's findings."""
    from megacpp_env.errors import SpecError, SpecErrors
    from megacpp_env.findings import failing
    from megacpp_env.rules import all_rules, check_rule_ids, run_rules
    from megacpp_env.spec import load_spec, suppress
    from megacpp_env.spec.codes import findings_of
    from megacpp_env.spec.discover import required

    if list_rules:
        return Checked(spec=None, file="", findings=[], errors=[], rules=all_rules())
    only = check_rule_ids(ids)
    ran = tuple(r for r in all_rules() if not only or r.code in only)
    try:
        loaded = load_spec(required(spec_path))
    except SpecError as exc:  # the document's errors; a file that cannot be read or parsed stays one error
        if not (isinstance(exc, SpecErrors) or (file_errors and exc.file)):
            raise
        found = findings_of(exc)
        return Checked(spec=None, file=exc.file, findings=found, errors=failing(found), rules=ran, docs=documented())
    docs = documented()
    known = {d.code for d in docs}
    declared = suppress.declared(loaded)
    found = suppress.apply(
        loaded, run_rules(loaded, only=only), declared, checked=tuple(r.code for r in ran), known=known
    )
    errors = failing(found, strict=strict)
    return Checked(spec=loaded, file=str(loaded.path), findings=found, errors=errors, rules=ran, docs=docs)
