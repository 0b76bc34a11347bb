"""What a source's build files read and do: environment variables (Python build files and every
local module they import or load by path, to a fixpoint; CMake files), build tools with env reads of
their own, hard-coded arch flags, build-time fetches, bundled component versions and artifact pins."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from megacpp_env.facts import cmake, pyscan
from megacpp_env.facts.model import ArchFlags, ArtifactManifest, Component, EnvRead, Fetch, ToolUse
from megacpp_env.facts.project import load_pyproject, rel
from megacpp_env.fsutil import read_regular

SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildScan:
    env: tuple[EnvRead, ...]
    tools: tuple[ToolUse, ...]
    arch: ArchFlags
    fetches: tuple[Fetch, ...]
    files: tuple[str, ...]  # the Python build files read (the closure), relative to the root


def entry_files(project: Path) -> list[Path]:
    """setup.py, the PEP 517 in-tree backend module (``backend-path``) and the module a dynamic
    ``version = {attr = ...}`` names (setuptools imports it when it cannot read it statically)."""
    out = [project / "setup.py"] if (project / "setup.py").is_file() else []
    pyproject = load_pyproject(project)
    system = pyproject.get("build-system", {})
    backend = str(system.get("build-backend", "")).split(":")[0]
    for base in system.get("backend-path", []):
        path = (project / base).joinpath(*backend.split(".")).with_suffix(".py")
        if backend and path.is_file():
            out.append(path)
    version = pyproject.get("tool", {}).get("setuptools", {}).get("dynamic", {}).get("version")
    if isinstance(version, dict) and isinstance(version.get("attr"), str):
        module = version["attr"].rpartition(".")[0].split(".")
        for path in (project.joinpath(*module).with_suffix(".py"), project.joinpath(*module, "__init__.py")):
            if path.is_file():
                out.append(path)
    return out


def _resolve_module(dotted: str, level: int, current: Path, roots: Iterable[Path]) -> list[Path]:
    """Local files a module import executes: each package ``__init__.py`` on the way, then the module."""
    parts = [p for p in dotted.split(".") if p]
    bases = [current.parents[level - 1]] if level else list(roots)
    for base in bases:
        found: list[Path] = []
        here = base
        for part in parts:
            here = here / part
            if (here / "__init__.py").is_file():
                found.append(here / "__init__.py")
            elif here.with_suffix(".py").is_file():
                found.append(here.with_suffix(".py"))
                break
            else:
                break
        if found:
            return found
    return []


def closure(project: Path, root: Path) -> list[Path]:
    """The Python files a build runs: entry files, the local modules they import (also inside their
    functions), the local modules those import at module level, and files loaded by path; to a fixpoint.
    Imports inside functions of non-entry modules are not followed (vLLM's envs.py would pull in all of
    vLLM through a helper that the build never calls)."""
    roots = [
        project,
        root,
        *(project / b for b in load_pyproject(project).get("build-system", {}).get("backend-path", [])),
    ]
    entries = {p.resolve() for p in entry_files(project)}
    todo, seen = list(entries), set[Path]()
    while todo:
        path = todo.pop().resolve()
        if path in seen or not path.is_relative_to(root.resolve()):
            continue
        seen.add(path)
        scan = pyscan.scan_file(path, "")
        followed = scan.imports + (scan.nested_imports if path in entries else [])
        for module, level in followed:
            todo += _resolve_module(module, level, path, roots)
        for spelled in scan.paths:
            for base in (project, root):
                candidate = base / spelled
                if candidate.suffix == ".py" and candidate.is_file():
                    todo.append(candidate)
    return sorted(seen)


def cmake_files(project: Path) -> list[Path]:
    out = [project / "CMakeLists.txt"] if (project / "CMakeLists.txt").is_file() else []
    if (project / "cmake").is_dir():
        out += sorted((project / "cmake").rglob("*.cmake"))
    return out


def scan_build(project: Path, root: Path) -> BuildScan:
    files = closure(project, root)
    entries = {p.resolve() for p in entry_files(project)}
    reads: dict[str, dict[str, set[str]]] = {}
    tools: list[ToolUse] = []
    gencode: list[tuple[str, str]] = []
    threads: tuple[int, str] | None = None
    units: list[tuple[int, str]] = []
    divides = ""
    for path in files:
        r = rel(path, root)
        scan = pyscan.scan_file(path, r)
        for hit in scan.env:
            _add_read(reads, hit.name, f"{r}:{hit.line}", hit.default, hit.compared)
        tools += [ToolUse(name=n, at=f"{r}:{line}", detail=d) for n, line, d in scan.tools]
        if path in entries and any(n == "torch.utils.cpp_extension" for n, _, _ in scan.tools):
            # a torch cpp_extension build whose own flags name archs: TORCH_CUDA_ARCH_LIST is then ignored
            gencode += [(g, f"{r}:{line}") for g, line in scan.gencode]
            if scan.threads:
                threads = (scan.threads[0], f"{r}:{scan.threads[1]}")
            units += [(count, f"{r}:{line}") for count, line in scan.units]
        if path in entries and scan.divides and not divides:
            divides = f"{r}:{scan.divides}"
    fetches: list[Fetch] = []
    policy = ""  # the top-level CMakeLists' cmake_minimum_required: in force in the files it includes
    for path in cmake_files(project):
        r = rel(path, root)
        cm = cmake.scan_cmake(path, r, policy_version=policy)
        if path == project / "CMakeLists.txt":
            policy = cm.policy_version
        for name, line in cm.env:
            _add_read(reads, name, f"{r}:{line}", None, ())
        if cm.finds_torch:
            tools.append(ToolUse(name="cmake:find_package(Torch)", at=f"{r}:{cm.finds_torch}"))
        fetches += [_fetch(f, r) for f in cm.fetches]
    return BuildScan(
        env=tuple(_env_records(reads)),
        tools=tuple(sorted(set(tools), key=lambda t: (t.name, t.at))),
        arch=_arch(gencode, threads, units, divides),
        fetches=tuple(fetches),
        files=tuple(rel(p, root) for p in files),
    )


def _add_read(
    reads: dict[str, dict[str, set[str]]], name: str, at: str, default: str | None, compared: tuple[str, ...]
) -> None:
    entry = reads.setdefault(name, {"at": set(), "defaults": set(), "compared": set()})
    entry["at"].add(at)
    if default is not None:
        entry["defaults"].add(default)
    entry["compared"].update(compared)


def _at_key(at: str) -> tuple[str, int]:
    path, _, line = at.rpartition(":")
    return (path, int(line) if line.isdigit() else 0)


def _env_records(reads: dict[str, dict[str, set[str]]]) -> list[EnvRead]:
    return [
        EnvRead(
            name=name,
            at=tuple(sorted(v["at"], key=_at_key)),
            defaults=tuple(sorted(v["defaults"])),
            compared=tuple(sorted(v["compared"])),
        )
        for name, v in sorted(reads.items())
    ]


def _arch(
    gencode: list[tuple[str, str]], threads: tuple[int, str] | None, units: list[tuple[int, str]], divides: str
) -> ArchFlags:
    seen: dict[str, str] = {}
    for flag, at in gencode:
        seen.setdefault(flag, at)
    ats = sorted(set(seen.values()), key=_at_key)
    return ArchFlags(
        gencode=tuple(seen),
        gencode_at=tuple(ats),
        nvcc_threads=threads[0] if threads else 0,
        nvcc_threads_at=threads[1] if threads else "",
        compile_units=sum(count for count, _ in units),
        compile_units_at=tuple(sorted((at for _, at in units), key=_at_key)),
        jobs_divided_at=divides,
    )


def _fetch(hit: cmake.FetchHit, r: str) -> Fetch:
    return Fetch(
        name=hit.name,
        repo=hit.repo,
        ref=hit.ref,
        env=hit.env,
        at=f"{r}:{hit.line}",
        subdir=hit.subdir,
        submodules=hit.submodules,
        command=hit.command,
        submodule_mode=hit.submodule_mode,
        submodules_recurse=hit.submodules_recurse,
        cmake_override=hit.cmake_override,
        env_branches=tuple(f"{r}:{line}" for line in hit.env_branches),
    )


# ---- bundled components and artifact pins ---------------------------------------------------------

HEADERS = {
    "cutlass": ("include/cutlass/version.h", ("CUTLASS_MAJOR", "CUTLASS_MINOR", "CUTLASS_PATCH")),
    "spdlog": ("include/spdlog/version.h", ("SPDLOG_VER_MAJOR", "SPDLOG_VER_MINOR", "SPDLOG_VER_PATCH")),
}
CCCL_HEADER = "libcudacxx/include/cuda/std/__cccl/version.h"


def _define(text: str, name: str) -> int | None:
    m = re.search(rf"^\s*#\s*define\s+{name}\s+([0-9]+)\b", text, re.MULTILINE)
    return int(m.group(1)) if m else None


def components(tree: Path, prefix: str) -> list[Component]:
    """Versions of CUTLASS, CCCL and spdlog found in ``tree`` (a checkout or a populated submodule)."""
    out: list[Component] = []
    for name, (header, macros) in HEADERS.items():
        path = tree / header
        if path.is_file():
            parts = [_define(read_regular(path).decode("utf-8", "replace"), m) for m in macros]
            if None not in parts:
                out.append(Component(name=name, version=".".join(map(str, parts)), at=f"{prefix}{header}"))
    path = tree / CCCL_HEADER
    if path.is_file():
        value = _define(read_regular(path).decode("utf-8", "replace"), "CCCL_VERSION")
        if value is not None:
            version = f"{value // 1000000}.{value // 1000 % 1000}.{value % 1000}"
            out.append(Component(name="cccl", version=version, at=f"{prefix}{CCCL_HEADER}"))
    return out


def artifact_manifests(files: Iterable[Path], root: Path) -> list[ArtifactManifest]:
    """Artifact directories pinned by the sha256 of their ``checksums.txt``: a class ``ArtifactPath``
    (directory per name) beside a class ``CheckSumHash`` (hash per name, or ``NAME_CHECKSUMS``
    {cpu_arch: {sm_arch: hash}} for per-arch subdirectories) -- FlashInfer's cubin pins."""
    out: list[ArtifactManifest] = []
    for path in files:
        tree = pyscan.parse(path)
        if tree is None:
            continue
        dirs, hashes = _class_values(tree, "ArtifactPath"), _class_values(tree, "CheckSumHash")
        at = rel(path, root)
        for name, (value, line) in dirs.items():
            sha = hashes.get(name, (None, 0))[0]
            if isinstance(value, str) and isinstance(sha, str):
                out.append(ArtifactManifest(name=name, dir=value, checksums_sha256=sha, at=f"{at}:{line}"))
            nested = hashes.get(f"{name}_CHECKSUMS", (None, 0))[0]
            if isinstance(value, str) and isinstance(nested, dict):
                out += _nested(name, value, nested, f"{at}:{hashes[name + '_CHECKSUMS'][1]}")
    return [a for a in out if SHA256_RE.match(a.checksums_sha256)]


def _nested(name: str, base: str, table: dict[str, object], at: str) -> list[ArtifactManifest]:
    out = []
    for cpu, per_sm in sorted(table.items()):
        if isinstance(per_sm, dict):
            for sm, sha in sorted(per_sm.items()):
                out.append(
                    ArtifactManifest(
                        name=f"{name}/{cpu}/{sm}", dir=f"{base}{cpu}/{sm}/", checksums_sha256=str(sha), at=at
                    )
                )
    return out


def _class_values(tree: object, class_name: str) -> dict[str, tuple[object, int]]:
    import ast

    from megacpp_env.facts.project import literal

    out: dict[str, tuple[object, int]] = {}
    for node in ast.walk(tree):  # type: ignore[arg-type]
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for stmt in node.body:
                target = (
                    stmt.target
                    if isinstance(stmt, ast.AnnAssign)
                    else (stmt.targets[0] if isinstance(stmt, ast.Assign) else None)
                )
                value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
                if isinstance(target, ast.Name) and value is not None:
                    found = literal(value, {})
                    if found is not None:
                        out[target.id] = (found, stmt.lineno)
    return out
