"""The import closure of a package inside megacpp_env: the exact files it needs to run.

Read from the source with ``ast`` (nothing is imported): every ``import megacpp_env...`` and
``from megacpp_env... import ...`` anywhere in a module (lazy imports inside functions included),
except under ``if TYPE_CHECKING:``, plus the ``__init__.py`` of every package on the way. ``render``
lists the closure of ``megacpp_env.srcbuild`` in each source stage's ``COPY``, so a change to any
other file of the tool rebuilds no source; ``build_source`` copies the same files into a private
directory to run sanity checks with the target's Python. Stdlib only.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

TOP = "megacpp_env"
# The source-build package, and the sanity runner it starts with the target's Python.
ENTRIES = (f"{TOP}.srcbuild", f"{TOP}.sanity")


def package_root() -> Path:
    """The directory that holds the ``megacpp_env`` package."""
    return Path(__file__).resolve().parents[2]


def closure(entries: tuple[str, ...] = ENTRIES, *, root: Path | None = None) -> tuple[str, ...]:
    """Sorted '/'-separated paths (relative to ``root``) of every module ``entries`` need; an entry
    that is a package includes all of its modules."""
    root = root or package_root()
    todo = [m for entry in entries for m in (_package_modules(root, entry) or [entry])]
    seen: set[str] = set()
    files: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _module_file(root, module)
        if path is None:
            continue
        files.add(path.relative_to(root).as_posix())
        todo.extend(_parents(module))  # importing a module runs its packages' __init__ first
        todo.extend(_imports(path, module))
    return tuple(sorted(files))


def copy_closure(dest: Path, files: tuple[str, ...] | None = None, *, root: Path | None = None) -> Path:
    """Copy the closure's files under ``dest`` (a directory to put on PYTHONPATH); returns ``dest``."""
    root = root or package_root()
    for rel in files or closure(root=root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, target)
    return dest


def _package_modules(root: Path, package: str) -> list[str]:
    directory = root.joinpath(*package.split("."))
    if not (directory / "__init__.py").is_file():
        return []
    return sorted(f"{package}.{p.stem}" if p.stem != "__init__" else package for p in directory.glob("*.py"))


def _module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


# The imports of a module's source, by everything they follow from (its name, whether it is a
# package's __init__, its bytes): ``render`` walks the same closure for every target and platform, and
# parsing was 95% of its time. The file is read every time; only the parse of the same bytes is skipped.
_PARSED: dict[tuple[str, bool, bytes], tuple[str, ...]] = {}


def _imports(path: Path, module: str) -> tuple[str, ...]:
    """The megacpp_env modules ``path`` imports at run time (``from X import y``: ``X.y`` when it is a
    module, else ``X``)."""
    key = (module, path.name == "__init__.py", path.read_bytes())
    if key not in _PARSED:
        _PARSED[key] = _parse_imports(key[2].decode("utf-8"), str(path), module, is_package=key[1])
    return _PARSED[key]


def _parse_imports(source: str, filename: str, module: str, *, is_package: bool) -> tuple[str, ...]:
    tree = ast.parse(source, filename)
    package = module if is_package else module.rpartition(".")[0]
    out: list[str] = []
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names if _ours(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            if _ours(base):
                out.append(base)
                out += [f"{base}.{alias.name}" for alias in node.names]
    return tuple(out)


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:`` (imports that never run)."""
    out: list[ast.AST] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def _ours(name: str) -> bool:
    return name == TOP or name.startswith(f"{TOP}.")
