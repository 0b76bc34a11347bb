"""What ``lock`` checks around the resolver, so a dependency problem surfaces at lock time naming its
requirers, never at ``pip check`` hours into an image build:

* before uv runs: every source of the target has facts, and no two requirers conflict (offline);
* when uv fails: which requirers ask for each package uv's error names;
* after uv: a provider (pytorch-triton) and the package it provides (triton) are never both locked,
  each requirement on a provided package is met by the provider's version, and no distribution the
  target builds from source was taken from an index instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from megacpp_env.deps.conflicts import find_conflicts
from megacpp_env.deps.graph import TargetDeps


def preflight(deps: TargetDeps) -> list[str]:
    out = [
        f"{deps.target}: source {name} has no upstream facts (facts/{name}.toml): its requirements are unknown; "
        f"run `megacpp-env facts extract {name} --from CHECKOUT`"
        for name in deps.missing_facts
    ]
    for c in find_conflicts(deps):
        out.append(f"{deps.target}: conflict: {c.message} [{', '.join(c.platforms)}] (remedy: {c.remedy})")
    return out


def requirers_of(deps: Iterable[TargetDeps], text: str) -> list[str]:
    """For each package a resolver error names, who requires it (and where), one line each."""
    lowered = text.lower().replace("_", "-")
    lines: list[str] = []
    for d in deps:
        for name in sorted({n.name for n in d.needs}):
            if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", lowered):
                lines += [f"  {d.target}: {n.label()}" for n in d.on(name)]
                override = d.override_for(name)
                if override is not None:
                    lines.append(f"  {d.target}: override {override.requirement} ({override.reason})")
    return lines


def _public(version: str) -> Version | None:
    try:
        return Version(Version(version).public)
    except InvalidVersion:
        return None


def wrong_origin(explicit: Mapping[str, str], artifacts: Mapping[str, Iterable[str]]) -> list[str]:
    """Packages of an explicit index whose files come from another host (an override of such a package
    is resolved without its index: uv applies index sources to direct requirements only)."""
    out = []
    for name, index in sorted(explicit.items()):
        want = urlsplit(index)
        for url in artifacts.get(name, ()):
            got = urlsplit(url)
            if url and (got.scheme, got.netloc) != (want.scheme, want.netloc):
                out.append(
                    f"{name} was resolved to {url}, not from its explicit index {index}: nothing may replace "
                    "a requirement on an explicit-index package (no override of it)"
                )
                break
    return out


def after_resolution(deps: TargetDeps, platform: str, locked: Mapping[str, str]) -> list[str]:
    """Problems in a resolved lock (canonical name -> version) for one platform."""
    out: list[str] = []
    for p in deps.provides:
        provider, provided = canonicalize_name(p.provider), canonicalize_name(p.provides)
        if provider in locked and provided in locked:
            out.append(
                f"{deps.target} {platform}: both {provider} and {provided} are locked: they install the same "
                f"package and overwrite each other (override {provided} away: \"{provided} ; sys_platform == 'never'\")"
            )
        version = _public(locked.get(provider, ""))
        for need in deps.on(provided):
            if provider not in locked or version is None or not deps.applies(need, platform):
                continue
            if not need.req.specifier.contains(version, prereleases=True):
                out.append(
                    f"{deps.target} {platform}: {need.label()}, but {provider} {locked[provider]} provides "
                    f"{provided} {version}"
                )
    for name, built in sorted(deps.built.items()):
        if name in locked:
            out.append(
                f"{deps.target} {platform}: {name} {locked[name]} was resolved from an index, but source "
                f"{built.source} builds it ({built.version}); a package requires it that no override covers"
            )
    return out
