"""The layering of docs/DESIGN.md, enforced on the import graph of the package.

The contract is read from the ```layers``` and ```forbidden``` blocks of docs/DESIGN.md; the graph
comes from the AST of every module (module bodies, function bodies and ``TYPE_CHECKING`` blocks).
The mutation tests feed the checker synthesised module sources and show it flags each kind of
violation: a sideways import (snapshot -> lock), an upward one, one hidden in a function or under
``TYPE_CHECKING``, a relative one, and a transitive load of a forbidden module.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

PACKAGE = "megacpp_env"
DESIGN = REPO_ROOT / "docs" / "DESIGN.md"


# ---- the contract --------------------------------------------------------------------------------


def _block(text: str, name: str) -> list[str]:
    m = re.search(rf"^```{name}\n(.*?)^```", text, re.M | re.S)
    assert m, f"docs/DESIGN.md has no ```{name} block"
    return [line.strip() for line in m[1].splitlines() if line.strip()]


def layers(text: str) -> dict[str, int]:
    """Component -> level (0 is the top); siblings on one line share a level."""
    out: dict[str, int] = {}
    for level, line in enumerate(_block(text, "layers")):
        for name in (n.strip() for n in line.split("|")):
            assert name not in out, f"{name} is listed twice"
            out[name] = level
    return out


def forbidden(text: str) -> list[tuple[str, tuple[str, ...]]]:
    out = []
    for line in _block(text, "forbidden"):
        source, _, targets = line.partition("->")
        out.append((source.strip(), tuple(t.strip() for t in targets.split(","))))
    return out


# ---- the import graph ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    type_only: bool


def package_sources(root: Path = REPO_ROOT / PACKAGE) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path.read_text(encoding="utf-8")
    return out


def _is_package(name: str, modules: frozenset[str]) -> bool:
    return any(m.startswith(name + ".") for m in modules)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


@dataclass(frozen=True)
class _Import:
    line: int
    type_only: bool
    names: tuple[str, ...]
    module: str | None = None  # set for ``from X import names``
    level: int = 0


@functools.cache
def _imports(text: str) -> tuple[_Import, ...]:
    tree = ast.parse(text)
    typed = _type_checking_lines(tree)
    out = []
    for node in ast.walk(tree):
        names = tuple(a.name for a in getattr(node, "names", ()))
        if isinstance(node, ast.Import):
            out.append(_Import(line=node.lineno, type_only=node.lineno in typed, names=names))
        elif isinstance(node, ast.ImportFrom):
            out.append(_Import(node.lineno, node.lineno in typed, names, node.module or "", node.level))
    return tuple(out)


def _targets(imp: _Import, module: str, modules: frozenset[str]) -> list[str]:
    if imp.module is None:
        return list(imp.names)
    base = imp.module
    if imp.level:
        pkg = module if _is_package(module, modules) else module.rpartition(".")[0]
        for _ in range(imp.level - 1):
            pkg = pkg.rpartition(".")[0]
        base = f"{pkg}.{base}" if base else pkg
    subs = [f"{base}.{name}" for name in imp.names if f"{base}.{name}" in modules]
    return subs or [base]


def edges(sources: dict[str, str]) -> list[Edge]:
    modules = frozenset(sources)
    return [
        Edge(module, target, imp.line, imp.type_only)
        for module, text in sources.items()
        for imp in _imports(text)
        for target in _targets(imp, module, modules)
    ]


def component(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_violations(sources: dict[str, str], levels: dict[str, int]) -> list[str]:
    out = []
    for e in edges(sources):
        if not e.target.startswith(PACKAGE + ".") and e.target != PACKAGE:
            continue
        src, dst = component(e.source), component(e.target)
        if src == dst:
            continue
        if levels[dst] > levels[src]:
            continue
        how = "sideways to a sibling" if levels[dst] == levels[src] else "up"
        out.append(f"{e.source}:{e.line} imports {e.target} ({src} -> {dst}: {how})")
    return out


def unplaced(sources: dict[str, str], levels: dict[str, int]) -> list[str]:
    return sorted(m for m in sources if component(m) not in levels)


def _loaded_with(module: str) -> list[str]:
    """Importing a.b.c runs a/__init__ and a/b/__init__ first."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def forbidden_paths(sources: dict[str, str], source: str, banned: tuple[str, ...]) -> list[str]:
    """Each banned module ``source`` loads at run time, with the chain of imports that loads it."""
    graph: dict[str, set[str]] = {}
    for e in edges(sources):
        if not e.type_only:
            graph.setdefault(e.source, set()).add(e.target)
    for m in list(sources):
        graph.setdefault(m, set()).update(p for p in _loaded_with(m) if p in sources)
    seen, queue, found = {source: [source]}, deque([source]), []
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph.get(node, ())):
            for hit in (b for b in banned if nxt == b or nxt.startswith(b + ".")):
                found.append(f"{source} loads {hit}: {' -> '.join([*seen[node], nxt])}")
            if nxt in sources and nxt not in seen:
                seen[nxt] = [*seen[node], nxt]
                queue.append(nxt)
    return sorted(set(found))


def all_forbidden(sources: dict[str, str], rules: list[tuple[str, tuple[str, ...]]]) -> list[str]:
    return [v for source, banned in rules for v in forbidden_paths(sources, source, banned)]


# ---- the package as it is ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def contract() -> tuple[dict[str, int], list[tuple[str, tuple[str, ...]]]]:
    text = DESIGN.read_text(encoding="utf-8")
    return layers(text), forbidden(text)


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    return package_sources()


def test_every_module_has_a_layer(sources, contract) -> None:
    assert unplaced(sources, contract[0]) == []


def test_the_package_keeps_its_layers(sources, contract) -> None:
    assert layer_violations(sources, contract[0]) == []


def test_no_module_loads_what_it_must_not(sources, contract) -> None:
    assert all_forbidden(sources, contract[1]) == []


def test_offline_and_light_modules_really_do_not_load_them() -> None:
    """The same, observed in a fresh interpreter rather than read from the AST."""
    code = (
        "import sys, megacpp_env.layout, megacpp_env.runtime, megacpp_env.lock.state; "
        "print(sorted(m for m in ('megacpp_env.uv', 'megacpp_env.lock.resolve') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    assert proc.stdout.strip() == "[]"
    code = "import sys, megacpp_env.layout; print(sorted(m for m in ('yaml', 'packaging') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    assert proc.stdout.strip() == "[]"


# ---- the checker catches violations (mutation) ---------------------------------------------------


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        (
            "megacpp_env.snapshot.evil",
            "from megacpp_env.lock import pylock\n",
            "megacpp_env.snapshot.evil:1 imports megacpp_env.lock.pylock (snapshot -> lock: sideways to a sibling)",
        ),
        (
            "megacpp_env.snapshot.evil",
            "def f():\n    from megacpp_env.checkout import inspect_checkout\n",
            "megacpp_env.snapshot.evil:2 imports megacpp_env.checkout (snapshot -> checkout: sideways to a sibling)",
        ),
        (
            "megacpp_env.snapshot.evil",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from megacpp_env.overlay import apply_overlay\n",
            "megacpp_env.snapshot.evil:3 imports megacpp_env.overlay (snapshot -> overlay: sideways to a sibling)",
        ),
        (
            "megacpp_env.spec.evil",
            "from ..lock import state\n",
            "megacpp_env.spec.evil:1 imports megacpp_env.lock.state (spec -> lock: up)",
        ),
        (
            "megacpp_env.layout",
            "import megacpp_env.commands.lock\n",
            "megacpp_env.layout:1 imports megacpp_env.commands.lock (layout -> commands: up)",
        ),
    ],
)
def test_checker_flags_a_layer_violation(sources, contract, module, source, expected) -> None:
    mutated = {**sources, module: source}
    assert layer_violations(mutated, contract[0]) == [expected]


def test_checker_flags_a_module_outside_every_layer(sources, contract) -> None:
    assert unplaced({**sources, "megacpp_env.newthing": ""}, contract[0]) == ["megacpp_env.newthing"]


def test_checker_flags_a_forbidden_load_through_a_chain(sources, contract) -> None:
    """lock.state importing a harmless-looking module that imports lock.resolve (which runs uv)."""
    mutated = {
        **sources,
        "megacpp_env.lock.helper": "from megacpp_env.lock.resolve import resolve\n",
        "megacpp_env.lock.state": sources["megacpp_env.lock.state"] + "\ndef later():\n    from . import helper\n",
    }
    found = all_forbidden(mutated, contract[1])
    assert (
        "megacpp_env.lock.state loads megacpp_env.lock.resolve: "
        "megacpp_env.lock.state -> megacpp_env.lock.helper -> megacpp_env.lock.resolve"
    ) in found
    assert any(v.startswith("megacpp_env.lock.state loads megacpp_env.uv: ") for v in found)
    light = {**sources, "megacpp_env.layout": "import yaml\n"}
    assert all_forbidden(light, contract[1]) == [
        "megacpp_env.layout loads yaml: megacpp_env.layout -> yaml",
        "megacpp_env.srcbuild.__main__ loads yaml: megacpp_env.srcbuild.__main__ -> megacpp_env.srcbuild.build"
        " -> megacpp_env.checkout -> megacpp_env.layout -> yaml",
    ]


def test_checker_ignores_type_only_imports_for_loading(sources, contract) -> None:
    text = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import yaml\n"
    assert all_forbidden({**sources, "megacpp_env.layout": text}, contract[1]) == []
