"""The ``facts`` sub-commands' domain calls: ``extract_and_write`` (``facts extract``: one source's
facts read from a checkout at its pin and written), ``read_shown`` (``facts show``: one source's
committed facts); ``facts check`` is ``facts.check.check_facts``."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from megacpp_env.errors import MegacppEnvError
from megacpp_env.facts.check import extract_hint
from megacpp_env.facts.extract import ExtractRequest, extract
from megacpp_env.facts.model import SourceFacts
from megacpp_env.facts.store import facts_path, read_facts, render_facts, write_facts
from megacpp_env.spec.model import Source, Spec


@dataclass(frozen=True, kw_only=True, slots=True)
class FactsRequest:
    """What ``facts extract`` was asked: the source, where to read it, and what to read besides."""

    name: str
    origin: Path
    wheel: Path | None = None
    requirements: tuple[str, ...] = ()
    build_requirements: tuple[str, ...] = ()
    listed_requirements: tuple[str, ...] = ()
    unverified: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Shown:
    facts: SourceFacts
    text: str  # the committed file's rendering


@dataclass(frozen=True, kw_only=True, slots=True)
class Extracted:
    facts: SourceFacts
    changed: bool
    path: str  # relative to the spec's root, POSIX


def extract_and_write(spec: Spec, request: FactsRequest) -> Extracted:
    """``facts extract NAME --from CHECKOUT``: the source's facts, written to ``facts/NAME.toml``."""
    src = spec.source(request.name)
    facts = extract(
        ExtractRequest(
            source=src.name,
            commit=src.commit,
            origin=request.origin,
            subdir=src.subdir,
            wheel=request.wheel,
            requirements_files=request.requirements,
            build_requirements_files=request.build_requirements,
            listed_requirements_files=request.listed_requirements,
            unverified=request.unverified,
            command=recorded_command(src, request, request.origin),
            unobtainable=tuple(src.unobtainable),
        )
    )
    changed = write_facts(spec.root, facts)
    return Extracted(
        facts=facts, changed=changed, path=facts_path(spec.root, src.name).relative_to(spec.root).as_posix()
    )


def recorded_command(src: Source, request: FactsRequest, origin: Path) -> str:
    """The command line recorded in the file: names, never this machine's paths."""
    parts = ["megacpp-env", "facts", "extract", src.name, "--from", origin.name if origin.is_file() else "CHECKOUT"]
    if request.wheel:
        parts += ["--wheel", request.wheel.name]
    for flag, values in (
        ("--requirements", request.requirements),
        ("--build-requirements", request.build_requirements),
        ("--listed-requirements", request.listed_requirements),
    ):
        for value in values:
            parts += [flag, value]
    if request.unverified:
        parts += ["--unverified", request.unverified]
    return shlex.join(parts)


def read_shown(spec: Spec, name: str) -> Shown:
    """``facts show NAME``: the source's committed facts."""
    src = spec.source(name)
    path = facts_path(spec.root, src.name)
    if not path.is_file():
        raise MegacppEnvError(f"no {path.relative_to(spec.root)} (remedy: {extract_hint(src)})")
    facts = read_facts(path)
    return Shown(facts=facts, text=render_facts(facts))
