"""Rules on the facts files themselves: present, readable, read at the pin; provisional ones said so."""

from __future__ import annotations

from collections.abc import Iterator

from megacpp_env.facts.check import check_facts
from megacpp_env.rules import upstream_rule
from megacpp_env.spec.model import Spec


@upstream_rule("FA001", "error", "every source has upstream facts read at its pin")
def facts_current(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for f in check_facts(spec):
        if f.severity == "error":
            yield (f"sources.{f.source}.commit", f"{f.state}: {f.message}", f.remedy)


@upstream_rule("FA002", "warning", "provisional facts and pins are reported")
def facts_provisional(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for f in check_facts(spec):
        if f.state in ("provisional", "orphan"):
            yield (f"sources.{f.source}" if f.state != "orphan" else "sources", f.message, f.remedy)
    for src in spec.sources.values():
        for env, reason in src.unpinned_fetches.items():
            yield (
                f"sources.{src.name}.unpinned_fetches.{env}",
                f"{src.name}'s build still downloads what {env} would point at: {reason}; a sealed build fails there",
                f"declare a pinned source and `fetches: {{{env}: <that source>}}`",
            )
        if src.provisional:
            yield (
                f"sources.{src.name}.provisional",
                f"the pin of {src.name} ({src.commit[:12]}) is provisional: {src.provisional}",
                "verify the commit against the source it stands for, then drop `provisional`",
            )
