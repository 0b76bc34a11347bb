"""Policy rules that read the committed upstream facts (``facts/<source>.toml``), the overlays and
the dependency graph, besides the spec. ``megacpp_env.policy`` registers them with its own.

Each rule is a plain function ``(spec) -> Iterator[(key, message, remedy)]`` decorated with
``@upstream_rule``, which records it in ``ALL`` and returns it unchanged (import one and call it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from megacpp_env.spec.model import Spec

Severity = Literal["error", "warning"]
Check = Callable[[Spec], Iterator[tuple[str, str, str]]]


@dataclass(frozen=True, kw_only=True, slots=True)
class RuleDef:
    id: str
    severity: Severity
    title: str
    check: Check


ALL: list[RuleDef] = []


def upstream_rule(rule_id: str, severity: Severity, title: str) -> Callable[[Check], Check]:
    def register(fn: Check) -> Check:
        ALL.append(RuleDef(id=rule_id, severity=severity, title=title, check=fn))
        return fn

    return register


def load_all() -> list[RuleDef]:
    """Import every rule module (registering its rules) and return the rules in id order."""
    from megacpp_env.rules import deps, env, facts, sources  # noqa: F401

    return sorted(ALL, key=lambda r: r.id)
