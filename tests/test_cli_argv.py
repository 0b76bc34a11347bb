"""How ``cli`` reads a command line: global options on either side of the verb, a sub-verb found
behind the verb's own options (``lock --format markdown diff A B``), the verb's options refused by
name under its sub-verb, positionals left after options joining the verb's list positional, and no
access to argparse's private attributes (they change between Python versions)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from megacpp_env import cli
from megacpp_env.cli import canonical_argv, main

PACKAGE = Path(cli.__file__).resolve().parent
LOCK_ONLY = ["--check", "--export-requirements", "--align", "--allow-unlocked", "--try-unreachable"]


@pytest.fixture
def parsed(monkeypatch):
    """Run ``main`` up to dispatch and return the namespace it would dispatch."""
    seen = []
    monkeypatch.setattr(cli, "dispatch", lambda args: seen.append(args) or 0)

    def parse(*argv):
        assert main(list(argv)) == 0
        return seen.pop()

    return parse


def _usage_error(argv, capsys):
    assert main(argv) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "spec", "verbose", "quiet"),
    [
        (["--spec", "A", "targets"], "A", 0, 0),
        (["targets", "--spec", "B"], "B", 0, 0),
        (["--spec", "A", "targets", "--spec", "B"], "B", 0, 0),
        (["--spec=A", "targets"], "A", 0, 0),
        (["-v", "-v", "targets"], None, 2, 0),
        (["targets", "-q"], None, 0, 1),
        (["-v", "targets", "-vv"], None, 2, 0),
        (["-q", "targets", "--verbose"], None, 1, 1),
    ],
)
def test_global_options_on_either_side_of_the_verb_and_after_wins(parsed, argv, spec, verbose, quiet):
    args = parsed(*argv)
    assert (args.verb, args.spec, args.verbose, args.quiet) == ("targets", spec, verbose, quiet)


@pytest.mark.parametrize(
    ("argv", "attrs"),
    [
        (["lock", "diff", "a", "b"], {"format": "text", "json": False}),
        (["lock", "--format", "markdown", "diff", "a", "b"], {"format": "markdown"}),
        (["lock", "--json", "diff", "a", "b"], {"json": True}),
        (["lock", "--spec", "S", "diff", "a", "b"], {"spec": "S"}),
        (["--spec", "S", "lock", "-q", "diff", "a", "b"], {"spec": "S", "quiet": 1}),
        (["-v", "lock", "diff", "--format", "json", "a", "b"], {"verbose": 1, "format": "json"}),
        (["lock", "diff", "a", "--json", "b"], {"json": True}),
    ],
)
def test_sub_verb_found_behind_the_verbs_options(parsed, argv, attrs):
    args = parsed(*argv)
    assert (args.verb, args.subverb, args.old, args.new) == ("lock", "diff", "a", "b")
    assert {k: getattr(args, k) for k in attrs} == attrs


@pytest.mark.parametrize(
    ("argv", "names", "platform", "check"),
    [
        (["lock", "smoke", "diff"], ["smoke", "diff"], None, False),
        (["lock", "--platform", "diff"], [], ["diff"], False),
        (["lock", "--platform", "linux/amd64", "smoke"], ["smoke"], ["linux/amd64"], False),
        (["lock", "a", "--check", "b"], ["a", "b"], None, True),
        (["lock", "a", "--platform", "p", "b", "c"], ["a", "b", "c"], ["p"], False),
        (["lock", "--check", "a", "b"], ["a", "b"], None, True),
    ],
)
def test_verb_without_sub_verb_and_intermixed_positionals(parsed, argv, names, platform, check):
    args = parsed(*argv)
    assert not hasattr(args, "subverb")
    assert (args.verb, args.names, args.platform, args.check) == ("lock", names, platform, check)


def test_canonical_argv_moves_options_between_verb_and_sub_verb_after_it():
    moved = canonical_argv(["lock", "--format", "markdown", "diff", "a"])
    assert moved == ["lock", "diff", "--format", "markdown", "a"]
    moved = canonical_argv(["-q", "lock", "--json", "--spec", "S", "diff"])
    assert moved == ["-q", "lock", "diff", "--json", "--spec", "S"]
    assert canonical_argv(["lock", "--platform", "diff", "x"]) == ["lock", "--platform", "diff", "x"]
    assert canonical_argv(["lock", "--platform=p", "diff", "x"]) == ["lock", "diff", "--platform=p", "x"]
    assert canonical_argv(["lock", "--plat", "diff", "x"]) == ["lock", "diff", "--plat", "x"]
    assert canonical_argv(["show", "--json", "diff"]) == ["show", "--json", "diff"]
    assert canonical_argv(["--spec", "S", "targets"]) == ["--spec", "S", "targets"]
    assert canonical_argv([]) == []


@pytest.mark.parametrize("option", LOCK_ONLY)
def test_each_option_of_the_verb_is_refused_by_name_under_its_sub_verb(option, capsys):
    for argv in (["lock", option, "diff", "a", "b"], ["lock", "diff", "a", option, "b"]):
        err = _usage_error(argv, capsys)
        assert err.startswith("usage: megacpp-env lock diff ")
        assert err.endswith(f"megacpp-env lock diff: error: {option}: not an option of lock diff\n")


@pytest.mark.parametrize(
    ("argv", "usage", "message"),
    [
        (["lock", "--platform", "p", "diff", "a", "b"], "lock diff", "--platform: not an option of lock diff"),
        (["lock", "--platform=p", "diff", "a", "b"], "lock diff", "--platform: not an option of lock diff"),
        (["lock", "diff", "a", "b", "--platform"], "lock diff", "argument --platform: expected one argument"),
        (["lock", "diff", "--chec", "a", "b"], "lock diff", "--check: not an option of lock diff"),
        (
            ["lock", "diff", "a", "b", "--al"],
            "lock diff",
            "ambiguous option: --al could match --align, --allow-unlocked",
        ),
        (
            ["lock", "--form", "markdown", "diff", "a", "b"],
            "lock",
            "--format: an option of lock diff only (megacpp-env lock diff OLD NEW --format F)",
        ),
        (["lock", "a", "--check", "b", "--bogus"], "lock", "unrecognized arguments: b --bogus"),
        (["show", "a", "b"], "show", "unrecognized arguments: b"),
        (["targets", "x"], "targets", "unrecognized arguments: x"),
        (["lock", "--check", "--align"], "lock", "argument --align: not allowed with argument --check"),
    ],
)
def test_usage_errors_name_the_parser_that_owns_them(argv, usage, message, capsys):
    err = _usage_error(argv, capsys)
    assert err.startswith(f"usage: megacpp-env {usage} ")
    assert err.endswith(f"megacpp-env {usage}: error: {message}\n")


def _private_uses(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """``x._name`` (not a dunder): argparse's private attributes (``_actions``,
    ``_option_string_actions``, ``_SubParsersAction`` ...) change between Python versions.
    ``os._exit`` is public (documented) despite its name."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(root)}:{node.lineno}: .{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (node.attr == "_exit" and isinstance(node.value, ast.Name) and node.value.id == "os")
    ]


def test_cli_and_verbs_use_no_private_attribute():
    files = [PACKAGE / "cli.py", *sorted((PACKAGE / "commands").glob("*.py"))]
    assert [use for path in files for use in _private_uses(path)] == []


def test_the_private_attribute_check_sees_one(tmp_path):
    planted = tmp_path / "verb.py"
    planted.write_text("import argparse\n\ndef f(p):\n    return p._actions, argparse._SubParsersAction, p.__doc__\n")
    assert _private_uses(planted, tmp_path) == ["verb.py:4: ._actions", "verb.py:4: ._SubParsersAction"]
