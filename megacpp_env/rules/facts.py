"""Rules on the facts files themselves: present, readable, read at the pin; provisional ones said so;
and no build-time fetch left unpinned in a source a sealed stage builds."""

from __future__ import annotations

from collections.abc import Iterator

from megacpp_env.errors import RefusedError
from megacpp_env.facts.check import check_facts, source_of, spec_facts, state_of
from megacpp_env.rules.base import Hit, spec_rule
from megacpp_env.spec.model import Source, Spec, Target


@spec_rule("FA001", "error")
def facts_current(spec: Spec) -> Iterator[Hit]:
    """every source has upstream facts read at its pin

    Every source a target builds has upstream facts (facts/<source>.toml), readable and read at its pin; a source
    only fetched by another's build has facts or an `unread` reason.

    Trip: set sources.causal_conv1d.commit = 9e4ace0b1d53ede275308abf25f64a1fc04c5fd5
    """
    for f in check_facts(spec):
        if f.severity == "error":
            yield (f"sources.{source_of(f)}.commit", f"{state_of(f)}: {f.message}", f.remedy)


@spec_rule("FA002", "warning")
def facts_provisional(spec: Spec) -> Iterator[Hit]:
    """provisional facts and pins are reported

    Provisional facts (read from an sdist or a tree other than the pin) and provisional pins are reported.

    Trip: set sources.vllm_deepgemm.provisional = not yet re-read
    """
    for f in check_facts(spec):
        if state_of(f) in ("provisional", "orphan"):
            yield (f.key if state_of(f) != "orphan" else "sources", f.message, f.remedy)
    for src in spec.sources.values():
        if src.provisional:
            yield (
                f"sources.{src.name}.provisional",
                f"the pin of {src.name} ({src.commit[:12]}) is provisional: {src.provisional}",
                "verify the commit against the source it stands for, then drop `provisional`",
            )


def sealed(target: Target, src: Source) -> bool:
    """Whether ``target`` builds ``src`` in a sealed stage: every built source (``install: wheel``) is
    built in the image's second build, which runs with ``--network none`` (docs/SPEC.md)."""
    return src.install == "wheel" and any(s.name == src.name for s in target.sources)


def unpinned_sealed_fetches(spec: Spec, targets: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    """(key, message, remedy) for each fetch a sealed stage of ``targets`` (default: all) leaves unpinned."""
    facts = spec_facts(spec).facts
    out: list[tuple[str, str, str]] = []
    for src in spec.sources.values():
        where = [t.name for t in spec.targets.values() if (not targets or t.name in targets) and sealed(t, src)]
        if not where:
            continue
        known = {f.env: f for f in facts[src.name].fetches} if src.name in facts else {}
        for env, reason in sorted(src.unpinned_fetches.items()):
            fetch = known.get(env)
            what = f"{fetch.name} ({fetch.repo} @ {fetch.ref}, {fetch.at})" if fetch else "a tree"
            out.append(
                (
                    f"sources.{src.name}.unpinned_fetches.{env}",
                    f"{src.name} is built without network in {', '.join(where)}, but its build downloads {what} "
                    f"unless {env} points at a pinned tree ({reason}): the sealed build fails there",
                    f"declare a pinned source for it and move it to "
                    f"`fetches: {{{fetch.release_override() if fetch else env}: <that source>}}`",
                )
            )
    return out


@spec_rule("FA003", "error")
def sealed_fetches(spec: Spec) -> Iterator[Hit]:
    """a source built in a sealed stage has no unpinned fetch

    A source built in a sealed stage (the image's second build runs with --network none) has no unpinned build-time
    fetch: the build would fail there.

    Example: move a pinned fetch of vllm back under `unpinned_fetches` (drop
    sources.vllm.fetches.FETCHCONTENT_SOURCE_DIR_TRITON_KERNELS and its source; set
    sources.vllm.unpinned_fetches.TRITON_KERNELS_SRC_DIR = why): the image's second build runs without network, so that
    fetch fails there
    """
    yield from unpinned_sealed_fetches(spec)


def refuse_unpinned_fetches(spec: Spec, target: str) -> None:
    """``render`` and ``build`` (``--dry-run`` too) refuse a target whose sealed stage would fail on a fetch."""
    found = unpinned_sealed_fetches(spec, (target,))
    if found:
        detail = "; ".join(f"{key}: {message}" for key, message, _remedy in found)
        raise RefusedError(f"target {target}: {detail} (remedy: {found[0][2]})")
