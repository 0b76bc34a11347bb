"""Source build plans: everything needed to build one source of one target, without the spec.

``render`` writes one plan per source to ``images/<target>/sources/<name>.json`` (deterministic,
committed, checked by ``render --check``); an image's source stage copies only its own plan, so a
pin bump or a build-env change rebuilds that source only. ``build-source`` makes the same plan in
memory from the spec (``plan_for``). ``read_plan`` validates a file and names the file and key of
the first problem (``records.Table``). Stdlib only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from megacpp_env.errors import FormatError, RefusedError
from megacpp_env.layout import CMAKE_FETCH_OVERRIDE_RE
from megacpp_env.records import Record, Table, read_json
from megacpp_env.sanity import SanityCheck

if TYPE_CHECKING:
    from megacpp_env.spec.model import Source, Target

T = TypeVar("T")
SCHEMA = 1
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
JOBS_ENV = ("CMAKE_BUILD_PARALLEL_LEVEL", "FLASHINFER_NVCC_THREADS", "MAX_JOBS", "NVCC_THREADS")
THREADS_ENV = ("FLASHINFER_NVCC_THREADS", "NVCC_THREADS")  # the nvcc --threads a build passes on


VIA_ENV = "env"  # the fetch's variable is set in the build's environment
VIA_CMAKE_ARGS = "cmake_args"  # ``-D<variable>=<tree>`` is appended to the build's CMAKE_ARGS
FETCH_VIAS = (VIA_ENV, VIA_CMAKE_ARGS)


def fetch_via(variable: str) -> str:
    """How a fetch's variable reaches the build: CMake's own override (``FETCHCONTENT_SOURCE_DIR_<NAME>``) is
    a cache variable, given as ``-D`` through CMAKE_ARGS; any other name is an environment variable."""
    return VIA_CMAKE_ARGS if CMAKE_FETCH_OVERRIDE_RE.fullmatch(variable) else VIA_ENV


@dataclass(frozen=True, kw_only=True, slots=True)
class FetchPlan:
    """A build-time fetch made hermetic: ``env`` points the build at a checkout of source ``name``, or at
    ``subdir`` inside it (``via`` env only: a variable upstream reads as that directory). ``via``
    cmake_args: ``env`` is CMake's own ``FETCHCONTENT_SOURCE_DIR_<NAME>``, appended to CMAKE_ARGS as
    ``-D<env>=<checkout>``, which keeps upstream's release code path (vLLM's ``VLLM_FLASH_ATTN_SRC_DIR`` would
    select its local-development branch instead)."""

    env: str
    name: str
    repo: str
    commit: str
    ref: str = ""
    submodules: bool = False
    subdir: str = ""
    via: str = VIA_ENV

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "via": self.via,
            "env": self.env,
            "name": self.name,
            "repo": self.repo,
            "commit": self.commit,
            "ref": self.ref,
            "submodules": self.submodules,
        }
        if self.subdir:
            out["subdir"] = self.subdir
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class JobsPlan(Record):
    """Inputs of the jobs formula (``srcbuild.jobs``), from the source's facts and the target.

    ``reads``: the parallelism variables the build reads (its facts, its overlay's files and the build
    tools the facts show it uses); only those are exported. ``nvcc_threads``: threads each nvcc really
    runs when the build hard-codes them (0: it reads a threads variable, or compiles no CUDA).
    ``units``: the files it compiles (0: not known). ``archs``: the CUDA archs each file is compiled
    for (what nvcc's ``--threads`` splits). ``divides``: the build runs ``MAX_JOBS // NVCC_THREADS``
    jobs (vLLM's ``compute_num_jobs``). ``max_jobs``/``nvcc_threads_override``: the target's fixed
    numbers (0: derive)."""

    reads: tuple[str, ...] = ()
    nvcc_threads: int = 0
    cuda: bool = False
    mem_per_job_gib: int = 4
    max_jobs: int = 0
    nvcc_threads_override: int = 0
    units: int = 0
    archs: int = 0
    divides: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class SourcePlan:
    """One source of one target, as built: pin, overlay, build env (target's merged with the source's),
    pre-build commands, sanity checks, jobs inputs and declared build-time fetches."""

    target: str
    name: str
    dist: str  # the checkout directory name (``/opt/src/<dist>``)
    repo: str
    commit: str
    ref: str = ""
    submodules: bool = False
    install: str = "wheel"
    overlay: str = ""
    subdir: str = ""  # the distribution's directory inside the checkout ("" = its root)
    build_env: Mapping[str, str] = field(default_factory=dict)
    pre_build: tuple[str, ...] = ()
    sanity: SanityCheck = field(default_factory=SanityCheck)
    jobs: JobsPlan = field(default_factory=JobsPlan)
    fetches: tuple[FetchPlan, ...] = ()
    unobtainable: Mapping[str, str] = field(default_factory=dict)  # declared exceptions: path -> why

    def to_dict(self) -> dict[str, Any]:
        extra = {"unobtainable": dict(sorted(self.unobtainable.items()))} if self.unobtainable else {}
        return {
            **extra,
            "schema_version": SCHEMA,
            "generated_by": f"megacpp-env render {self.target}",
            "target": self.target,
            "name": self.name,
            "dist": self.dist,
            "repo": self.repo,
            "commit": self.commit,
            "ref": self.ref,
            "submodules": self.submodules,
            "install": self.install,
            "overlay": self.overlay,
            "subdir": self.subdir,
            "build_env": dict(sorted(self.build_env.items())),
            "pre_build": list(self.pre_build),
            "sanity": self.sanity.to_dict(),
            "jobs": self.jobs.to_dict(),
            "fetches": [f.to_dict() for f in self.fetches],
        }

    def dumps(self) -> str:
        """The committed file's exact text: sorted keys, two-space indent, one trailing newline."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=True) + "\n"

    @classmethod
    def from_dict(cls, data: Any, where: str = "plan") -> SourcePlan:
        return _with_remedy(lambda: _read(Table.root(data, where, PlanFormatError)))


class PlanFormatError(FormatError):
    """A source build plan file is malformed (it is generated: re-render it)."""


def read_plan(path: Path | str) -> SourcePlan:
    """Load and validate a plan file; a PlanFormatError names the file and the key of the first problem."""
    path = Path(path)
    try:
        table = _with_remedy(lambda: read_json(path, PlanFormatError))
    except (FileNotFoundError, NotADirectoryError):
        raise PlanFormatError("no such plan file", file=str(path), remedy=REMEDY) from None
    return _with_remedy(lambda: _read(table))


def _with_remedy(read: Callable[[], T]) -> T:
    """Every plan error says how to fix it: plans are generated, so re-render."""
    try:
        return read()
    except PlanFormatError as exc:
        if exc.remedy:
            raise
        raise PlanFormatError(exc.detail, file=exc.file, line=exc.line, key=exc.key, remedy=REMEDY) from None


# ---- from the spec ------------------------------------------------------------------------------


def plan_for(target: Target, source: Source, fetched: Mapping[str, Source], jobs: JobsPlan | None = None) -> SourcePlan:
    """The plan of ``source`` in ``target``; ``fetched`` maps the names in ``source.fetches`` to sources.
    ``jobs``: the jobs formula's inputs from the facts (``sourceplans.jobs_inputs``); None: only the
    target's settings, nothing read (nothing exported)."""
    env = {"TORCH_CUDA_ARCH_LIST": target.gpu.torch_cuda_arch_list} if target.gpu is not None else {}
    env.update(target.build_env_for(source))
    return SourcePlan(
        target=target.name,
        name=source.name,
        dist=source.dist_dir_name,
        repo=source.repo,
        commit=source.commit,
        ref=source.ref,
        submodules=source.submodules,
        install=source.install,
        overlay=source.overlay,
        subdir=source.subdir,
        build_env=dict(sorted(env.items())),
        pre_build=tuple(source.pre_build),
        sanity=source.sanity,
        jobs=jobs or target_jobs(target, nvcc_threads=source.jobs.nvcc_threads),
        fetches=tuple(_fetch(env_name, fetched[name]) for env_name, name in sorted(source.fetches.items())),
        unobtainable=dict(sorted(source.unobtainable.items())),
    )


def target_jobs(target: Target, **facts: Any) -> JobsPlan:
    """The jobs inputs with ``target``'s settings; ``facts``: the source's own (reads, units, ...)."""
    return JobsPlan(
        cuda=target.uses_cuda,
        mem_per_job_gib=target.build.mem_per_job_gib,
        max_jobs=target.build.max_jobs,
        nvcc_threads_override=target.build.nvcc_threads,
        **facts,
    )


def _fetch(env: str, src: Source) -> FetchPlan:
    via = fetch_via(env)
    return FetchPlan(
        env=env,
        name=src.name,
        repo=src.repo,
        commit=src.commit,
        ref=src.ref,
        submodules=src.submodules,
        subdir=src.subdir if via == VIA_ENV else "",  # CMake's override names the root (UP008)
        via=via,
    )


def fetch_env(plan: SourcePlan, env: Mapping[str, str], fetched: Mapping[str, str]) -> dict[str, str]:
    """``env`` with each fetch's tree given to the build as its plan says: an environment variable set to
    the path, or ``-D<variable>=<path>`` appended to CMAKE_ARGS (what a source stage and ``build-source``
    run with; ``fetched``: variable -> path). vLLM's setup.py splits CMAKE_ARGS on whitespace
    (setup.py:319-321), so a path holding whitespace is refused rather than split."""
    out = dict(env)
    for fetch in plan.fetches:
        path = fetched[fetch.env]
        if fetch.via == VIA_ENV:
            out[fetch.env] = path
            continue
        if not path or any(ch.isspace() for ch in path):
            raise RefusedError(
                f"{plan.name}: the checkout of {fetch.name} is at {path!r}, which CMAKE_ARGS cannot carry "
                "(split on whitespace): build it under a path without whitespace (--workdir)"
            )
        out["CMAKE_ARGS"] = " ".join(x for x in (out.get("CMAKE_ARGS", ""), f"-D{fetch.env}={path}") if x)
    return out


# ---- validating reader --------------------------------------------------------------------------

REMEDY = "re-render it: `megacpp-env render TARGET`"
_PLAN_KEYS = (
    "schema_version", "generated_by", "target", "name", "dist", "repo", "commit", "ref", "submodules", "install",
    "overlay", "subdir", "build_env", "pre_build", "sanity", "jobs", "fetches", "unobtainable",
)  # fmt: skip
_JOBS_KEYS = (
    "reads", "nvcc_threads", "cuda", "mem_per_job_gib", "max_jobs", "nvcc_threads_override", "units", "archs",
    "divides",
)  # fmt: skip
_FETCH_KEYS = ("via", "env", "name", "repo", "commit", "ref", "submodules", "subdir")
_DIST_RE = re.compile(r"^[a-z][a-z0-9-]*$")
_OVERLAY_RE = re.compile(r"^$|^[A-Za-z0-9][A-Za-z0-9._-]*$")
_SUBDIR_RE = re.compile(r"^$|^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$")
_JOBS_ENV_RE = re.compile("^(" + "|".join(JOBS_ENV) + ")$")


def _read(t: Table) -> SourcePlan:
    t.only(_PLAN_KEYS)
    if t.number("schema_version") != SCHEMA:
        t.fail(f"unsupported schema_version {t.data['schema_version']!r} (this tool reads {SCHEMA})", "schema_version",
               remedy=REMEDY)  # fmt: skip
    install = _match(t, "install", re.compile("^(wheel|path)$"), "'wheel' or 'path'")
    target = t.text("target", nonempty=True)
    return SourcePlan(
        target=target,
        **_pin(t),
        dist=_match(t, "dist", _DIST_RE, "a checkout directory name"),
        install=install,
        overlay=_match(t, "overlay", _OVERLAY_RE, "an overlay name or empty"),
        subdir=_match(t, "subdir", _SUBDIR_RE, "a relative directory or empty"),
        build_env=_env(t, "build_env"),
        pre_build=_lines(t, "pre_build"),
        sanity=_sanity(t.table("sanity")),
        jobs=_jobs(t.table("jobs")),
        fetches=tuple(_read_fetch(f) for f in t.tables("fetches", default=[])),
        unobtainable=_unobtainable(t),
    )


def _unobtainable(t: Table) -> dict[str, str]:
    table = t.table("unobtainable", default=None)
    if table is None:
        return {}
    out = {}
    for name in table.data:
        if not _SUBDIR_RE.match(str(name)) or not name:
            table.fail(f"expected a relative path, got {name!r}", str(name), remedy=REMEDY)
        out[str(name)] = _line(table, str(name), nonempty=True)
    return out


def _line(t: Table, key: str, *, nonempty: bool = False) -> str:
    value = t.text(key, nonempty=nonempty)
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        t.fail(f"control character in {value!r}", key, remedy=REMEDY)
    return value


def _match(t: Table, key: str, pattern: re.Pattern[str], what: str) -> str:
    value = t.text(key)
    if not pattern.match(value):
        t.fail(f"expected {what}, got {value!r}", key, remedy=REMEDY)
    return value


def _lines(t: Table, key: str, pattern: re.Pattern[str] | None = None, what: str = "") -> tuple[str, ...]:
    items = t.texts(key, default=None)
    if items is None:
        t.fail("missing (expected an array of strings)", key, remedy=REMEDY)
    for i, item in enumerate(items):
        if any(ord(c) < 32 or ord(c) == 127 for c in item) or (pattern is not None and not pattern.match(item)):
            t.fail(f"expected {what or 'one line'}, got {item!r}", f"{key}[{i}]", remedy=REMEDY)
    return items


def _env(t: Table, key: str) -> dict[str, str]:
    table = t.table(key)
    out = {}
    for name in table.data:
        if not ENV_RE.match(str(name)):
            table.fail(f"invalid environment variable name {name!r}", str(name), remedy=REMEDY)
        out[str(name)] = _line(table, str(name))
    return out


def _sanity(t: Table) -> SanityCheck:
    t.only(("imports", "statements", "vllm_models"))
    return SanityCheck(
        imports=_lines(t, "imports"), statements=_lines(t, "statements"), vllm_models=_lines(t, "vllm_models")
    )


def _jobs(t: Table) -> JobsPlan:
    t.only(_JOBS_KEYS)
    return JobsPlan(
        reads=_lines(t, "reads", _JOBS_ENV_RE, f"one of {', '.join(JOBS_ENV)}"),
        nvcc_threads=_bounded(t, "nvcc_threads", 0, 256),
        cuda=t.flag("cuda"),
        mem_per_job_gib=_bounded(t, "mem_per_job_gib", 1, 1024),
        max_jobs=_bounded(t, "max_jobs", 0, 4096),
        nvcc_threads_override=_bounded(t, "nvcc_threads_override", 0, 256),
        units=_bounded(t, "units", 0, 100_000),
        archs=_bounded(t, "archs", 0, 64),
        divides=t.flag("divides"),
    )


def _bounded(t: Table, key: str, low: int, high: int) -> int:
    value = t.number(key)
    if not low <= value <= high:
        t.fail(f"expected an integer in [{low}, {high}], got {value}", key, remedy=REMEDY)
    return value


def _pin(t: Table) -> dict[str, Any]:
    """What a source's plan and a fetch's share: the pinned repository (name, repo, commit, ref,
    submodules), each checked."""
    return {
        "name": _match(t, "name", NAME_RE, "a source name"),
        "repo": _line(t, "repo", nonempty=True),
        "commit": _match(t, "commit", SHA_RE, "a 40-hex commit SHA"),
        "ref": _line(t, "ref"),
        "submodules": t.flag("submodules"),
    }


def _read_fetch(t: Table) -> FetchPlan:
    t.only(_FETCH_KEYS)
    via = t.text("via", VIA_ENV)
    if via not in FETCH_VIAS:
        t.fail(f"expected one of {', '.join(FETCH_VIAS)}, got {via!r}", "via", remedy=REMEDY)
    if via == VIA_ENV:
        env = _match(t, "env", ENV_RE, "an environment variable name")
    else:
        env = _match(t, "env", re.compile(f"^{CMAKE_FETCH_OVERRIDE_RE.pattern}$"), "FETCHCONTENT_SOURCE_DIR_<NAME>")
    subdir = _match(t, "subdir", _SUBDIR_RE, "a relative directory or empty") if t.has("subdir") else ""
    if subdir and via != VIA_ENV:
        t.fail("CMake's override names the tree's root (FetchContent applies SOURCE_SUBDIR itself)", "subdir",
               remedy=REMEDY)  # fmt: skip
    return FetchPlan(env=env, **_pin(t), subdir=subdir, via=via)
