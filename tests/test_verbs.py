"""Verb modules parse, call one domain function and print (docs/DESIGN.md, "Where a newcomer adds
a verb"). Checked on the source (AST) of every ``megacpp_env/commands/*.py`` but the ``_`` helpers:

- a verb module has at most ``MAX_LINES`` lines;
- its ``run`` makes exactly one *domain call*.

A domain call is a call whose callee is a name bound by an import from a ``megacpp_env`` module
(``from megacpp_env.facts import workflow`` then ``workflow.extract(...)``, or ``from
megacpp_env.render import render_all`` then ``render_all(...)``; imports inside functions count),
except imports from ``megacpp_env.commands._common`` (the shared parsing and spec loading) and
``megacpp_env.commands._snapshot`` (a snapshot from the parsed arguments),
``megacpp_env.ui`` (printing), ``megacpp_env.findings`` and ``megacpp_env.findings.formats`` (the finding
record and the formats verbs render it in: text, JSON, GitHub annotations, SARIF) and
``megacpp_env.errors``, and except classes: building a request
record or raising an error is parsing, not work. A method called on the spec as ``load`` returns
it (``load(args).target_view(name)``) is a domain call too; other method calls on values
(``spec.target(name)``, ``result.to_dict()``) are not. The calls of the module's own functions
that ``run`` calls (directly, through each other or in a lambda) count as calls of ``run``, so a
helper cannot hide a second.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

import megacpp_env.commands

COMMANDS = Path(megacpp_env.commands.__file__).resolve().parent
MAX_LINES = 120
NOT_DOMAIN = {
    "megacpp_env.commands._common", "megacpp_env.commands._snapshot", "megacpp_env.ui", "megacpp_env.errors",
    "megacpp_env.findings", "megacpp_env.findings.formats",  # the finding record and its formats: rendering
}  # fmt: skip
MODULES = sorted(p.stem for p in COMMANDS.glob("*.py") if not p.stem.startswith("_"))
# a group (``lock``) declares SUBCOMMANDS and no run: each sub-command is a verb module of its own
GROUPS = [m for m in MODULES if hasattr(importlib.import_module(f"megacpp_env.commands.{m}"), "SUBCOMMANDS")]
VERB_MODULES = [m for m in MODULES if m not in GROUPS]


def _domain_names(tree: ast.Module) -> dict[str, object]:
    """Every name an import from a megacpp_env domain module binds -> the object it names."""
    names: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "megacpp_env" or node.module in NOT_DOMAIN:
                continue
            module = importlib.import_module(node.module)
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full in NOT_DOMAIN:
                    continue
                value = getattr(module, alias.name, None)
                names[alias.asname or alias.name] = value if value is not None else importlib.import_module(full)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "megacpp_env" and alias.name not in NOT_DOMAIN and alias.asname:
                    names[alias.asname] = importlib.import_module(alias.name)
    return names


def _callee(func: ast.expr, names: dict[str, object]) -> str | None:
    """The dotted callee when it starts at a domain name and is not a class, else None."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call):
        loader = func.value.func
        if isinstance(loader, ast.Name) and loader.id in {"load", "load_optional"}:
            return f"{loader.id}().{func.attr}"
    parts: list[str] = []
    while isinstance(func, ast.Attribute):
        parts.insert(0, func.attr)
        func = func.value
    if not isinstance(func, ast.Name) or func.id not in names:
        return None
    value = names[func.id]
    if inspect.isclass(value):  # a record's constructor or from_dict
        return None
    for part in parts:
        value = getattr(value, part, None)
    return None if inspect.isclass(value) else ".".join([func.id, *parts])


def domain_calls(path: Path) -> list[str]:
    """The domain calls ``run`` makes, in source order, through the module's own functions too."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = _domain_names(tree)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    calls: list[str] = []
    seen: set[str] = set()

    def visit(name: str) -> None:
        seen.add(name)
        for node in ast.walk(functions[name]):
            if not isinstance(node, ast.Call):
                continue
            callee = _callee(node.func, names)
            if callee is not None:
                calls.append(f"{path.name}:{node.lineno}: {callee}")
            elif isinstance(node.func, ast.Name) and node.func.id in functions and node.func.id not in seen:
                visit(node.func.id)

    visit("run")
    return calls


@pytest.mark.parametrize("verb", VERB_MODULES)
def test_a_verb_module_is_short_and_run_calls_one_domain_function(verb):
    path = COMMANDS / f"{verb}.py"
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, (
        f"{path.name}: {lines} lines (at most {MAX_LINES}); move the workflow into its domain module"
    )
    calls = domain_calls(path)
    assert len(calls) == 1, f"{path.name}: run makes {len(calls)} domain calls (one wanted): {calls}"


@pytest.mark.parametrize("group", GROUPS)
def test_a_group_is_short_and_each_sub_command_is_a_verb_module(group):
    path = COMMANDS / f"{group}.py"
    assert len(path.read_text().splitlines()) <= MAX_LINES
    module = importlib.import_module(f"megacpp_env.commands.{group}")
    assert not hasattr(module, "run"), f"{path.name}: a group has sub-commands, not a run of its own"
    assert module.SUBCOMMANDS and {m for m, _help in module.SUBCOMMANDS.values()} <= set(VERB_MODULES)


def test_the_rule_counts_calls_through_helpers_and_skips_classes_and_printing(tmp_path):
    planted = tmp_path / "verb.py"
    planted.write_text(
        "from megacpp_env.commands._common import load\n"
        "from megacpp_env.errors import MegacppEnvError\n"
        "from megacpp_env.spec import Spec\n"
        "def _helper(args):\n"
        "    from megacpp_env.lock import diff\n"
        "    return diff.read_any(args.old)\n"
        "def run(args):\n"
        "    from megacpp_env import ui\n"
        "    from megacpp_env.render import render_all\n"
        "    spec = load(args)\n"
        "    ui.print_json({})\n"
        "    Spec.from_dict({}) if False else MegacppEnvError('x')\n"
        "    spec.target('x')\n"
        "    load(args).target_view('x')\n"
        "    return render_all(spec) and _helper(args)\n"
    )
    assert domain_calls(planted) == [
        "verb.py:14: load().target_view",
        "verb.py:15: render_all",
        "verb.py:6: diff.read_any",
    ]


# Where a domain function may take the spec as a loader to call later, not the spec or its path:
# the snapshot family, whose collector thread loads it off the critical path (docs/DESIGN.md, "Verbs").
DEFERRED_SPEC_OK = ("megacpp_env/snapshot/", "megacpp_env/repro/goldens.py", "megacpp_env/repro/session.py")


def deferred_spec_loaders(root: Path) -> list[str]:
    """Every parameter, field or alias of the package (verbs aside) typed ``Callable[[], Spec...]``."""
    out = []
    for path in sorted(root.rglob("*.py")):
        if "commands" in path.parts:
            continue
        rel = path.relative_to(root.parent).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            notes: list[tuple[str, ast.expr | None]] = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                notes = [(f"{node.name}({a.arg})", a.annotation) for a in args]
            elif isinstance(node, ast.AnnAssign):
                notes = [(ast.unparse(node.target), node.annotation)]
            elif isinstance(node, ast.Assign):
                notes = [(ast.unparse(node.targets[0]), node.value)]
            for name, note in notes:
                text = ast.unparse(note).replace("'", "").replace('"', "") if note is not None else ""
                if "Callable[[], Spec" in text:
                    out.append(f"{rel}:{node.lineno}: {name}")
    return out


def test_domain_functions_take_the_spec_not_a_loader_outside_the_snapshot_family():
    root = COMMANDS.parent
    found = deferred_spec_loaders(root)
    assert [f for f in found if not f.startswith(DEFERRED_SPEC_OK)] == []
    assert found, "the snapshot family's deferred loader is gone: update DEFERRED_SPEC_OK and docs/DESIGN.md"


def test_the_loader_check_sees_one(tmp_path):
    pkg = tmp_path / "megacpp_env"
    (pkg / "lock").mkdir(parents=True)
    (pkg / "lock" / "x.py").write_text("def f(spec: Callable[[], Spec]) -> None: ...\nclass R:\n    s: 'Callable[[], Spec | None]'\n")
    assert deferred_spec_loaders(pkg) == ["megacpp_env/lock/x.py:1: f(spec)", "megacpp_env/lock/x.py:3: s"]
