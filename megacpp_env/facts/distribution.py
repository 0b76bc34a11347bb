"""The distribution a source builds, read statically: name, version, requirements, build
requirements and import names, each with the file (and line) it came from.

Precedence is setuptools' own: a static ``[project]`` field wins over ``setup()`` arguments (setuptools
warns "install_requires overwritten in pyproject.toml"); a field listed in ``dynamic`` comes from
``[tool.setuptools.dynamic]`` or from ``setup()``; a value ``setup()`` computes at run time is taken
from the sdist's ``PKG-INFO`` or from a requirements file named on the command line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megacpp_env.facts import project as P
from megacpp_env.facts import pyscan
from megacpp_env.facts.model import Distribution
from megacpp_env.fsutil import read_regular_text

SKIP_PACKAGES = {"tests", "test", "docs", "benchmarks", "examples", "build", "dist", "csrc", "include", "scripts"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Inputs:
    root: Path  # the source tree
    project: Path  # the directory holding pyproject.toml / setup.py
    requirements_files: tuple[str, ...] = ()  # given on the command line, relative to the project
    build_requirements_files: tuple[str, ...] = ()
    pkg_info: dict[str, Any] | None = None  # parsed PKG-INFO of an sdist


class _Setup:
    """setup.py's AST with its literal arguments, when the project has one."""

    def __init__(self, project: Path, root: Path) -> None:
        self.path = project / "setup.py"
        self.rel = P.rel(self.path, root) if self.path.is_file() else "setup.py"
        self.tree = pyscan.parse(self.path) if self.path.is_file() else None
        self.call = P.setup_call(self.tree) if self.tree is not None else None
        self.consts = P.module_literals(self.tree) if self.tree is not None else {}

    def kw(self, name: str) -> P.Read:
        node = P.setup_kw(self.call, name) if self.call is not None else None
        if node is None:
            return P.NONE
        return P.Read(value=P.literal(node, self.consts), where=f"{self.rel}:{node.lineno}")

    def kw_node(self, name: str) -> ast.expr | None:
        return P.setup_kw(self.call, name) if self.call is not None else None


def read_distribution(inp: Inputs, subdir: str) -> Distribution:
    pyproject = P.load_pyproject(inp.project, inp.root)
    proj = pyproject.get("project", {})
    dynamic = set(proj.get("dynamic", [])) if proj else set()
    setup = _Setup(inp.project, inp.root)
    pp = P.rel(inp.project / "pyproject.toml", inp.root)
    name = _name(proj, setup, pp)
    version = _version(inp, proj, dynamic, pyproject, setup, pp)
    requires = _requires(inp, proj, dynamic, pyproject, setup, pp)
    extras = _extras(inp, proj, dynamic, pyproject, setup)
    build = _build_requires(inp, pyproject, pp)
    imports = _imports(inp, pyproject, setup, pp)
    python = proj.get("requires-python") or setup.kw("python_requires").value or ""
    return Distribution(
        path=subdir or ".",
        name=str(name.value or ""),
        version=str(version.value or ""),
        version_from=version.where,
        requires_python=str(python),
        requires=tuple(requires.value or ()),
        requires_from=requires.where,
        extras=extras,
        build_requires=tuple(build.value),
        build_requires_from=build.where,
        build_backend=str(pyproject.get("build-system", {}).get("build-backend", "")),
        imports=tuple(imports.value),
        imports_from=imports.where,
    )


def _name(proj: dict[str, Any], setup: _Setup, pp: str) -> P.Read:
    if proj.get("name"):
        return P.Read(value=proj["name"], where=f"{pp} [project].name")
    return setup.kw("name")


def _version(
    inp: Inputs, proj: dict[str, Any], dynamic: set[str], pyproject: dict[str, Any], setup: _Setup, pp: str
) -> P.Read:
    if proj.get("version") and "version" not in dynamic:
        return P.Read(value=proj["version"], where=f"{pp} [project].version")
    spec = pyproject.get("tool", {}).get("setuptools", {}).get("dynamic", {}).get("version")
    if isinstance(spec, dict) and "attr" in spec:
        found = _attr_version(inp, spec["attr"])
        if found.value:
            return found
    if isinstance(spec, dict) and "file" in spec:
        files = spec["file"] if isinstance(spec["file"], list) else [spec["file"]]
        path = inp.project / str(files[0])
        return P.Read(
            value=read_regular_text(path, limit=P.MAX_READ, root=inp.root).strip(), where=P.rel(path, inp.root)
        )
    found = _setup_version(inp, setup)
    if found.value:
        return found
    if inp.pkg_info and inp.pkg_info.get("version"):
        return P.Read(value=inp.pkg_info["version"], where="PKG-INFO Version")
    return _version_txt(inp)


def _attr_version(inp: Inputs, attr: str) -> P.Read:
    module, _, name = attr.rpartition(".")
    for base in (inp.project, inp.root):
        for path in (
            base.joinpath(*module.split(".")).with_suffix(".py"),
            base.joinpath(*module.split("."), "__init__.py"),
        ):
            if path.is_file():
                found = P.version_in_file(path, inp.root, name)
                if found.value:
                    return P.Read(value=found.value, where=f"{found.where} (attr {attr})")
    found = _version_txt(inp)
    if found.value:
        return P.Read(value=found.value, where=f"{found.where} (attr {attr} is generated at build time from it)")
    return P.NONE


def _version_txt(inp: Inputs) -> P.Read:
    for base in (inp.project, inp.root):
        path = base / "version.txt"
        if path.is_file():
            return P.Read(
                value=read_regular_text(path, limit=P.MAX_READ, root=inp.root).strip(), where=P.rel(path, inp.root)
            )
    return P.NONE


def _setup_version(inp: Inputs, setup: _Setup) -> P.Read:
    node = setup.kw_node("version")
    if node is None or setup.tree is None:
        return P.NONE
    value = P.literal(node, setup.consts)
    if isinstance(value, str):
        return P.Read(value=value, where=f"{setup.rel}:{node.lineno}")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        path = P.function_reads_file(setup.tree, node.func.id, inp.project)
        if path is not None:
            found = P.version_in_file(path, inp.root)
            if found.value:
                return P.Read(
                    value=found.value, where=f"{found.where} (via {setup.rel}:{node.lineno} {node.func.id}())"
                )
    return P.NONE


def _requires(
    inp: Inputs, proj: dict[str, Any], dynamic: set[str], pyproject: dict[str, Any], setup: _Setup, pp: str
) -> P.Read:
    if inp.requirements_files:
        return _from_files(inp, inp.requirements_files, "given with --requirements")
    if proj and "dependencies" not in dynamic and "dependencies" in proj:
        return P.Read(value=list(proj["dependencies"]), where=f"{pp} [project].dependencies")
    spec = pyproject.get("tool", {}).get("setuptools", {}).get("dynamic", {}).get("dependencies")
    if isinstance(spec, dict) and "file" in spec:
        files = spec["file"] if isinstance(spec["file"], list) else [spec["file"]]
        return _from_files(inp, tuple(files), f"{pp} [tool.setuptools.dynamic].dependencies")
    return _setup_requires(inp, setup)


def _setup_requires(inp: Inputs, setup: _Setup) -> P.Read:
    """setup()'s literal install_requires; when it is computed, the sdist's PKG-INFO (or nothing, said so)."""
    found = setup.kw("install_requires")
    if isinstance(found.value, (list, tuple)):
        return P.Read(value=list(found.value), where=f"{found.where} install_requires")
    if inp.pkg_info is not None:
        note = f"; {found.where} install_requires is computed" if found.where else ""
        return P.Read(value=inp.pkg_info["requires"], where=f"PKG-INFO Requires-Dist (sdist metadata{note})")
    if found.where:
        return P.Read(value=[], where=f"{found.where}: install_requires is computed; pass --requirements FILE")
    return P.Read(value=[], where="none declared")


def _from_files(inp: Inputs, files: tuple[str, ...], why: str) -> P.Read:
    out: list[str] = []
    for name in files:
        out += P.read_requirements_file(inp.project / name, inp.root)
    shown = ", ".join(P.rel(inp.project / f, inp.root) for f in files)
    return P.Read(value=out, where=f"{shown} ({why}; -r followed)")


def _extras(
    inp: Inputs, proj: dict[str, Any], dynamic: set[str], pyproject: dict[str, Any], setup: _Setup
) -> dict[str, tuple[str, ...]]:
    if proj and "optional-dependencies" in proj and "optional-dependencies" not in dynamic:
        return {k: tuple(v) for k, v in sorted(proj["optional-dependencies"].items())}
    found = setup.kw("extras_require")
    if isinstance(found.value, dict):
        return {k: tuple(v) for k, v in sorted(found.value.items())}
    if inp.pkg_info is not None:
        return {k: tuple(v) for k, v in sorted(inp.pkg_info["extras"].items())}
    return {}


def _build_requires(inp: Inputs, pyproject: dict[str, Any], pp: str) -> P.Read:
    system = pyproject.get("build-system")
    if system and "requires" in system:
        reqs, where = list(system["requires"]), [f"{pp} [build-system].requires"]
    else:
        reqs, where = ["setuptools>=40.8.0"], ["no [build-system]: PEP 517's setuptools default"]
    if inp.build_requirements_files:
        extra = _from_files(inp, inp.build_requirements_files, "given with --build-requirements")
        reqs += [r for r in extra.value if r not in reqs]
        where.append(extra.where)
    return P.Read(value=reqs, where="; ".join(where))


def _imports(inp: Inputs, pyproject: dict[str, Any], setup: _Setup, pp: str) -> P.Read:
    tool = pyproject.get("tool", {}).get("setuptools", {})
    names: list[str] = list(tool.get("py-modules", []))
    where: list[str] = []
    if isinstance(tool.get("packages"), list):
        names += [p for p in tool["packages"] if "." not in p]
        where.append(f"{pp} [tool.setuptools].packages")
    elif isinstance(tool.get("packages"), dict) and "find" in tool["packages"]:
        names += _find_include(inp.project, tool["packages"]["find"])
        where.append(f"{pp} [tool.setuptools.packages.find]")
    else:
        names += _setup_packages(inp.project, setup)
        where.append(f"{setup.rel} packages=" if setup.call is not None else "top-level packages")
    ext = _extension_names(setup)
    if ext:
        where.append(f"{setup.rel} ext_modules")
    if tool.get("py-modules"):
        where.append(f"{pp} py-modules")
    return P.Read(value=sorted(set(names + ext)), where="; ".join(where))


def _find_include(project: Path, find: dict[str, Any]) -> list[str]:
    include = find.get("include")
    if include:
        out = []
        for pattern in include:
            base = pattern.removesuffix(".*").removesuffix("*")
            if base and not any(ch in base for ch in "*?["):
                out.append(base)
        return sorted({n for n in out if not any(n != o and n.startswith(o + ".") for o in out)})
    return _top_level_packages(project, ())


def _setup_packages(project: Path, setup: _Setup) -> list[str]:
    node = setup.kw_node("packages")
    value = P.literal(node, setup.consts) if node is not None else None
    if isinstance(value, (list, tuple)):
        return sorted({str(p).split(".")[0] for p in value})
    excludes: tuple[str, ...] = ()
    if isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg == "exclude":
                found = P.literal(kw.value, setup.consts)
                excludes = tuple(found) if isinstance(found, (list, tuple)) else ()
    return _top_level_packages(project, excludes)


def _top_level_packages(project: Path, excludes: tuple[str, ...]) -> list[str]:
    out = []
    for child in sorted(project.iterdir()):
        if (child / "__init__.py").is_file() and child.name not in excludes and child.name not in SKIP_PACKAGES:
            out.append(child.name)
    return out


def _extension_names(setup: _Setup) -> list[str]:
    if setup.tree is None:
        return []
    out = []
    for node in ast.walk(setup.tree):
        if isinstance(node, ast.Call) and pyscan._dotted(node.func).rpartition(".")[2] in (
            "Extension",
            "CUDAExtension",
            "CppExtension",
        ):
            arg = P.setup_kw(node, "name") or (node.args[0] if node.args else None)
            value = P.literal(arg, setup.consts)
            if isinstance(value, str):
                out.append(value.split(".")[0])
    return out
