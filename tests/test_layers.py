"""The layering of docs/DESIGN.md, enforced on the import graph of the package.

The contract is read from the ```layers``` and ```forbidden``` blocks of docs/DESIGN.md; the graph
comes from the AST of every module (module bodies, function bodies and ``TYPE_CHECKING`` blocks).
Modules loaded through importlib are held to the layers too (literal names, package-prefixed
f-strings, a package's discovery of its own modules, and the loads declared in ``DYNAMIC_LOADS``,
such as snapshot/registry.py's collector table). No two modules may import each other, directly or
through others, inside one package and through importlib loads included (``PENDING_CIRCLES`` lists
the ones other work in flight removes). The mutation tests feed the checker synthesised module
sources and show it flags each kind of violation: a sideways import (snapshot -> lock), an upward
one, one hidden in a function or under ``TYPE_CHECKING``, a relative one, an upward importlib load
or registry entry, a transitive load of a forbidden module, an unreadable load, and an import
circle of each kind, through an importlib load too.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
from collections import deque
from collections.abc import Callable
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


# ---- modules loaded through importlib ------------------------------------------------------------
#
# ``importlib.import_module(name)`` (or ``__import__``) loads a module the import statements do not
# show. The checker reads the name where it can: a literal, or an f-string whose run-time part comes
# after a package prefix (``f"megacpp_env.commands.{verb}"``: every module under that prefix;
# ``__name__``/``__package__`` read as the loading module's own). A package that discovers its own
# modules (``pkgutil.iter_modules(__path__)``, as rules/ does) loads each module directly in it. A
# name it cannot read otherwise must be declared in ``DYNAMIC_LOADS``: what that module may load,
# read from the sources, so the layers and the forbidden loads are checked on it too.

_LOADERS = frozenset({"import_module", "__import__"})


def _loader_arg(node: ast.AST) -> ast.expr | None:
    if not isinstance(node, ast.Call) or not node.args:
        return None
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return node.args[0] if name in _LOADERS else None


def _static_name(arg: ast.expr, module: str, package: str) -> tuple[str, bool]:
    """The loaded name's text up to its first run-time part, and whether that was all of it."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value, True
    if not isinstance(arg, ast.JoinedStr):
        return "", False
    text = ""
    for part in arg.values:
        if isinstance(part, ast.Constant):
            text += str(part.value)
        elif (
            isinstance(part, ast.FormattedValue)
            and isinstance(part.value, ast.Name)
            and part.value.id
            in (
                "__name__",
                "__package__",
            )
        ):
            text += module if part.value.id == "__name__" else package
        else:
            return text, False
    return text, True


def registry_modules(text: str) -> list[str]:
    """The collector modules ``snapshot/registry.py`` names (``Collector(module=...)``), resolved as
    ``Collector.start`` resolves them: a bare name is ``megacpp_env.snapshot.collectors.<name>``."""
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Collector":
            for kw in node.keywords:
                if kw.arg == "module" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                    name = kw.value.value
                    out.append(name if "." in name else f"{PACKAGE}.snapshot.collectors.{name}")
    return out


def package_names_in(text: str) -> list[str]:
    """Every string constant in ``text`` that names a module of the package (a lazy-name table)."""
    return sorted({n.value for n in ast.walk(ast.parse(text))
                   if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith(PACKAGE + ".")})  # fmt: skip


# module -> what its unreadable importlib loads may load, from the sources
DYNAMIC_LOADS: dict[str, Callable[[dict[str, str]], list[str]]] = {
    f"{PACKAGE}.snapshot.registry": lambda sources: registry_modules(sources[f"{PACKAGE}.snapshot.registry"]),
    # PEP 562 lazy names: the modules named in ``_HOME`` and its default, all string constants there
    f"{PACKAGE}.spec": lambda sources: package_names_in(sources[f"{PACKAGE}.spec"]),
    # imports the modules a target's sanity checks name (torch, ...) in the environment under test
    f"{PACKAGE}.sanity": lambda sources: [],
}


@functools.cache
def _loads(text: str, module: str, package: str) -> tuple[tuple[int, str, bool], ...]:
    """(line, name or prefix, complete) for each importlib load in ``text``."""
    out = []
    for node in ast.walk(ast.parse(text)):
        arg = _loader_arg(node)
        if arg is not None:
            out.append((node.lineno, *_static_name(arg, module, package)))
    return tuple(out)


def dynamic_loads(sources: dict[str, str]) -> tuple[list[Edge], list[str]]:
    """The edges importlib loads add, and the loads the checker can neither read nor find declared."""
    modules = frozenset(sources)
    found, unknown = [], []
    for module, text in sources.items():
        package = module if _is_package(module, modules) else module.rpartition(".")[0]
        for line, name, complete in _loads(text, module, package):
            if complete:
                found.append(Edge(module, name, line, type_only=False))
            elif name.startswith(PACKAGE + ".") and name.endswith("."):
                found += [Edge(module, m, line, type_only=False) for m in sorted(modules) if m.startswith(name)]
            elif module in DYNAMIC_LOADS:
                found += [Edge(module, m, line, type_only=False) for m in DYNAMIC_LOADS[module](sources)]
            elif module == package and "iter_modules(__path__" in text:  # discovers its own modules
                found += [Edge(module, m, line, type_only=False) for m in sorted(modules) if _parent(m) == module]
            else:
                unknown.append(
                    f"{module}:{line} loads a module by a name read at run time: declare it in DYNAMIC_LOADS"
                )
    return found, unknown


def _parent(module: str) -> str:
    return module.rpartition(".")[0]


def all_edges(sources: dict[str, str]) -> list[Edge]:
    return edges(sources) + dynamic_loads(sources)[0]


# ---- circles -------------------------------------------------------------------------------------


def circles(sources: dict[str, str]) -> list[tuple[str, ...]]:
    """Each set of modules that import each other, directly or through others (a strongly connected
    component of more than one module): every import statement counts, in a function or under
    TYPE_CHECKING included, and so does every importlib load (a literal, a package-prefixed f-string,
    a package's discovery of its own modules, a ``DYNAMIC_LOADS`` entry). A registry that loads its
    plugins therefore keeps the types they import in a module of its own (``rules/base.py``), never in
    the registry module itself."""
    graph: dict[str, set[str]] = {m: set() for m in sources}
    for e in all_edges(sources):
        if e.target in graph and e.target != e.source:
            graph[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[tuple[str, ...]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]  # iterative Tarjan: no recursion limit to hit
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = stack[stack.index(node) :]
                    del stack[stack.index(node) :]
                    if len(comp) > 1:
                        out.append(tuple(sorted(comp)))
                continue
            if child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in stack:
                low[node] = min(low[node], index[child])
    return sorted(out)


# Circles that other work in flight removes. Each entry is a whole circle as ``circles`` reports it.
PENDING_CIRCLES: tuple[tuple[str, ...], ...] = ()


def circle_problems(found: list[tuple[str, ...]], pending: tuple[tuple[str, ...], ...]) -> list[str]:
    out = [
        f"import circle: {' <-> '.join(c)} (move what they share into a module of its own)"
        for c in found
        if c not in pending
    ]
    out += [
        f"PENDING_CIRCLES lists {' <-> '.join(c)}, which is gone: remove it there" for c in pending if c not in found
    ]
    return out


def component(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_violations(sources: dict[str, str], levels: dict[str, int]) -> list[str]:
    out = []
    for e in all_edges(sources):
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
    for e in all_edges(sources):
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


def test_no_import_circles(sources) -> None:
    assert circle_problems(circles(sources), PENDING_CIRCLES) == []


def test_every_importlib_load_is_read_or_declared(sources) -> None:
    assert dynamic_loads(sources)[1] == []
    loaded = {(e.source, e.target) for e in dynamic_loads(sources)[0]}
    assert ("megacpp_env.cli", "megacpp_env.commands.build") in loaded  # f"megacpp_env.commands.{module}"
    assert ("megacpp_env.snapshot.registry", "megacpp_env.snapshot.collectors.python_env") in loaded  # Collector(module=...)
    assert ("megacpp_env.rules", "megacpp_env.rules.gb10") in loaded  # pkgutil.iter_modules(__path__)


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
        "megacpp_env.srcbuild.__main__ loads yaml: megacpp_env.srcbuild.__main__ -> megacpp_env.srcbuild.plan"
        " -> megacpp_env.layout -> yaml",
    ]


def test_checker_ignores_type_only_imports_for_loading(sources, contract) -> None:
    text = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import yaml\n"
    assert all_forbidden({**sources, "megacpp_env.layout": text}, contract[1]) == []


# ---- circles and importlib loads (mutation) -------------------------------------------------------


@pytest.mark.parametrize(
    ("mutation", "circle"),
    [
        (  # inside one package, through a function-level import
            {"megacpp_env.runtime.evil": "def f():\n    from megacpp_env.runtime import hook\n",
             "megacpp_env.runtime.hook": "from megacpp_env.runtime import evil\n"},
            ("megacpp_env.runtime.evil", "megacpp_env.runtime.hook"),
        ),
        (  # type-only imports count
            {"megacpp_env.errors": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import megacpp_env.chars\n",
             "megacpp_env.chars": "import megacpp_env.errors\n"},
            ("megacpp_env.chars", "megacpp_env.errors"),
        ),
        (  # a relative import
            {"megacpp_env.runtime.catalog": "from . import pth\n"},
            ("megacpp_env.runtime.catalog", "megacpp_env.runtime.pth"),
        ),
    ],
)  # fmt: skip
def test_checker_flags_an_import_circle(sources, mutation, circle) -> None:
    assert circle not in circles(sources)
    found = circles({**sources, **mutation})
    assert circle in found
    assert f"import circle: {' <-> '.join(circle)} (move what they share into a module of its own)" in (
        circle_problems(found, PENDING_CIRCLES)
    )


def test_a_registry_loading_a_plugin_that_imports_it_is_a_circle(sources, contract) -> None:
    """A plugin importing the registry that loads it by importlib closes a circle, as a static import back
    would; with the shared types in a module of their own there is none. The load is held to the layers."""
    registry = "import importlib\ndef load():\n    return importlib.import_module('megacpp_env.runtime.plugin')\n"
    plugin = "from megacpp_env.runtime.registry import load\n"
    circle = ("megacpp_env.runtime.plugin", "megacpp_env.runtime.registry")
    mutated = {**sources, "megacpp_env.runtime.registry": registry, "megacpp_env.runtime.plugin": plugin}
    assert circle in circles(mutated)
    static = {**mutated, "megacpp_env.runtime.registry": "def load():\n    from megacpp_env.runtime import plugin\n"}
    assert circle in circles(static)
    split = {**mutated, "megacpp_env.runtime.plugin": "from megacpp_env.runtime.types import Plugin\n"}
    assert [c for c in circles(split) if "megacpp_env.runtime.plugin" in c] == []
    upward = registry.replace("megacpp_env.runtime.plugin", "megacpp_env.spec.loader")
    assert layer_violations({**mutated, "megacpp_env.runtime.registry": upward}, contract[0]) == [
        "megacpp_env.runtime.registry:3 imports megacpp_env.spec.loader (runtime -> spec: up)"
    ]


@pytest.mark.parametrize(
    ("module", "imports", "circle"),
    [
        (  # pkgutil discovery: rules/__init__ loads every rule module, so one importing it back is a circle
            "megacpp_env.rules.gb10",
            "from megacpp_env.rules import all_rules\n",
            ("megacpp_env.rules", "megacpp_env.rules.gb10"),
        ),
        (  # a DYNAMIC_LOADS registry entry: snapshot/registry.py loads the compilers collector
            "megacpp_env.snapshot.collectors.compilers",
            "def f():\n    from megacpp_env.snapshot import registry\n",
            ("megacpp_env.snapshot.collectors.compilers", "megacpp_env.snapshot.registry"),
        ),
        (  # a package-prefixed f-string: cli loads commands.<verb>
            "megacpp_env.commands.lock",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from megacpp_env import cli\n",
            ("megacpp_env.cli", "megacpp_env.commands.lock"),
        ),
    ],
)  # fmt: skip
def test_checker_flags_a_circle_through_an_importlib_load(sources, module, imports, circle) -> None:
    assert not [c for c in circles(sources) if set(circle) <= set(c)]
    mutated = {**sources, module: sources[module] + imports}
    assert [c for c in circles(mutated) if set(circle) <= set(c)] != []
    assert any(
        p.startswith("import circle: ") and circle[0] in p for p in circle_problems(circles(mutated), PENDING_CIRCLES)
    )


def test_checker_flags_a_pending_circle_that_is_gone(sources) -> None:
    gone = ("megacpp_env.a", "megacpp_env.b")
    assert circle_problems(circles(sources), (*PENDING_CIRCLES, gone)) == [
        "PENDING_CIRCLES lists megacpp_env.a <-> megacpp_env.b, which is gone: remove it there"
    ]


@pytest.mark.parametrize(
    ("module", "source", "expected"),
    [
        (
            "megacpp_env.snapshot.evil",
            "import importlib\ndef f():\n    return importlib.import_module('megacpp_env.commands.build')\n",
            "megacpp_env.snapshot.evil:3 imports megacpp_env.commands.build (snapshot -> commands: up)",
        ),
        (
            "megacpp_env.spec.evil",
            "def f(v):\n    return __import__(f'megacpp_env.lock.{v}')\n",
            "megacpp_env.spec.evil:2 imports megacpp_env.lock.pylock (spec -> lock: up)",
        ),
    ],
)
def test_checker_flags_an_importlib_load_against_the_layers(sources, contract, module, source, expected) -> None:
    assert expected in layer_violations({**sources, module: source}, contract[0])


def test_checker_flags_a_registry_entry_against_the_layers(sources, contract) -> None:
    """snapshot/registry.py accepts any dotted path: one naming a verb module is an upward load."""
    registry = sources["megacpp_env.snapshot.registry"]
    entry = 'module="system",'
    assert registry.count(entry) == 1
    mutated = registry.replace(entry, 'module="megacpp_env.commands.snapshot",')
    found = layer_violations({**sources, "megacpp_env.snapshot.registry": mutated}, contract[0])
    assert [v for v in found if "commands" in v] == [
        f"megacpp_env.snapshot.registry:{_line_of(registry, 'importlib.import_module(')} imports"
        " megacpp_env.commands.snapshot (snapshot -> commands: up)"
    ]


def test_checker_asks_to_declare_an_unreadable_load(sources) -> None:
    evil = "import importlib\ndef f(name):\n    return importlib.import_module(name)\n"
    assert dynamic_loads({**sources, "megacpp_env.spec.evil": evil})[1] == [
        "megacpp_env.spec.evil:3 loads a module by a name read at run time: declare it in DYNAMIC_LOADS"
    ]


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)
