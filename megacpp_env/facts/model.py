"""Typed records of one source's upstream facts (``facts/<source>.toml``).

A facts file says what a pinned source really declares and reads at its commit: its distribution
(name, version, runtime and build requirements, import names), the environment variables its build
files read (with file:line), the tools that read more (torch's cpp_extension, setuptools-scm, CMake's
find_package(Torch)), hard-coded ``-gencode`` lists and ``nvcc --threads``, submodules, build-time
fetches (CMake FetchContent with the ``*_SRC_DIR`` variable that replaces each), versions of bundled
components (CUTLASS's ``version.h``) and pinned artifact manifests. ``verified`` is true only when it
was read from a git checkout at exactly ``commit``, or from an sdist whose own commit record names
``commit`` (``read_from.record``); otherwise ``reason`` says why not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from megacpp_env.errors import FormatError
from megacpp_env.records import Record, Table

SCHEMA_VERSION = 1
READ_KINDS = ("git", "sdist", "dir")
FETCH_SUBMODULE_MODES = ("all", "none", "list", "unknown")  # facts/cmake.py: what CMake clones


class FactsFormatError(FormatError):
    """A facts file is malformed (names the file and key path)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ReadFrom:
    """How the facts were read: a git checkout (``head`` is its HEAD), an sdist or a plain directory.
    ``record`` is an sdist's own commit record (setuptools-scm's version file), when it has one: what
    ties the sdist to the pinned commit."""

    kind: str
    path: str = ""
    sha256: str = ""
    head: str = ""
    record: str = ""
    # paths of the pinned tree a sparse checkout left out, each declared in the source's
    # ``unobtainable`` (its object cannot be had here): the rest of the tree is the pin's
    absent: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "path": self.path, "sha256": self.sha256, "head": self.head}
        if self.record:
            out["record"] = self.record
        if self.absent:
            out["absent"] = list(self.absent)
        return out

    @classmethod
    def from_table(cls, t: Table) -> ReadFrom:
        t.only(("kind", "path", "sha256", "head", "record", "absent"))
        kind = t.text("kind")
        if kind not in READ_KINDS:
            t.fail(f"unknown kind {kind!r} (known: {', '.join(READ_KINDS)})", "kind")
        return cls(
            kind=kind,
            path=t.text("path", ""),
            sha256=t.text("sha256", ""),
            head=t.text("head", ""),
            record=t.text("record", ""),
            absent=t.texts("absent", ()),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class WheelMetadata:
    """``METADATA`` (and ``top_level.txt``) of a wheel built from this source, when one was given."""

    file: str
    sha256: str
    name: str
    version: str
    requires: tuple[str, ...] = ()
    extras: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    top_level: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "sha256": self.sha256,
            "name": self.name,
            "version": self.version,
            "requires": list(self.requires),
            "top_level": list(self.top_level),
            "extras": {k: list(v) for k, v in self.extras.items()},
        }

    @classmethod
    def from_table(cls, t: Table) -> WheelMetadata:
        t.only(("file", "sha256", "name", "version", "requires", "extras", "top_level"))
        return cls(
            file=t.text("file"),
            sha256=t.text("sha256"),
            name=t.text("name"),
            version=t.text("version"),
            requires=t.texts("requires"),
            extras=_extras(t),
            top_level=t.texts("top_level"),
        )


def _extras(t: Table) -> dict[str, tuple[str, ...]]:
    table = t.opt_table("extras")
    if table is None:
        return {}
    return {name: table.texts(name) for name in table.data}


@dataclass(frozen=True, kw_only=True, slots=True)
class Distribution:
    """The Python distribution the source builds (from ``path`` inside the checkout)."""

    path: str = "."
    name: str = ""
    version: str = ""
    version_from: str = ""
    requires_python: str = ""
    requires: tuple[str, ...] = ()
    requires_from: str = ""
    extras: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    build_requires: tuple[str, ...] = ()
    build_requires_from: str = ""
    build_backend: str = ""
    imports: tuple[str, ...] = ()
    imports_from: str = ""
    # requirements the project's requirements files list but its install_requires drops (given with
    # --listed-requirements): needed at run time, yet no resolver sees them through the wheel
    dropped: tuple[str, ...] = ()
    dropped_from: str = ""
    wheel: WheelMetadata | None = None

    @property
    def runtime_requires(self) -> tuple[str, ...]:
        """What an installed wheel requires: the given wheel's METADATA when there is one, else the static read."""
        return self.wheel.requires if self.wheel is not None else self.requires

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "name": self.name,
            "version": self.version,
            "version_from": self.version_from,
            "requires_python": self.requires_python,
            "requires": list(self.requires),
            "requires_from": self.requires_from,
            "build_requires": list(self.build_requires),
            "build_requires_from": self.build_requires_from,
            "build_backend": self.build_backend,
            "imports": list(self.imports),
            "imports_from": self.imports_from,
            "extras": {k: list(v) for k, v in self.extras.items()},
        }
        if self.dropped:
            out["dropped"] = list(self.dropped)
            out["dropped_from"] = self.dropped_from
        if self.wheel is not None:
            out["wheel"] = self.wheel.to_dict()
        return out

    @classmethod
    def from_table(cls, t: Table) -> Distribution:
        keys = (
            "path",
            "name",
            "version",
            "version_from",
            "requires_python",
            "requires",
            "requires_from",
            "extras",
            "build_requires",
            "build_requires_from",
            "build_backend",
            "imports",
            "imports_from",
            "dropped",
            "dropped_from",
            "wheel",
        )
        t.only(keys)
        wheel = t.opt_table("wheel")
        return cls(
            path=t.text("path", "."),
            name=t.text("name", ""),
            version=t.text("version", ""),
            version_from=t.text("version_from", ""),
            requires_python=t.text("requires_python", ""),
            requires=t.texts("requires"),
            requires_from=t.text("requires_from", ""),
            extras=_extras(t),
            build_requires=t.texts("build_requires"),
            build_requires_from=t.text("build_requires_from", ""),
            build_backend=t.text("build_backend", ""),
            imports=t.texts("imports"),
            imports_from=t.text("imports_from", ""),
            dropped=t.texts("dropped"),
            dropped_from=t.text("dropped_from", ""),
            wheel=WheelMetadata.from_table(wheel) if wheel is not None else None,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class EnvRead(Record):
    """An environment variable the source's build files read: where, with which literal defaults, and
    which literals the value is compared with (``== "TRUE"``: only that exact string switches it)."""

    name: str
    at: tuple[str, ...]
    defaults: tuple[str, ...] = ()
    compared: tuple[str, ...] = ()

    @classmethod
    def from_table(cls, t: Table) -> EnvRead:
        t.only(("name", "at", "defaults", "compared"))
        return cls(name=t.text("name"), at=t.texts("at"), defaults=t.texts("defaults"), compared=t.texts("compared"))


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolUse(Record):
    """A build tool that reads environment variables of its own (``torch.utils.cpp_extension``,
    ``setuptools_scm``, ``cmake:find_package(Torch)``); ``detail`` qualifies the use."""

    name: str
    at: str
    detail: str = ""

    @classmethod
    def from_table(cls, t: Table) -> ToolUse:
        t.only(("name", "at", "detail"))
        return cls(name=t.text("name"), at=t.text("at"), detail=t.text("detail", ""))


@dataclass(frozen=True, kw_only=True, slots=True)
class ArchFlags:
    """Hard-coded device code targets in the build files (``-gencode arch=compute_90,code=sm_90``)
    and a hard-coded ``nvcc --threads N``; empty/0 when the build takes them from the environment.

    How the build parallelises (the jobs formula reads these): ``compile_units``, the source files its
    extensions compile (``sources=[...]`` of a torch cpp_extension build; 0: not known, e.g. a CMake
    build); ``jobs_divided_at``, where the build divides its job count by the nvcc thread count (vLLM's
    ``compute_num_jobs``: it runs MAX_JOBS // NVCC_THREADS jobs). Written only when found."""

    gencode: tuple[str, ...] = ()
    gencode_at: tuple[str, ...] = ()
    nvcc_threads: int = 0
    nvcc_threads_at: str = ""
    compile_units: int = 0
    compile_units_at: tuple[str, ...] = ()
    jobs_divided_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "gencode": list(self.gencode),
            "gencode_at": list(self.gencode_at),
            "nvcc_threads": self.nvcc_threads,
            "nvcc_threads_at": self.nvcc_threads_at,
        }
        if self.compile_units:
            out["compile_units"] = self.compile_units
            out["compile_units_at"] = list(self.compile_units_at)
        if self.jobs_divided_at:
            out["jobs_divided_at"] = self.jobs_divided_at
        return out

    @classmethod
    def from_table(cls, t: Table) -> ArchFlags:
        t.only(
            ("gencode", "gencode_at", "nvcc_threads", "nvcc_threads_at", "compile_units", "compile_units_at",
             "jobs_divided_at")
        )  # fmt: skip
        units = t.number("compile_units", 0)
        if not 0 <= units <= 100_000:
            t.fail(f"expected an integer in [0, 100000], got {units}", "compile_units")
        return cls(
            gencode=t.texts("gencode"),
            gencode_at=t.texts("gencode_at"),
            nvcc_threads=t.number("nvcc_threads", 0),
            nvcc_threads_at=t.text("nvcc_threads_at", ""),
            compile_units=units,
            compile_units_at=t.texts("compile_units_at"),
            jobs_divided_at=t.text("jobs_divided_at", ""),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Submodule(Record):
    path: str
    url: str
    commit: str
    populated: bool = False

    @classmethod
    def from_table(cls, t: Table) -> Submodule:
        t.only(("path", "url", "commit", "populated"))
        return cls(
            path=t.text("path"), url=t.text("url"), commit=t.text("commit"), populated=t.flag("populated", False)
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Fetch(Record):
    """A build-time download (CMake FetchContent or ExternalProject) as CMake itself would make it: the
    variable that points it at a local tree (``env``), CMake's own override where it honours one
    (``cmake_override``: ``FETCHCONTENT_SOURCE_DIR_<NAME>``), the submodules it clones
    (``submodule_mode``: all, none, list (``submodules``), unknown; recursively unless
    ``submodules_recurse`` is false) and every condition on ``env`` that chooses code (``env_branches``;
    more than one: the variable also selects upstream's local-development code). ``facts/cmake.py``."""

    name: str
    repo: str
    ref: str
    env: str
    at: str
    subdir: str = ""
    submodules: tuple[str, ...] = ()
    command: str = ""
    submodule_mode: str = "all"
    submodules_recurse: bool = True
    cmake_override: str = ""
    env_branches: tuple[str, ...] = ()

    def release_override(self) -> str:
        """The variable that points this download at a local tree and leaves upstream's code as released:
        the ``*_SRC_DIR`` one when it only chooses the tree (one condition), else CMake's own override."""
        if self.cmake_override and (len(self.env_branches) > 1 or not self.env):
            return self.cmake_override
        return self.env

    @classmethod
    def from_table(cls, t: Table) -> Fetch:
        t.only(
            ("name", "repo", "ref", "env", "at", "subdir", "submodules", "command", "submodule_mode",
             "submodules_recurse", "cmake_override", "env_branches")
        )  # fmt: skip
        mode = t.text("submodule_mode")
        if mode not in FETCH_SUBMODULE_MODES:
            t.fail(f"unknown mode {mode!r} (known: {', '.join(FETCH_SUBMODULE_MODES)})", "submodule_mode")
        return cls(
            name=t.text("name"),
            repo=t.text("repo"),
            ref=t.text("ref"),
            env=t.text("env", ""),
            at=t.text("at"),
            subdir=t.text("subdir", ""),
            submodules=t.texts("submodules"),
            command=t.text("command"),
            submodule_mode=mode,
            submodules_recurse=t.flag("submodules_recurse"),
            cmake_override=t.text("cmake_override", ""),
            env_branches=t.texts("env_branches"),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Component(Record):
    """A bundled component's version read from its own header (CUTLASS ``version.h``): content, not ancestry."""

    name: str
    version: str
    at: str

    @classmethod
    def from_table(cls, t: Table) -> Component:
        t.only(("name", "version", "at"))
        return cls(name=t.text("name"), version=t.text("version"), at=t.text("at"))


@dataclass(frozen=True, kw_only=True, slots=True)
class ArtifactManifest(Record):
    """A directory of prebuilt artifacts the source pins by the sha256 of its ``checksums.txt``."""

    name: str
    dir: str
    checksums_sha256: str
    at: str

    @classmethod
    def from_table(cls, t: Table) -> ArtifactManifest:
        t.only(("name", "dir", "checksums_sha256", "at"))
        return cls(name=t.text("name"), dir=t.text("dir"), checksums_sha256=t.text("checksums_sha256"), at=t.text("at"))


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceFacts:
    source: str
    commit: str
    verified: bool
    read_from: ReadFrom
    command: str
    distribution: Distribution
    reason: str = ""
    env: tuple[EnvRead, ...] = ()
    tools: tuple[ToolUse, ...] = ()
    arch: ArchFlags = field(default_factory=ArchFlags)
    submodules: tuple[Submodule, ...] = ()
    fetches: tuple[Fetch, ...] = ()
    components: tuple[Component, ...] = ()
    artifacts: tuple[ArtifactManifest, ...] = ()
    # architecture names a model registry maps (vLLM's ``_VLLM_MODELS``), where the source has one
    models: tuple[str, ...] = ()
    models_at: str = ""
    schema_version: int = SCHEMA_VERSION

    def env_read(self, name: str) -> EnvRead | None:
        return next((e for e in self.env if e.name == name), None)

    def tool(self, name: str) -> ToolUse | None:
        return next((t for t in self.tools if t.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        out = self._to_dict()
        if self.models_at:
            out["models_at"] = self.models_at
            out["models"] = list(self.models)
        return out

    def _to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "source": self.source,
            "commit": self.commit,
            "verified": self.verified,
            "reason": self.reason,
            "command": self.command,
            "read_from": self.read_from.to_dict(),
            "distribution": self.distribution.to_dict(),
            "arch": self.arch.to_dict(),
            "env": [e.to_dict() for e in self.env],
            "tools": [t.to_dict() for t in self.tools],
            "submodules": [s.to_dict() for s in self.submodules],
            "fetches": [f.to_dict() for f in self.fetches],
            "components": [c.to_dict() for c in self.components],
            "artifacts": [a.to_dict() for a in self.artifacts],
        }

    @classmethod
    def from_table(cls, t: Table) -> SourceFacts:
        t.only(
            (
                "schema_version",
                "source",
                "commit",
                "verified",
                "reason",
                "command",
                "read_from",
                "distribution",
                "arch",
                "env",
                "tools",
                "submodules",
                "fetches",
                "components",
                "artifacts",
                "models",
                "models_at",
            )
        )
        version = t.number("schema_version")
        if version != SCHEMA_VERSION:
            t.fail(f"unsupported schema_version {version} (this tool reads {SCHEMA_VERSION})", "schema_version")
        verified = t.flag("verified")
        reason = t.text("reason", "")
        if not verified and not reason.strip():
            t.fail("unverified facts must say why (reason)", "reason")
        arch = t.opt_table("arch")
        return cls(
            source=t.text("source", nonempty=True),
            commit=t.text("commit", nonempty=True),
            verified=verified,
            reason=reason,
            command=t.text("command", ""),
            read_from=ReadFrom.from_table(t.table("read_from")),
            distribution=Distribution.from_table(t.table("distribution")),
            arch=ArchFlags.from_table(arch) if arch is not None else ArchFlags(),
            env=tuple(EnvRead.from_table(x) for x in t.tables("env")),
            tools=tuple(ToolUse.from_table(x) for x in t.tables("tools")),
            submodules=tuple(Submodule.from_table(x) for x in t.tables("submodules")),
            fetches=tuple(Fetch.from_table(x) for x in t.tables("fetches")),
            components=tuple(Component.from_table(x) for x in t.tables("components")),
            artifacts=tuple(ArtifactManifest.from_table(x) for x in t.tables("artifacts")),
            models=t.texts("models"),
            models_at=t.text("models_at", ""),
        )
