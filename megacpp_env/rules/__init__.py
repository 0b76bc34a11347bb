"""The one registry of policy rules over a loaded Spec (``megacpp-env check``: ``codes.check_spec``).

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
from collections.abc import Iterable
from types import ModuleType

from megacpp_env.errors import MegacppEnvError, unknown_name
from megacpp_env.findings import Finding, failing
from megacpp_env.rules.base import Rule
from megacpp_env.spec.model import Spec

__all__ = ["Finding", "Rule", "all_rules", "check_rule_ids", "failing", "rule_modules", "run_rules"]


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
