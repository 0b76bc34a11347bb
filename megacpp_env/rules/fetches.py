"""Rules on build-time fetches by CMake's own rules: what a pinned fetch brings of its submodules is what
CMake would clone (UP014), a fetch whose tree is not read here is reported as unverified, never passed
silently (UP015), and the override that points CMake at the pinned tree keeps upstream's release code
path (UP016).

What CMake does with each download comes from the builder's facts (``facts/cmake.py``: the submodule
mode, CMake's own ``FETCHCONTENT_SOURCE_DIR_<NAME>`` where it is honoured, and each condition on the
``*_SRC_DIR`` variable); tests/test_cmake_engine.py checks those readings against the real CMake.
"""

from __future__ import annotations

from collections.abc import Iterator

from megacpp_env.facts.model import Fetch, SourceFacts
from megacpp_env.rules.base import Hit, build_rule
from megacpp_env.rules.readers import spec_facts
from megacpp_env.rules.sources import fetches_of
from megacpp_env.spec.model import Source, Spec, Target


def fetch_named(facts: SourceFacts, variable: str) -> Fetch | None:
    """The download of ``facts`` that ``variable`` redirects: its ``*_SRC_DIR`` or CMake's own override."""
    return next((f for f in facts.fetches if variable and variable in (f.env, f.cmake_override)), None)


def cmake_clones(fetch: Fetch) -> str:
    """What CMake clones of the fetched repository's submodules, in words."""
    deep = "" if fetch.submodules_recurse else " (not recursively: GIT_SUBMODULES_RECURSE OFF)"
    return {
        "all": f"every submodule, recursively{deep} (no GIT_SUBMODULES)",
        "none": 'no submodule (GIT_SUBMODULES "")',
        "list": f"the submodules {', '.join(fetch.submodules)}{deep} (GIT_SUBMODULES)",
    }.get(fetch.submodule_mode, "submodules this reading cannot tell (GIT_SUBMODULES names a variable)")


def _fetches(spec: Spec, src: Source) -> Iterator[tuple[str, str, Fetch]]:
    """(variable, the source it names, the download of the build it redirects) for each of ``src``'s
    fetches a download of its build reads (UP008 reports the others); none where its build has no facts."""
    own = spec_facts(spec).get(src.name)
    if own is None:
        return
    for variable, name in sorted(fetches_of(src).items()):
        fetch = fetch_named(own, variable)
        if fetch is not None:
            yield variable, name, fetch


def _submodule_problem(fetch: Fetch, pinned: Source, tree: SourceFacts | None) -> tuple[str, str]:
    """(what is wrong, remedy) when ``pinned`` does not bring what CMake clones ('' when it does, or when
    the tree is not read here and the spec's flag can hold: UP015 reports it unverified)."""
    read = tree is not None and tree.commit == pinned.commit
    paths = {s.path for s in tree.submodules} if read and tree is not None else None
    mode = fetch.submodule_mode
    if mode == "none" and pinned.submodules:
        return "mirrors and checks out its submodules, which CMake leaves out", f"drop sources.{pinned.name}.submodules"
    if mode == "all" and not pinned.submodules and paths != set():
        found = f"its tree has {', '.join(sorted(paths))}" if paths else "its tree is not read here"
        return f"is pinned without submodules ({found})", f"set sources.{pinned.name}.submodules: true"
    if mode == "list" and not pinned.submodules:
        return "is pinned without submodules", f"set sources.{pinned.name}.submodules: true"
    if mode == "list" and paths is not None and paths != set(fetch.submodules):
        extra = ", ".join(sorted(paths - set(fetch.submodules))) or "none"
        lacking = ", ".join(sorted(set(fetch.submodules) - paths)) or "none"
        return (
            f"brings every submodule of its tree ({', '.join(sorted(paths)) or 'none'}): extra {extra}, "
            f"lacking {lacking}",
            "pin a tree whose submodules are the ones CMake clones, or re-read its facts at the pin",
        )
    return "", ""


@build_rule("UP014", "error", wheels=True, once=True)
def fetch_submodules(spec: Spec, t: Target, src: Source) -> Iterator[Hit]:
    """a build-time fetch brings the submodules CMake would clone

    A build-time fetch brings the submodules CMake would clone (the facts' submodule_mode at the CMake file and
    line, against the fetched source's submodules).

    Trip: drop sources.vllm_fmha_sm100.submodules
    """
    facts = spec_facts(spec)
    for _, name, fetch in _fetches(spec, src):
        pinned = spec.sources.get(name)
        if pinned is None:
            continue
        problem, remedy = _submodule_problem(fetch, pinned, facts.get(name))
        if problem:
            yield (
                f"sources.{name}.submodules",
                f"{src.name}'s build fetches {fetch.name} ({fetch.command} at {fetch.at}) and CMake clones "
                f"{cmake_clones(fetch)}; source {name} {problem}",
                remedy,
            )


@build_rule("UP015", "warning", wheels=True, once=True)
def unread_fetches(spec: Spec, t: Target, src: Source) -> Iterator[Hit]:
    """a fetched tree not read here is reported unverified

    A fetched tree not read here (`unread`) is reported unverified: CMake's clone of it and the files the build
    reads from it are not checked.

    Example: fires on the shipped stack.yaml for each fetched tree with an `unread` reason (no snapshot reachable here
    holds its pin): warning UP015 sources.vllm_flash_attn.unread: unverified: the tree of vllm_flash_attn at
    06bdd47c0d03 is not read here ...
    """
    facts = spec_facts(spec)
    for _, name, fetch in _fetches(spec, src):
        pinned = spec.sources.get(name)
        if pinned is None:
            continue
        if fetch.submodule_mode == "unknown":
            yield (
                f"sources.{name}.submodules",
                f"{src.name}'s build fetches {fetch.name} ({fetch.at}) with GIT_SUBMODULES set from a variable "
                f"this reading cannot resolve: whether source {name} brings what CMake clones is unverified",
                f"read {fetch.at} and set sources.{name}.submodules to match",
            )
        if facts.get(name) is None and pinned.unread:
            yield (
                f"sources.{name}.unread",
                f"unverified: the tree of {name} at {pinned.commit[:12]} is not read here ({pinned.unread}); of it "
                f"CMake clones {cmake_clones(fetch)} at {fetch.at}, and neither its submodules nor the files "
                f"{src.name}'s build reads from it are checked",
                f"when a snapshot holds the pin: megacpp-env facts extract {name} --from <a checkout at "
                f"{pinned.commit[:12]}>, then drop `unread`",
            )


def _branches_problem(src: Source, variable: str, name: str, fetch: Fetch) -> Iterator[Hit]:
    key = f"sources.{src.name}.fetches.{variable}"
    if variable == fetch.env and len(fetch.env_branches) > 1:
        extra = ", ".join(fetch.env_branches[1:])
        remedy = (
            f"give the tree through CMake's own override instead, which leaves upstream's code as released: "
            f"`fetches: {{{fetch.cmake_override}: {name}}}` (appended to CMAKE_ARGS)"
            if fetch.cmake_override
            else f"CMake honours no override for {fetch.command} ({fetch.at}): patch the build in an overlay"
        )
        yield (
            key,
            f"{variable} chooses the tree of {fetch.name} ({fetch.env_branches[0]}) and also upstream's "
            f"local-development code ({extra}): {src.name} would not build as upstream's release does",
            remedy,
        )
    if variable == fetch.cmake_override and fetch.env in fetches_of(src):
        yield (
            key,
            f"both {fetch.env} and {variable} point {fetch.name} at a tree; {fetch.env} wins "
            f"({fetch.env_branches[0] if fetch.env_branches else fetch.at})",
            f"keep one: drop {fetch.env}" if len(fetch.env_branches) > 1 else f"keep one: drop {variable}",
        )


@build_rule("UP016", "error", wheels=True, once=True)
def fetch_overrides(spec: Spec, t: Target, src: Source) -> Iterator[Hit]:
    """a fetch's override keeps upstream's release code path

    A fetch's override keeps upstream's release code path: no *_SRC_DIR that selects local-development code, not
    both overrides, CMake's override only for a build that reads CMAKE_ARGS.

    Example: point vLLM's flash-attention fetch through its own VLLM_FLASH_ATTN_SRC_DIR instead of CMake's
    FETCHCONTENT_SOURCE_DIR_VLLM-FLASH-ATTN: vLLM then takes its local-development branch, not the release one
    """
    own = spec_facts(spec).get(src.name)
    reads = {e.name: e.at for e in own.env} if own is not None else {}
    for variable, name, fetch in _fetches(spec, src):
        yield from _branches_problem(src, variable, name, fetch)
        if variable == fetch.cmake_override and "CMAKE_ARGS" not in reads:
            yield (
                f"sources.{src.name}.fetches.{variable}",
                f"{variable} reaches CMake through CMAKE_ARGS, which {src.name}'s build does not read "
                f"(facts/{src.name}.toml)",
                f"point {fetch.env or 'the variable its build reads'} at the tree instead",
            )
