"""The one registry of policy rules over a loaded Spec (``megacpp-env check``).

A rule is a module-level :class:`~megacpp_env.rules.base.Rule` made by one of the decorators of
:mod:`megacpp_env.rules.base`, in any module of this package: :func:`all_rules` imports every module
here (``pkgutil``, no list to keep) and collects the rules it finds. A new rule is one decorated
function in a topic module (``gb10``, ``toolchain``, ``env``, ``sources``, ``deps``, ``facts``) or a
new module, plus its trip case in tests/test_policy.py. Rule modules import ``rules.base``, never this
module: it loads them, so importing it back would be an import circle.

The decorator names the loop: ``spec_rule`` gets the whole spec, ``target_rule`` one target,
``platform_rule`` one (target, platform, base image), ``source_rule`` one source and ``build_rule``
one (target, source) pair the target builds. Each yields ``(key, message, remedy)``; the registry
adds the code, the severity and the spec line. A rule stays callable on a spec by its own name.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType

from megacpp_env.errors import MegacppEnvError, SpecError, SpecErrors, unknown_name
from megacpp_env.findings import CodeDoc, Finding, failing
from megacpp_env.rules.base import Rule
from megacpp_env.spec import suppress
from megacpp_env.spec.codes import findings_of
from megacpp_env.spec.model import Spec

__all__ = ["Checked", "Finding", "Rule", "all_rules", "check", "check_rule_ids", "failing", "rule_modules", "run_rules"]


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
    """The rule codes a user named, all of them known; an unknown one is a usage error (exit 2) with the
    closest code."""
    known = [r.code for r in all_rules()]
    ids = tuple(i.strip().upper() for i in ids)  # tc005 is TC005, as explain reads it
    for i in ids:
        if i not in known:
            raise unknown_name("rule code", i, known)
    return ids


def run_rules(spec: Spec, *, only: tuple[str, ...] = ()) -> list[Finding]:
    file = str(spec.path)
    findings = [
        Finding(
            code=r.code, severity=r.severity, message=message, file=file, line=spec.line_of(key), key=key, remedy=remedy
        )
        for r in all_rules()
        if not only or r.code in only
        for key, message, remedy in r(spec)
    ]
    return sorted(findings, key=lambda f: (f.severity != "error", f.line, f.code, f.key))


@dataclass(frozen=True, kw_only=True, slots=True)
class Checked:
    """What ``check`` found: the spec (None when it did not load: ``findings`` are its errors), every
    finding (suppressed ones included, marked), and the ones that fail the check."""

    spec: Spec | None
    file: str
    findings: list[Finding]
    errors: list[Finding]  # the failing ones
    docs: tuple[CodeDoc, ...] = ()  # the documentation of every code (SARIF's rules)


def check(
    spec: Callable[[], Spec],
    ids: Iterable[str],
    *,
    documented: Callable[[], tuple[CodeDoc, ...]],
    strict: bool = False,
    list_rules: bool = False,
    file_errors: bool = False,
) -> Checked | tuple[Rule, ...]:
    """``check [--rule ID]``: the named rules (known, else a usage error before the spec loads) or every
    rule over the spec, with the spec's suppressions applied (``documented``: every code any family has,
    to tell an unknown code in a suppression); a spec that does not load gives every error it has as
    findings; ``file_errors``: a spec file that cannot be read or parsed too (CI formats annotate it),
    else that stays one error. ``--list-rules``: every rule, no spec."""
    if list_rules:
        return all_rules()
    only = check_rule_ids(ids)
    try:
        loaded = spec()
    except SpecError as exc:  # the document's errors; a file that cannot be read or parsed stays one error
        if not (isinstance(exc, SpecErrors) or (file_errors and exc.file)):
            raise
        found = findings_of(exc)
        return Checked(spec=None, file=exc.file, findings=found, errors=failing(found), docs=documented())
    ran = only or tuple(r.code for r in all_rules())
    docs = documented()
    known = {d.code for d in docs}
    found = suppress.apply(loaded, run_rules(loaded, only=only), suppress.declared(loaded), checked=ran, known=known)
    return Checked(spec=loaded, file=str(loaded.path), findings=found, errors=failing(found, strict=strict), docs=docs)
