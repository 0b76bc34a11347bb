"""stack.yaml -> Spec. The schema lives here: allowed keys, required keys, cross references."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from megacpp_env.errors import InputError, SpecError, SpecErrors
from megacpp_env.fsutil import read_bounded
from megacpp_env.layout import CMAKE_FETCH_OVERRIDE_RE, PLATFORMS
from megacpp_env.runtime.catalog import PATCHES
from megacpp_env.sanity import SanityCheck
from megacpp_env.spec import codes as C
from megacpp_env.spec import fields as F
from megacpp_env.spec.model import (
    FEATURES,
    INSTALL_MODES,
    SCHEMA_VERSION,
    Alignment,
    ArtifactSet,
    BuildSettings,
    GpuSpec,
    ImageRef,
    Index,
    Override,
    Provides,
    Resolutions,
    Serving,
    SnapshotConfig,
    Source,
    SourceJobs,
    Spec,
    Target,
    Toolchain,
)
from megacpp_env.spec.yamlsrc import join_key, parse_yaml

T = TypeVar("T")

MAX_SPEC_BYTES = 1 << 20  # the shipped stack.yaml is under 10 KiB

TOP_KEYS = (
    "schema_version", "project", "indexes", "toolchains", "sources", "artifacts", "targets", "aligned", "snapshot",
)  # fmt: skip
INDEX_KEYS = ("url", "explicit", "packages", "prerelease", "reachable_here")
TOOLCHAIN_KEYS = (
    "gcc", "python", "uv", "cuda", "ptx_isa", "min_driver", "cudnn", "cutlass", "tensorrt_llm",
    "apt_repositories", "apt_packages", "apt_options",
)  # fmt: skip
SOURCE_KEYS = (
    "repo", "commit", "ref", "submodules", "install", "overlay", "pre_build", "build_env", "extra_requirements",
    "drop_requirements", "needs", "subdir", "provisional", "sanity", "fetches", "unpinned_fetches", "jobs",
    "build_env_reasons",
    "unobtainable", "unread", "ignore",
)  # fmt: skip
TARGET_KEYS = (
    "description", "platforms", "base_image", "toolchain", "gpu", "features", "serving", "requirements",
    "sources", "runtime_patches", "env", "build", "resolutions", "artifacts", "indexes", "sanity", "ignore",
)  # fmt: skip
ARTIFACT_KEYS = ("url", "env", "dirs", "source", "reachable_here")
# The required keys of each mapping (spec/schema.py publishes them in the JSON Schema too).
TOP_REQUIRED = ("schema_version", "targets")
INDEX_REQUIRED = ("url",)
TOOLCHAIN_REQUIRED = ("gcc", "python", "uv")
SOURCE_REQUIRED = ("repo", "commit")
ARTIFACT_REQUIRED = ("url", "env", "dirs")
TARGET_REQUIRED = ("platforms", "base_image", "toolchain")
SUBDIR_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
ARTIFACT_DIR_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*/$")


def load_spec(path: Path | str) -> Spec:
    p = Path(path)
    try:
        data = read_bounded(p, MAX_SPEC_BYTES)
    except FileNotFoundError:
        raise SpecError(
            "spec file not found", file=str(p), remedy="run from the repository root or pass --spec PATH", code=C.FILE
        ) from None
    except InputError as exc:  # too large, a directory, a FIFO or a device: what read_bounded says
        detail = exc.detail.replace("refusing to read it", "refusing to parse it")
        raise SpecError(detail, file=str(p), code=C.FILE) from None
    except OSError as exc:
        raise SpecError(f"cannot read spec: {exc.strerror or exc}", file=str(p), code=C.FILE) from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = f"byte 0x{data[exc.start]:02x} at offset {exc.start}"
        raise SpecError(f"not UTF-8 ({where})", file=str(p), code=C.FILE) from None
    return load_spec_text(text, p)


def load_spec_text(text: str, path: Path | str = "stack.yaml") -> Spec:
    """The spec in ``text``. Every error of the document is found in one run: the loader reads on
    after an error (``fields.Reader``) and raises ``SpecErrors`` with all of them at the end."""
    p = Path(path)
    if len(text) > MAX_SPEC_BYTES:  # before composing: a huge document costs seconds and gigabytes
        raise SpecError(f"larger than {MAX_SPEC_BYTES} characters; refusing to parse it", file=str(p), code=C.FILE)
    parsed = parse_yaml(text, str(p))
    r = F.Reader(str(p), parsed.lines)
    spec = r.attempt(lambda: _spec(r, parsed.data, p, parsed.lines), None)
    if r.errors or spec is None:
        raise SpecErrors(r.errors or [r.fail("", "the spec could not be read")])
    return spec


def _spec(r: F.Reader, data: Any, p: Path, lines: dict[str, int]) -> Spec:
    doc = r.mapping(data, "", allowed=TOP_KEYS, required=TOP_REQUIRED, partial=True)
    version = r.attempt(lambda: _schema_version(r, doc.get("schema_version", SCHEMA_VERSION)), SCHEMA_VERSION)
    project = r.attempt(lambda: r.pattern(doc.get("project", "megacpp"), "project", F.SLUG_RE, "a project slug"), "")
    indexes = _section(r, doc, "indexes", F.SLUG_RE, _index)
    toolchains = _section(r, doc, "toolchains", F.SLUG_RE, _toolchain)
    sources = _section(r, doc, "sources", F.NAME_RE, _source)
    _check_needs(r, sources)
    _check_fetches(r, sources)
    _check_index_packages(r, indexes)
    artifacts = _section(r, doc, "artifacts", F.NAME_RE, _artifact_set)

    def build_target(r: F.Reader, value: Any, key: str, name: str) -> Target:
        return _target(r, value, key, name, toolchains, sources, artifacts, indexes)

    targets = _section(r, doc, "targets", F.NAME_RE, build_target) if "targets" in doc else {}
    if "targets" in doc and not targets and not any(b.startswith("targets.") for b in r.broken):
        r.record(r.fail("targets", "at least one target is required"))
    aligned_raw: list[Any] = r.attempt(lambda: r.seq(doc.get("aligned", []), "aligned"), [])
    aligned = tuple(
        a
        for i, v in enumerate(aligned_raw)
        if (a := r.attempt(partial(_alignment, r, v, join_key("aligned", i), targets), None)) is not None
    )
    return r.build(
        Spec,
        path=p,
        project=project,
        indexes=indexes,
        toolchains=toolchains,
        sources=sources,
        targets=targets,
        aligned=aligned,
        artifacts=artifacts,
        snapshot=lambda: _snapshot(r, doc.get("snapshot", {}), "snapshot"),
        schema_version=version,
        lines=dict(lines),
    )


def _schema_version(r: F.Reader, value: Any) -> int:
    version = r.integer(value, "schema_version", minimum=1, maximum=999)
    if version != SCHEMA_VERSION:
        raise r.fail(
            "schema_version",
            f"unsupported schema_version {version}",
            f"this tool reads {SCHEMA_VERSION}",
            code=C.VERSION,
        )
    return version


def _section(
    r: F.Reader, doc: dict[str, Any], key: str, name_re: re.Pattern[str], build: Callable[..., T]
) -> dict[str, T]:
    return r.attempt(lambda: _named(r, doc.get(key, {}), key, name_re, build), {})


def _named(r: F.Reader, value: Any, key: str, name_re: re.Pattern[str], build: Callable[..., T]) -> dict[str, T]:
    """Each entry of a section, read on its own: one that fails is recorded as broken and left out."""
    out: dict[str, T] = {}
    for name, item in r.mapping(value, key).items():
        child = join_key(key, name)
        if not name_re.fullmatch(name):
            r.record(r.fail(child, f"invalid name {name!r}", f"names must match {name_re.pattern}"))
            r.broken.add(child)
            continue
        built = r.attempt(partial(build, r, item, child, name), None)
        if built is None:
            r.broken.add(child)
        else:
            out[name] = built
    return out


def _index(r: F.Reader, value: Any, key: str, name: str) -> Index:
    d = r.mapping(value, key, allowed=INDEX_KEYS, required=INDEX_REQUIRED)
    return r.build(
        Index,
        name=name,
        url=lambda: r.url(d["url"], join_key(key, "url"), schemes=("https", "http", "file")),
        explicit=lambda: r.boolean(d.get("explicit", False), join_key(key, "explicit")),
        packages=lambda: r.str_list(d.get("packages", []), join_key(key, "packages"), _package_name(r)),
        prerelease=lambda: r.boolean(d.get("prerelease", False), join_key(key, "prerelease")),
        reachable_here=lambda: r.boolean(d.get("reachable_here", True), join_key(key, "reachable_here")),
    )


def _package_name(r: F.Reader) -> Callable[[str, str], str]:
    def check(value: str, key: str) -> str:
        if not F.PACKAGE_NAME_RE.fullmatch(value):
            raise r.fail(key, f"invalid package name {value!r}")
        return value

    return check


def _check_index_packages(r: F.Reader, indexes: dict[str, Index]) -> None:
    owner: dict[str, str] = {}
    for index in indexes.values():
        for i, pkg in enumerate(index.packages):
            canon = canonicalize_name(pkg)
            if canon in owner:
                key = join_key(join_key(join_key("indexes", index.name), "packages"), i)
                r.record(r.fail(key, f"package {pkg!r} is already pinned to index {owner[canon]!r}", code=C.DUPLICATE))
            owner.setdefault(canon, index.name)


def _keyer(key: str) -> Callable[[str], str]:
    def k(field: str) -> str:
        return join_key(key, field)

    return k


def _opt(r: F.Reader, d: dict[str, Any], key: str, name: str, read: Callable[[Any, str], str]) -> str:
    return read(d[name], join_key(key, name)) if name in d else ""


def _toolchain(r: F.Reader, value: Any, key: str, name: str) -> Toolchain:
    d = r.mapping(value, key, allowed=TOOLCHAIN_KEYS, required=TOOLCHAIN_REQUIRED)
    k = _keyer(key)
    return r.build(
        Toolchain,
        name=name,
        gcc=lambda: r.version(d["gcc"], k("gcc")),
        python=lambda: r.version(d["python"], k("python")),
        uv=lambda: r.version(d["uv"], k("uv")),
        cuda=lambda: _cuda_version(r, d.get("cuda", ""), k("cuda")),
        cuda_pypi=lambda: _cuda_pypi(r, d.get("cuda", ""), k("cuda")),
        ptx_isa=lambda: _opt(r, d, key, "ptx_isa", r.version),
        min_driver=lambda: _opt(r, d, key, "min_driver", r.version),
        cudnn=lambda: _opt(r, d, key, "cudnn", r.specifier),
        cutlass=lambda: _opt(r, d, key, "cutlass", r.specifier),
        tensorrt_llm=lambda: _opt(r, d, key, "tensorrt_llm", r.specifier),
        apt_repositories=lambda: _patterned_list(r, d, key, "apt_repositories", F.APT_REPO_RE, "a ppa:owner/name"),
        apt_packages=lambda: _patterned_list(r, d, key, "apt_packages", F.APT_PACKAGE_RE, "a Debian package name"),
        apt_options=lambda: _patterned_list(r, d, key, "apt_options", F.APT_OPTION_RE, "an apt option Name=value"),
    )


CUDA_KEYS = ("version", "pypi")


def _cuda_version(r: F.Reader, value: Any, key: str) -> str:
    """``cuda: "13.2"`` (from the base image) or ``cuda: {version: "13.2", pypi: [...]}``."""
    if value == "":
        return ""
    if not isinstance(value, dict):
        return r.version(value, key)
    d = r.mapping(value, key, allowed=CUDA_KEYS, required=CUDA_KEYS)
    version = r.version(d["version"], join_key(key, "version"))
    if int(version.split(".", 1)[0]) < 13:
        raise r.fail(
            join_key(key, "version"),
            f"CUDA {version} from PyPI: only the CUDA 13 wheel layout (nvidia/cu13/...) is supported",
            'take CUDA 12 from the base image (cuda: "12.x")',
        )
    return version


def _cuda_pypi(r: F.Reader, value: Any, key: str) -> tuple[str, ...]:
    if not isinstance(value, dict):
        return ()
    if "pypi" not in value:  # _cuda_version reports the missing key
        raise F.Skip
    reqs = _requirements(r, value["pypi"], join_key(key, "pypi"))
    if not reqs:
        raise r.fail(join_key(key, "pypi"), "empty list", 'name the wheels, e.g. "cuda-toolkit[nvcc,crt]==13.2.0"')
    return reqs


def _patterned_list(
    r: F.Reader, d: dict[str, Any], key: str, name: str, regex: re.Pattern[str], what: str
) -> tuple[str, ...]:
    def check(value: str, item_key: str) -> str:
        return r.pattern(value, item_key, regex, what)

    return r.str_list(d.get(name, []), join_key(key, name), check)


def _requirements(r: F.Reader, value: Any, key: str) -> tuple[str, ...]:
    return r.str_list(value, key, r.requirement)


def _source(r: F.Reader, value: Any, key: str, name: str) -> Source:
    if isinstance(value, dict) and "requirements" in value:
        raise r.fail(
            join_key(key, "requirements"),
            "renamed to extra_requirements: a source's own requirements are its upstream facts",
            f"keep only what the stack adds (build tools) under extra_requirements; facts/{name}.toml holds the rest",
            code=C.UNKNOWN_KEY,
        )
    d = r.mapping(value, key, allowed=SOURCE_KEYS, required=SOURCE_REQUIRED)
    k = _keyer(key)
    return r.build(
        Source,
        name=name,
        repo=lambda: r.url(d["repo"], k("repo")),
        commit=lambda: r.commit(d["commit"], k("commit")),
        ref=lambda: _opt(r, d, key, "ref", r.string),
        submodules=lambda: r.boolean(d.get("submodules", False), k("submodules")),
        install=lambda: (
            "path" if r.choice(d.get("install", "wheel"), k("install"), INSTALL_MODES) == "path" else "wheel"
        ),
        overlay=lambda: r.pattern(d["overlay"], k("overlay"), F.SLUG_RE, "an overlay name") if "overlay" in d else "",
        pre_build=lambda: r.str_list(d.get("pre_build", []), k("pre_build")),
        build_env=lambda: r.env_map(d.get("build_env", {}), k("build_env")),
        extra_requirements=lambda: _requirements(r, d.get("extra_requirements", []), k("extra_requirements")),
        drop_requirements=lambda: _reasons(
            r, d.get("drop_requirements", {}), k("drop_requirements"), F.PACKAGE_NAME_RE, "a package name"
        ),
        needs=lambda: _reasons(r, d.get("needs", {}), k("needs"), F.NAME_RE, "a source name"),
        subdir=lambda: r.pattern(d["subdir"], k("subdir"), SUBDIR_RE, "a relative directory") if "subdir" in d else "",
        provisional=lambda: _opt(r, d, key, "provisional", r.string),
        sanity=lambda: _sanity(r, d.get("sanity", {}), k("sanity")),
        fetches=lambda: _fetches(r, d.get("fetches", {}), k("fetches")),
        unpinned_fetches=lambda: _reasons(
            r, d.get("unpinned_fetches", {}), k("unpinned_fetches"), F.ENV_NAME_RE, "a variable"
        ),
        jobs=lambda: _jobs(r, d.get("jobs", {}), k("jobs")),
        build_env_reasons=lambda: _build_env_reasons(r, d, k("build_env_reasons")),
        unobtainable=lambda: _reasons(r, d.get("unobtainable", {}), k("unobtainable"), SUBDIR_RE, "a relative path"),
        unread=lambda: _opt(r, d, key, "unread", r.string),
        ignore=lambda: _ignore(r, d.get("ignore", {}), k("ignore")),
    )


def _build_env_reasons(r: F.Reader, d: dict[str, Any], key: str) -> dict[str, str]:
    """``build_env_reasons``: VAR -> why the build needs it, for a build_env variable that is neither a
    compiler/CUDA knob nor one the source's facts show its build reading (rule UP001 accepts it then)."""
    out = _reasons(r, d.get("build_env_reasons", {}), key, F.ENV_NAME_RE, "a variable of build_env")
    build_env = d.get("build_env") or {}
    missing = [name for name in out if not isinstance(build_env, dict) or name not in build_env]
    for name in missing:
        r.record(
            r.fail(join_key(key, name), f"{name} is not set in build_env", "set it under build_env, or drop it here")
        )
    if missing:
        raise F.Skip
    return out


def _fetches(r: F.Reader, value: Any, key: str) -> dict[str, str]:
    """``VARIABLE: source``: an environment variable the build reads, or CMake's own override
    ``FETCHCONTENT_SOURCE_DIR_<NAME>`` (a cache variable, appended to CMAKE_ARGS as ``-D``)."""
    raw = r.mapping(value, key)
    cmake = {name: raw[name] for name in raw if isinstance(name, str) and CMAKE_FETCH_OVERRIDE_RE.fullmatch(name)}
    out = r.env_map({name: v for name, v in raw.items() if name not in cmake}, key)
    for name, source in cmake.items():
        out[name] = r.string(source, join_key(key, name))
    for env, name in out.items():
        r.pattern(name, join_key(key, env), F.NAME_RE, "the name of another source under `sources:`")
    return dict(sorted(out.items()))


def _check_fetches(r: F.Reader, sources: dict[str, Source]) -> None:
    """Each fetch names another source, which itself fetches nothing (one level, no cycles)."""
    for src in sources.values():
        for env, name in src.fetches.items():
            key = join_key(join_key(join_key("sources", src.name), "fetches"), env)
            if join_key("sources", name) in r.broken:
                continue  # its own errors are reported
            if name not in sources or name == src.name:
                known = [n for n in sources if n != src.name]
                r.record(
                    r.fail(key, f"unknown source {name!r}", _known_remedy(name, known, "sources"), code=C.UNKNOWN_NAME)
                )
            elif sources[name].fetches:
                r.record(r.fail(key, f"source {name!r} has fetches of its own", "a fetched source must fetch nothing"))
        for env in src.unpinned_fetches:
            if env in src.fetches:
                key = join_key(join_key(join_key("sources", src.name), "unpinned_fetches"), env)
                r.record(
                    r.fail(key, f"{env} is also under fetches", "a fetch is pinned or not: keep one", code=C.DUPLICATE)
                )


def _reasons(r: F.Reader, value: Any, key: str, name_re: re.Pattern[str], what: str) -> dict[str, str]:
    """A mapping NAME -> non-empty reason."""
    out: dict[str, str] = {}
    failed = False
    for name, reason in r.mapping(value, key).items():
        child = join_key(key, name)
        if not isinstance(name, str) or not name_re.match(name):
            r.record(r.fail(child, f"expected {what}, got {name!r}"))
            failed = True
            continue
        text = r.attempt(partial(r.string, reason, child), None)
        failed = failed or text is None
        out[name] = text or ""
    if failed:
        raise F.Skip
    return dict(sorted(out.items()))


def _ignore(r: F.Reader, value: Any, key: str) -> dict[str, str]:
    """``ignore: {CODE: reason}``: the findings of CODE reported on this target or source are suppressed,
    each with its reason (``megacpp_env.suppress``); which codes exist is checked there, not here."""
    return _reasons(r, value, key, F.CODE_RE, "a finding code such as TC005")


def _check_needs(r: F.Reader, sources: dict[str, Source]) -> None:
    for src in sources.values():
        for name in src.needs:
            if (name not in sources or name == src.name) and join_key("sources", name) not in r.broken:
                key = join_key(join_key(join_key("sources", src.name), "needs"), name)
                known = [n for n in sources if n != src.name]
                r.record(
                    r.fail(key, f"unknown source {name!r}", _known_remedy(name, known, "sources"), code=C.UNKNOWN_NAME)
                )


def _known_remedy(name: str, known: list[str], section: str) -> str:
    hint = difflib.get_close_matches(name, known, n=1)
    return (
        f"did you mean {hint[0]!r}?" if hint else f"declare it under `{section}:` (known: {', '.join(known) or 'none'})"
    )


def _artifact_set(r: F.Reader, value: Any, key: str, name: str) -> ArtifactSet:
    d = r.mapping(value, key, allowed=ARTIFACT_KEYS, required=ARTIFACT_REQUIRED)
    k = _keyer(key)
    return r.build(
        ArtifactSet,
        name=name,
        url=lambda: r.url(d["url"], k("url"), schemes=("https", "http", "file")),
        env=lambda: _artifact_env(r, d["env"], k("env")),
        dirs=lambda: _artifact_dirs(r, d["dirs"], k("dirs")),
        source=lambda: r.pattern(d["source"], k("source"), F.NAME_RE, "a source name") if "source" in d else "",
        reachable_here=lambda: r.boolean(d.get("reachable_here", True), k("reachable_here")),
    )


def _artifact_dirs(r: F.Reader, value: Any, key: str) -> dict[str, str]:
    dirs: dict[str, str] = {}
    for directory, sha in r.mapping(value, key).items():
        child = join_key(key, directory)
        if not isinstance(directory, str) or not ARTIFACT_DIR_RE.match(directory) or ".." in directory.split("/"):
            raise r.fail(child, f"expected a relative directory ending in '/', got {directory!r}")
        dirs[directory] = r.pattern(sha, child, SHA256_RE, "the sha256 of the directory's checksums.txt")
    if not dirs:
        raise r.fail(key, "at least one directory is required")
    return dict(sorted(dirs.items()))


def _artifact_env(r: F.Reader, value: Any, key: str) -> str:
    env = r.string(value, key)
    if not F.ENV_NAME_RE.match(env):
        raise r.fail(key, f"invalid environment variable name {env!r}")
    return env


def _jobs(r: F.Reader, value: Any, key: str) -> SourceJobs:
    if isinstance(value, dict) and "reads" in value:
        raise r.fail(
            join_key(key, "reads"),
            "the parallelism variables a build reads are not written by hand: they come from its facts "
            "(facts/<source>.toml), its overlay and the build tools the facts show it uses",
            "drop jobs.reads; re-extract the facts if the build reads something they miss "
            "(`megacpp-env facts extract SOURCE --from CHECKOUT`)",
        )
    d = r.mapping(value, key, allowed=("nvcc_threads",))
    threads = r.integer(d.get("nvcc_threads", 0), join_key(key, "nvcc_threads"), maximum=256)
    return SourceJobs(nvcc_threads=threads)


def _sanity(r: F.Reader, value: Any, key: str) -> SanityCheck:
    d = r.mapping(value, key, allowed=("imports", "statements", "vllm_models"))

    def module(value: str, item_key: str) -> str:
        return r.pattern(value, item_key, F.MODULE_RE, "a dotted module name")

    return r.build(
        SanityCheck,
        imports=lambda: r.str_list(d.get("imports", []), join_key(key, "imports"), module),
        statements=lambda: r.str_list(d.get("statements", []), join_key(key, "statements")),
        vllm_models=lambda: r.str_list(d.get("vllm_models", []), join_key(key, "vllm_models"), module),
    )


def _target(
    r: F.Reader,
    value: Any,
    key: str,
    name: str,
    toolchains: dict[str, Toolchain],
    sources: dict[str, Source],
    artifacts: dict[str, ArtifactSet],
    indexes: dict[str, Index],
) -> Target:
    d = r.mapping(value, key, allowed=TARGET_KEYS, required=TARGET_REQUIRED)
    k = _keyer(key)
    platforms = r.attempt(lambda: _platforms(r, d["platforms"], k("platforms")), None)
    picked = r.attempt(lambda: _picked(r, d.get("sources", []), k("sources"), sources), None)
    env = r.attempt(lambda: r.mapping(d.get("env", {}), k("env"), allowed=("build", "runtime", "sources")), None)
    return r.build(
        Target,
        name=name,
        description=lambda: r.string(d.get("description", name), k("description")),
        platforms=lambda: r.need(platforms),
        base_images=lambda: _base_images(r, d["base_image"], k("base_image"), r.need(platforms)),
        toolchain=lambda: toolchains[_reference(r, d["toolchain"], k("toolchain"), toolchains, "toolchains")],
        requirements=lambda: _requirements(r, d.get("requirements", []), k("requirements")),
        sources=lambda: r.need(picked),
        runtime_patches=lambda: r.str_list(
            d.get("runtime_patches", []), k("runtime_patches"), lambda v, ik: r.choice(v, ik, PATCHES)
        ),
        features=lambda: r.str_list(d.get("features", []), k("features"), lambda v, ik: r.choice(v, ik, FEATURES)),
        gpu=lambda: _gpu(r, d["gpu"], k("gpu")) if "gpu" in d else None,
        serving=lambda: _serving(r, d["serving"], k("serving")) if "serving" in d else None,
        build_env=lambda: r.env_map(r.need(env).get("build", {}), join_key(k("env"), "build")),
        runtime_env=lambda: r.env_map(r.need(env).get("runtime", {}), join_key(k("env"), "runtime")),
        source_env=lambda: _source_env(
            r, r.need(env).get("sources", {}), join_key(k("env"), "sources"), r.need(picked)
        ),
        build=lambda: _build(r, d.get("build", {}), k("build")),
        resolutions=lambda: _resolutions(r, d.get("resolutions", {}), k("resolutions")),
        artifacts=lambda: r.str_list(
            d.get("artifacts", []), k("artifacts"), lambda v, ik: _reference(r, v, ik, artifacts, "artifacts")
        ),
        source_sanity=lambda: _source_sanity(r, d.get("sanity", {}), k("sanity"), r.need(picked)),
        indexes=lambda: (
            r.str_list(d["indexes"], k("indexes"), lambda v, ik: _reference(r, v, ik, indexes, "indexes"))
            if "indexes" in d
            else None
        ),
        ignore=lambda: _ignore(r, d.get("ignore", {}), k("ignore")),
    )


def _platforms(r: F.Reader, value: Any, key: str) -> tuple[str, ...]:
    platforms = r.str_list(value, key, lambda v, ik: r.choice(v, ik, PLATFORMS))
    if not platforms:
        raise r.fail(key, "at least one platform is required", f"one of: {', '.join(PLATFORMS)}")
    return platforms


def _picked(r: F.Reader, value: Any, key: str, sources: dict[str, Source]) -> tuple[Source, ...]:
    names = r.str_list(value, key, lambda v, ik: _reference(r, v, ik, sources, "sources"))
    return tuple(sources[n] for n in names)


def _source_sanity(r: F.Reader, value: Any, key: str, picked: tuple[Source, ...]) -> dict[str, SanityCheck]:
    """``targets.T.sanity.<source>``: checks added to that source's own on this target only (what only
    this target can assert, e.g. the CUDA archs its build was restricted to)."""
    names = {s.name: s for s in picked}
    out: dict[str, SanityCheck] = {}
    for name, checks in r.mapping(value, key).items():
        child = join_key(key, name)
        _reference(r, name, child, names, "sources", picked=True)
        out[name] = _sanity(r, checks, child)
    return dict(sorted(out.items()))


def _source_env(r: F.Reader, value: Any, key: str, picked: tuple[Source, ...]) -> dict[str, dict[str, str]]:
    names = {s.name: s for s in picked}
    out: dict[str, dict[str, str]] = {}
    for name, env in r.mapping(value, key).items():
        child = join_key(key, name)
        _reference(r, name, child, names, "sources", picked=True)
        out[name] = r.env_map(env, child)
    return dict(sorted(out.items()))


def _resolutions(r: F.Reader, value: Any, key: str) -> Resolutions:
    d = r.mapping(value, key, allowed=("overrides", "provides", "prereleases"))
    return r.build(
        Resolutions,
        overrides=lambda: _overrides(r, d.get("overrides", []), join_key(key, "overrides")),
        provides=lambda: _each(r, d.get("provides", []), join_key(key, "provides"), _provides),
        prereleases=lambda: _reasons(
            r, d.get("prereleases", {}), join_key(key, "prereleases"), F.PACKAGE_NAME_RE, "a package name"
        ),
    )


def _each(r: F.Reader, value: Any, key: str, read: Callable[[F.Reader, Any, str], T]) -> tuple[T, ...]:
    """Each item of a list, read on its own (every bad one recorded)."""
    items = [r.attempt(partial(read, r, v, join_key(key, i)), None) for i, v in enumerate(r.seq(value, key))]
    if any(item is None for item in items):
        raise F.Skip
    return tuple(item for item in items if item is not None)


def _overrides(r: F.Reader, value: Any, key: str) -> tuple[Override, ...]:
    overrides = _each(r, value, key, _override)
    seen: dict[str, int] = {}
    for i, o in enumerate(overrides):
        canon = canonicalize_name(Requirement(o.requirement).name)
        if canon in seen:
            raise r.fail(
                join_key(key, i),
                f"a second override for {canon!r}",
                f"one override per package (the first is overrides[{seen[canon]}])",
                code=C.DUPLICATE,
            )
        seen[canon] = i
    return overrides


def _override(r: F.Reader, value: Any, key: str) -> Override:
    d = r.mapping(value, key, allowed=("requirement", "reason", "requirers"), required=("requirement", "reason"))
    return r.build(
        Override,
        requirement=lambda: r.requirement(
            r.string(d["requirement"], join_key(key, "requirement")), join_key(key, "requirement")
        ),
        reason=lambda: r.string(d["reason"], join_key(key, "reason")),
        requirers=lambda: r.str_list(d.get("requirers", []), join_key(key, "requirers"), _package_name(r)),
    )


def _provides(r: F.Reader, value: Any, key: str) -> Provides:
    d = r.mapping(value, key, allowed=("provider", "provides", "reason"), required=("provider", "provides", "reason"))
    provider = _package_name(r)(r.string(d["provider"], join_key(key, "provider")), join_key(key, "provider"))
    provides = _package_name(r)(r.string(d["provides"], join_key(key, "provides")), join_key(key, "provides"))
    if canonicalize_name(provider) == canonicalize_name(provides):
        raise r.fail(join_key(key, "provides"), "a package cannot provide itself")
    return Provides(provider=provider, provides=provides, reason=r.string(d["reason"], join_key(key, "reason")))


def _reference(r: F.Reader, value: Any, key: str, known: dict[str, Any], section: str, *, picked: bool = False) -> str:
    """A name that ``known`` (a section of the spec, or a target's ``picked`` sources) has; one whose
    entry failed to read skips what refers to it (its own errors are reported)."""
    name = r.string(value, key)
    if name not in known:
        if join_key(section, name) in r.broken:
            raise F.Skip
        hint = difflib.get_close_matches(name, list(known), n=1)
        where = "the target's `sources:`" if picked else f"`{section}:`"
        remedy = (
            f"did you mean {hint[0]!r}?" if hint else f"define it under {where} (known: {', '.join(known) or 'none'})"
        )
        raise r.fail(key, f"unknown {section[:-1]} {name!r}", remedy, code=C.UNKNOWN_NAME)
    return name


def _base_images(r: F.Reader, value: Any, key: str, platforms: tuple[str, ...]) -> dict[str, ImageRef]:
    if isinstance(value, dict):
        m = r.mapping(value, key, allowed=PLATFORMS)
        m = {p: v for p, v in m.items() if p in PLATFORMS}
        missing = [p for p in platforms if p not in m]
        if missing:
            raise r.fail(key, f"no base image for platform {missing[0]}", "give one image per platform of the target")
        extra = [p for p in m if p not in platforms]
        if extra:
            raise r.fail(join_key(key, extra[0]), f"platform {extra[0]} is not in the target's platforms")
        return {p: r.image(m[p], join_key(key, p)) for p in platforms}
    image = r.image(value, key)
    return dict.fromkeys(platforms, image)


def _gpu(r: F.Reader, value: Any, key: str) -> GpuSpec:
    d = r.mapping(
        value, key, allowed=("archs", "kernel_arch", "torch_cuda_arch_list", "sm_count", "peak_bf16_tflops"),
        required=("archs", "kernel_arch", "torch_cuda_arch_list"),
    )  # fmt: skip
    k = _keyer(key)

    def arch(value: str, item_key: str) -> str:
        return r.pattern(value, item_key, F.SM_ARCH_RE, "a CUDA arch such as sm_121a or sm_120f")

    def archs() -> tuple[str, ...]:
        found = r.str_list(d["archs"], k("archs"), arch)
        if not found:
            raise r.fail(k("archs"), "at least one GPU arch is required")
        return found

    return r.build(
        GpuSpec,
        archs=archs,
        kernel_arch=lambda: arch(r.string(d["kernel_arch"], k("kernel_arch")), k("kernel_arch")),
        torch_cuda_arch_list=lambda: r.pattern(
            d["torch_cuda_arch_list"],
            k("torch_cuda_arch_list"),
            F.ARCH_LIST_RE,
            'a list such as "9.0;10.0;12.0"',
        ),
        sm_count=lambda: r.integer(d.get("sm_count", 0), k("sm_count"), maximum=10_000),
        peak_bf16_tflops=lambda: r.number(d.get("peak_bf16_tflops", 0), k("peak_bf16_tflops"), low=0, high=100_000),
    )


def _serving(r: F.Reader, value: Any, key: str) -> Serving:
    d = r.mapping(value, key, allowed=("enforce_eager", "gpu_memory_utilization"))
    return r.build(
        Serving,
        enforce_eager=lambda: r.boolean(d.get("enforce_eager", True), join_key(key, "enforce_eager")),
        gpu_memory_utilization=lambda: r.number(
            d.get("gpu_memory_utilization", 0.9),
            join_key(key, "gpu_memory_utilization"),
            low=0,
            high=1,
            low_open=True,
        ),
    )


def _build(r: F.Reader, value: Any, key: str) -> BuildSettings:
    d = r.mapping(value, key, allowed=("max_jobs", "nvcc_threads", "mem_per_job_gib"))
    return r.build(
        BuildSettings,
        max_jobs=lambda: r.integer(d.get("max_jobs", 0), join_key(key, "max_jobs"), maximum=4096),
        nvcc_threads=lambda: r.integer(d.get("nvcc_threads", 0), join_key(key, "nvcc_threads"), maximum=256),
        mem_per_job_gib=lambda: r.integer(
            d.get("mem_per_job_gib", 4), join_key(key, "mem_per_job_gib"), minimum=1, maximum=1024
        ),
    )


def _alignment(r: F.Reader, value: Any, key: str, targets: dict[str, Target]) -> Alignment:
    d = r.mapping(value, key, allowed=("targets", "allow_divergence"), required=("targets",))
    names = r.str_list(d["targets"], join_key(key, "targets"), lambda v, ik: _reference(r, v, ik, targets, "targets"))
    if len(names) < 2:
        raise r.fail(join_key(key, "targets"), "an alignment group needs at least two targets")
    allow = r.str_list(d.get("allow_divergence", []), join_key(key, "allow_divergence"), _package_name(r))
    return Alignment(targets=names, allow_divergence=allow)


def _snapshot(r: F.Reader, value: Any, key: str) -> SnapshotConfig:
    d = r.mapping(value, key, allowed=("golden_dir", "ignore"))
    return r.build(
        SnapshotConfig,
        golden_dir=lambda: r.inside_repo(d.get("golden_dir", ".megacpp/golden"), join_key(key, "golden_dir")),
        ignore=lambda: r.str_list(d.get("ignore", []), join_key(key, "ignore")),
    )
