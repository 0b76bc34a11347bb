"""No import circle inside ``megacpp_env.snapshot``: every import counts, at module level, in a
function body or under ``TYPE_CHECKING`` (issue 21: context <-> envvars <-> python_env was one;
``Scrubber`` and ``Probe`` now live in modules of their own, ``scrub`` and ``probe``)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "megacpp_env.snapshot"
DIR = Path(__file__).resolve().parent.parent / "megacpp_env" / "snapshot"


def _graph() -> dict[str, set[str]]:
    modules = {p.stem for p in DIR.glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name in modules:
        for node in ast.walk(ast.parse((DIR / f"{name}.py").read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for target in targets:
                if target.startswith(f"{PACKAGE}.") and (mod := target.split(".")[2]) in modules and mod != name:
                    graph[name].add(mod)
    return graph


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_circle_in_the_snapshot_package():
    circle = _circle(_graph())
    assert circle is None, " -> ".join(circle or [])


def test_the_check_sees_a_circle_through_a_type_only_import():
    graph = _graph()
    graph["scrub"].add("context")  # context imports scrub (TYPE_CHECKING): the old shape of the circle
    assert _circle(graph) == ["context", "scrub", "context"]
