"""Static reads of a Python project's metadata: ``pyproject.toml`` ([project], [build-system],
``[tool.setuptools.dynamic]``), ``setup.py`` (the literal arguments of ``setup()`` through its AST,
and the file its version function reads), requirements files (``-r`` followed) and ``PKG-INFO``.

Every value comes with a "from" note naming the file and line it was read at.
"""

from __future__ import annotations

import ast
import email.parser
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megacpp_env.errors import InputError
from megacpp_env.facts import pyscan
from megacpp_env.fsutil import read_regular_text

MAX_READ = 16 << 20  # the largest project file read
MAX_INCLUDE_DEPTH = 32


@dataclass(frozen=True, kw_only=True, slots=True)
class Read:
    """A value read from the project and where it came from (``file:line`` or a description)."""

    value: Any
    where: str


NONE = Read(value=None, where="")


def load_pyproject(project: Path, root: Path | None = None) -> dict[str, Any]:
    """``pyproject.toml`` of ``project`` ({} when absent); malformed, not UTF-8, not a regular file, or
    a symlink out of ``root``: one InputError naming it."""
    path = project / "pyproject.toml"
    if not path.exists() and not path.is_symlink():
        return {}
    text = read_regular_text(path, limit=MAX_READ, root=root or project)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML: {exc}", file=str(path)) from None
    except RecursionError:
        raise InputError("nested too deeply", file=str(path)) from None
    for key in ("project", "build-system", "tool"):
        if key in doc and not isinstance(doc[key], dict):
            raise InputError(f"[{key}] must be a table, got {type(doc[key]).__name__}", file=str(path))
    return doc


def read_requirements_file(path: Path, root: Path, seen: frozenset[Path] = frozenset()) -> list[str]:
    """Requirement lines of ``path`` in order, following ``-r``/``--requirement``; options and
    comments dropped. Relative ``-r`` paths are relative to the including file; one that leaves
    ``root`` (``-r ../../outside/x``, or a symlink out) is refused, as is a missing one, a FIFO or a
    file that is not UTF-8 (InputError naming the file and the including line)."""
    if path.resolve() in seen:
        return []
    if len(seen) > MAX_INCLUDE_DEPTH:
        raise InputError(f"-r includes nested deeper than {MAX_INCLUDE_DEPTH}", file=str(path))
    out: list[str] = []
    for raw in read_regular_text(path, limit=MAX_READ, root=root).splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        for flag in ("-r ", "--requirement ", "--requirement="):
            if line.startswith(flag):
                sub = path.parent / line[len(flag) :].strip()
                try:
                    out += read_requirements_file(sub, root, seen | {path.resolve()})
                except InputError as exc:
                    if exc.file != str(sub):
                        raise
                    raise InputError(f"{line!r}: {sub}: {exc.detail}", file=str(path)) from None
                break
        else:
            if not line.startswith("-"):
                out.append(line)
    return out


def rel(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        raise InputError(f"leaves the tree {root}; refusing to read it", file=str(path)) from None


# ---- setup.py ------------------------------------------------------------------------------------


def setup_call(tree: ast.Module) -> ast.Call | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and pyscan._dotted(node.func) in ("setup", "setuptools.setup"):
            return node
    return None


def setup_kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def literal(node: ast.expr | None, consts: dict[str, Any]) -> Any:
    """``ast.literal_eval`` with module-level names resolved; None when not a literal."""
    if node is None:
        return None
    if isinstance(node, ast.Name) and node.id in consts:
        return consts[node.id]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def module_literals(tree: ast.Module) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = literal(node.value, out)
            if value is not None:
                out[node.targets[0].id] = value
    return out


def static_value(tree: ast.Module, name: str) -> tuple[Any, int]:
    """The value of module-level ``name`` by static evaluation of the module's top-level assignments
    (constants, names, tuples, slices, ``+``, ``str.join(map(str, ...))``); (None, 0) if not static."""
    env: dict[str, Any] = {}
    line = 0
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if len(targets) != 1 or not isinstance(targets[0], ast.Name):
                continue
            value = _eval(node.value, env)
            if isinstance(node, ast.AugAssign):
                continue  # a conditional suffix (a VCS hash) is not part of the static version
            if value is not None:
                env[targets[0].id] = value
                if targets[0].id == name:
                    line = node.lineno
    return env.get(name), line


def _eval(node: ast.expr, env: dict[str, Any]) -> Any:
    try:
        return _eval_node(node, env)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError):
        return None


def _eval_node(node: ast.expr, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(_eval_node(e, env) for e in node.elts)
    return _eval_expr(node, env)


def _eval_expr(node: ast.expr, env: dict[str, Any]) -> Any:
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        s = node.slice
        bounds = [_eval_node(b, env) if b is not None else None for b in (s.lower, s.upper, s.step)]
        return _eval_node(node.value, env)[slice(*bounds)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _eval_node(node.left, env) + _eval_node(node.right, env)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
        sep = _eval_node(node.func.value, env)
        arg = node.args[0]
        if isinstance(arg, ast.Call) and pyscan._dotted(arg.func) == "map" and pyscan._dotted(arg.args[0]) == "str":
            return sep.join(str(x) for x in _eval_node(arg.args[1], env))
        return sep.join(_eval_node(arg, env))
    raise ValueError(ast.dump(node))


def version_in_file(path: Path, root: Path, name: str = "__version__") -> Read:
    tree = pyscan.parse(path)
    if tree is None:
        return NONE
    value, line = static_value(tree, name)
    return Read(value=str(value), where=f"{rel(path, root)}:{line}") if isinstance(value, str) and line else NONE


def function_reads_file(tree: ast.Module, func_name: str, project: Path) -> Path | None:
    """The project file a function opens, spelled as path parts (``Path(d) / PKG / "__init__.py"``)."""
    consts = pyscan.string_constants(tree)
    scanner = pyscan._Scanner("", consts, {})
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == func_name:
            for call in (n for n in ast.walk(node) if isinstance(n, ast.Call) and pyscan._dotted(n.func) == "open"):
                parts = [t for a in call.args[:1] for t in pyscan._path_texts(a, scanner)]
                candidate = project.joinpath(*parts) if parts else None
                if candidate is not None and candidate.is_file():
                    return candidate
    return None


# ---- PKG-INFO / METADATA -------------------------------------------------------------------------


def parse_metadata(text: str) -> dict[str, Any]:
    """Name, Version, Requires-Python, Requires-Dist (base requirements and per-extra) of a core metadata file."""
    from packaging.requirements import Requirement

    msg = email.parser.Parser().parsestr(text)
    base: list[str] = []
    extras: dict[str, list[str]] = {}
    for line in msg.get_all("Requires-Dist") or []:
        req = Requirement(line)
        extra = _extra_of(req)
        if extra is None:
            base.append(line.strip())
        else:
            extras.setdefault(extra, []).append(_without_extra(line.strip()))
    return {
        "name": msg.get("Name", ""),
        "version": msg.get("Version", ""),
        "requires_python": msg.get("Requires-Python", "") or "",
        "requires": base,
        "extras": extras,
    }


def _extra_of(req: Any) -> str | None:
    if req.marker is None:
        return None
    for atom in _marker_atoms(req.marker._markers):
        if str(atom[0]) == "extra":
            return str(atom[2])
    return None


def _marker_atoms(markers: Any) -> list[Any]:
    out: list[Any] = []
    for m in markers:
        if isinstance(m, list):
            out += _marker_atoms(m)
        elif isinstance(m, tuple):
            out.append(m)
    return out


def _without_extra(line: str) -> str:
    """``x>=1; extra == "dev"`` -> ``x>=1``; other marker clauses are kept."""
    head, _, marker = line.partition(";")
    clauses = [c.strip() for c in marker.split(" and ") if "extra ==" not in c.replace("  ", " ")]
    return head.strip() + (f"; {' and '.join(clauses)}" if clauses and any(clauses) else "")
