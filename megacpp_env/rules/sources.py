"""Rules on what sources build against and with: CUTLASS judged by its own version.h (never by git
ancestry), build-time fetches pointed at pinned sources, and declared run-time couplings."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from packaging.version import InvalidVersion, Version

from megacpp_env.facts.model import SourceFacts
from megacpp_env.layout import overlay_dir
from megacpp_env.rules.base import Hit, build_rule, source_rule, spec_rule
from megacpp_env.rules.readers import spec_facts
from megacpp_env.spec.model import Source, Spec, Target

CUTLASS_FLOOR = "4.4.2"
SHA_RE = re.compile(r"^[0-9a-f]{40}$")


def _is_gb10_class(t: Target) -> bool:
    return t.gpu is not None and any(re.fullmatch(r"sm_12[0-9][af]?", a) for a in t.gpu.archs)


def fetches_of(src: Source) -> Mapping[str, str]:
    """The source's declared build-time fetches (env var -> pinned source), when the spec has them."""
    found = getattr(src, "fetches", None)
    return found if isinstance(found, Mapping) else {}


def _cutlass_versions(spec: Spec, src: Source, facts: Mapping[str, SourceFacts]) -> Iterator[Hit]:
    """(version, where, via) of each CUTLASS ``src`` builds against: bundled (a submodule) or fetched."""
    own = facts.get(src.name)
    if own is not None:
        for c in own.components:
            if c.name == "cutlass":
                yield c.version, f"facts/{src.name}.toml: {c.at}", src.name
    for env, name in sorted(fetches_of(src).items()):
        fetched = facts.get(name)
        for c in fetched.components if fetched is not None else ():
            if c.name == "cutlass":
                yield c.version, f"facts/{name}.toml: {c.at}", f"{src.name} ({env} -> {name})"


@build_rule("UP007", "error", once=True)
def cutlass_content(spec: Spec, t: Target, src: Source) -> Iterator[Hit]:
    """CUTLASS 4.4.2 or later by its version.h on sm_12x targets

    CUTLASS 4.4.2 or later by its version.h (never by git ancestry) on sm_12x targets.

    Example: a source's facts (facts/<source>.toml) that record a CUTLASS version.h below 4.4.2 on an sm_12x target:
    error UP007 ... CUTLASS 4.3.0 ... (remedy: pin a CUTLASS of 4.4.2 or later)
    """
    versions = _cutlass_versions(spec, src, spec_facts(spec).facts) if _is_gb10_class(t) else ()
    for version, where, via in versions:
        if Version(version) < Version(CUTLASS_FLOOR):
            yield (
                f"sources.{src.name}.commit",
                f"{via} builds against CUTLASS {version} ({where}); before {CUTLASS_FLOOR} SM120/SM121 "
                "shared-memory carve-outs miscompile",
                f"pin a CUTLASS whose include/cutlass/version.h says {CUTLASS_FLOOR} or later (judge the "
                "content: a fixed commit need not descend from the v4.4.2 tag)",
            )


@build_rule("UP008", "error", wheels=True, once=True)
def pinned_fetches(spec: Spec, t: Target, src: Source) -> Iterator[Hit]:
    """build-time fetches point at pinned sources

    Every build-time fetch a build makes points at a pinned source (fetches: VARIABLE: source).

    Trip: drop sources.vllm.fetches.FLASH_MLA_SRC_DIR
    """
    f = spec_facts(spec).get(src.name)
    declared = fetches_of(src)
    env = t.build_env_for(src)
    for fetch in f.fetches if f is not None else ():
        if not fetch.env or fetch.env in src.unpinned_fetches:
            continue  # no variable can redirect it, or the spec says why not yet (FA003 reports it)
        given = [v for v in (fetch.env, fetch.cmake_override) if v and v in declared]
        if not given and fetch.env not in env:
            yield (
                f"sources.{src.name}",
                f"{src.name} downloads {fetch.name} ({fetch.repo} @ {fetch.ref}) at build time "
                f"({fetch.at}) unless {fetch.env} points at a local tree",
                f"declare a pinned source for it and `fetches: {{{fetch.release_override()}: <that source>}}`",
            )
        for variable in given:
            yield from _fetch_pin(spec, src, fetch, declared[variable], variable)
    known = {v for x in (f.fetches if f is not None else ()) for v in (x.env, x.cmake_override) if v}
    for variable in sorted(set(declared) - known) if f is not None else ():
        yield (
            f"sources.{src.name}.fetches.{variable}",
            f"no download of {src.name}'s build reads {variable} (facts/{src.name}.toml [[fetches]]: each "
            "`*_SRC_DIR` it reads, and FETCHCONTENT_SOURCE_DIR_<NAME> only where CMake honours it: a "
            "FetchContent_Declare, not a FetchContent_Populate given its own options)",
            "name the variable the facts give for that download",
        )


def _fetch_pin(spec: Spec, src: Source, fetch: object, name: str, variable: str) -> Iterator[Hit]:
    pinned = spec.sources.get(name)
    ref = str(getattr(fetch, "ref", ""))
    if pinned is None:
        return
    same = pinned.commit == ref if SHA_RE.match(ref) else pinned.ref == ref
    if not same:
        yield (
            f"sources.{name}.commit",
            f"{src.name}'s build pins {getattr(fetch, 'name', name)} at {ref} ({getattr(fetch, 'at', '')}); "
            f"source {name} is {pinned.ref or pinned.commit[:12]}",
            f"pin {name} to what {src.name} asks for at its own pin, or record why not in its `provisional`",
        )
    want = str(getattr(fetch, "subdir", ""))
    if variable == getattr(fetch, "cmake_override", None):
        if pinned.subdir:
            yield (
                f"sources.{name}.subdir",
                f"{variable} names the root of {getattr(fetch, 'name', name)}: CMake applies its SOURCE_SUBDIR "
                f"{want or '(none)'} itself ({getattr(fetch, 'at', '')}); source {name} has subdir {pinned.subdir}",
                f"drop sources.{name}.subdir",
            )
    elif want and pinned.subdir != want:
        yield (
            f"sources.{name}.subdir",
            f"{src.name}'s build expects {variable} to point at {want} inside {getattr(fetch, 'name', name)} "
            f"({getattr(fetch, 'at', '')}); source {name} has subdir {pinned.subdir or '(none)'}",
            f"set sources.{name}.subdir: {want} (the checkout's directory the variable names)",
        )


@build_rule("UP009", "error")
def couplings(spec: Spec, t: Target, src: Source) -> Iterator[Hit]:
    """declared run-time couplings are built into the same target

    A declared run-time coupling (needs) is built into the same target, before the source that needs it.

    Trip: drop targets.gb10.sources = causal_conv1d
    Trip: drop targets.gb10.env.sources.causal_conv1d
    Trip: drop targets.cloud.sources = causal_conv1d
    Trip: drop targets.cloud.env.sources.causal_conv1d
    """
    names = [s.name for s in t.sources]
    for needed, reason in src.needs.items():
        if needed not in names:
            yield (
                f"targets.{t.name}.sources",
                f"{src.name} needs {needed} at run time ({reason}), but {t.name} does not build it: "
                "every import check passes and the first fused call fails",
                f"add {needed} to targets.{t.name}.sources (before {src.name})",
            )
        elif names.index(needed) > names.index(src.name):
            key = f"targets.{t.name}.sources"
            yield key, f"{src.name} needs {needed}, which {t.name} builds after it", f"list {needed} before {src.name}"


@spec_rule("AR001", "error")
def artifact_pins(spec: Spec) -> Iterator[Hit]:
    """artifact sets pin what their source pins

    An artifact set pins the directories and checksums.txt hashes its source's facts pin (FlashInfer's
    artifacts.py): the cubins a build reads are the ones upstream pinned.

    Example: drop one directory from artifacts.flashinfer_cubins.dirs: FlashInfer's facts pin a directory the artifact
    set no longer does (or a checksums.txt hash that differs)
    """
    facts = spec_facts(spec).facts
    for art in spec.artifacts.values():
        if not art.source:
            continue
        if art.source not in spec.sources:
            yield (f"artifacts.{art.name}.source", f"unknown source {art.source!r}", "name a source under `sources:`")
            continue
        f = facts.get(art.source)
        if f is None:
            continue  # FA001 reports the missing facts
        pinned = {a.dir: a for a in f.artifacts}
        for directory, sha in sorted(art.dirs.items()):
            found = pinned.get(directory)
            if found is None:
                yield (
                    f"artifacts.{art.name}.dirs.{directory}",
                    f"{art.source} at {f.commit[:12]} pins no artifact directory {directory}",
                    f"take the directories from facts/{art.source}.toml [[artifacts]]",
                )
            elif found.checksums_sha256 != sha:
                yield (
                    f"artifacts.{art.name}.dirs.{directory}",
                    f"{art.source} pins checksums.txt sha256 {found.checksums_sha256} ({found.at}), not {sha}",
                    f"use {found.checksums_sha256}",
                )
        for directory in sorted(set(pinned) - set(art.dirs)):
            yield (
                f"artifacts.{art.name}.dirs",
                f"{art.source} at {f.commit[:12]} also pins {directory} ({pinned[directory].at}); the set lacks it",
                f"add {directory}: {pinned[directory].checksums_sha256}",
            )


@source_rule("UP011", "warning")
def empty_overlays(spec: Spec, src: Source) -> Iterator[Hit]:
    """an overlay attached to a source lays files over it

    An overlay attached to a source lays files over it: an empty one changes nothing in the build.

    Example: fires on the shipped stack.yaml while overlays/vllm/manifest.toml lists no files: warning UP011
    sources.vllm.overlay: overlay vllm of vllm lists no files: it changes nothing in the build
    """
    from megacpp_env.worktree.manifest import ManifestError, load_manifest

    directory = overlay_dir(spec.root, src.overlay) if src.overlay else None
    if directory is None or not directory.is_dir():
        return  # no overlay, or TC007 reports the missing directory
    try:
        manifest = load_manifest(directory)
    except (ManifestError, OSError):
        return  # `overlay status` names what is wrong with it
    if not manifest.files:
        yield (
            f"sources.{src.name}.overlay",
            f"overlay {src.overlay} of {src.name} lists no files (overlays/{src.overlay}/manifest.toml "
            "files = []): it changes nothing in the build",
            f"capture the patched files: megacpp-env overlay new {src.overlay} --from <checkout> --force",
        )


def _overlay_mentions(spec: Spec, src: Source, name: str) -> str:
    """The overlay file of ``src`` that holds ``name`` as a quoted literal (a registry entry), or ''."""
    if not src.overlay:
        return ""
    files = overlay_dir(spec.root, src.overlay) / "files"
    needles = (f'"{name}"'.encode(), f"'{name}'".encode())
    for path in sorted(files.rglob("*")) if files.is_dir() else ():
        try:
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        except OSError:
            continue
        if any(n in data for n in needles):
            return path.relative_to(files).as_posix()
    return ""


@source_rule("UP012", "error")
def sanity_can_pass(spec: Spec, src: Source) -> Iterator[Hit]:
    """sanity checks name what the pinned source (or its overlay) provides

    Sanity checks name what the pinned source (or its overlay) provides: each vllm_models name is in the registry
    the facts read at the pin or a file of the overlay.

    Trip: add sources.vllm.sanity.vllm_models = Qwen3_5ForCausalLMTextOnly
    """
    f = spec_facts(spec).get(src.name)
    if f is None or not f.models_at or f.commit != src.commit:
        return  # no registry read at the pin (FA001 reports stale or missing facts)
    known = set(f.models)
    for model in src.sanity.vllm_models:
        if model in known or _overlay_mentions(spec, src, model):
            continue
        overlay = f"overlay {src.overlay} adds no file that names it" if src.overlay else "no overlay adds it"
        yield (
            f"sources.{src.name}.sanity.vllm_models",
            f"{src.name}'s sanity resolves {model}, which its registry at {f.commit[:12]} lacks "
            f"(facts/{src.name}.toml models, from {f.models_at}) and {overlay}: the check can never pass",
            "check an architecture the pinned registry has, or capture the overlay whose files register it",
        )


VERSION_VARS = ("VLLM_VERSION_OVERRIDE", "SETUPTOOLS_SCM_PRETEND_VERSION")


@build_rule("UP013", "error", once=True)
def version_override(spec: Spec, t: Target, src: Source) -> Iterator[Hit]:
    """a version override names the release the pin is

    A version override (VLLM_VERSION_OVERRIDE, SETUPTOOLS_SCM_PRETEND_VERSION) names the release a verified sdist
    says the pin is.

    Trip: set sources.vllm.build_env.VLLM_VERSION_OVERRIDE = "0.29.1"
    """
    f = spec_facts(spec).get(src.name)
    # only a verified sdist says the release's exact version (PKG-INFO); a checkout's static
    # version need not be what setuptools-scm would derive at the commit
    if f is None or not f.verified or f.read_from.kind != "sdist" or f.commit != src.commit:
        return
    env = t.build_env_for(src)
    for var in VERSION_VARS:
        if var in env and not _same_version(env[var], f.distribution.version):
            yield (
                f"sources.{src.name}.build_env.{var}",
                f"{var}={env[var]} would name the wheel of {src.name} {env[var]}, but the pin "
                f"{src.commit[:12]} is the release {f.distribution.version} ({f.distribution.version_from})",
                f'set {var}: "{f.distribution.version}"',
            )


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return False
