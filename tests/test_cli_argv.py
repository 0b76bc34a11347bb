"""How ``cli`` reads a command line: global options on either side of the verb and of a group's
sub-command (``lock check``), positionals intermixed with options (argparse's own intermixed
parsing), the spellings of ``lock`` before it had sub-commands refused with their new spelling, the
command line handed to argparse as given (nothing reorders it), and no access to argparse's private
attributes (they change between Python versions)."""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from megacpp_env import cli
from megacpp_env.cli import main

PACKAGE = Path(cli.__file__).resolve().parent

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
        (["lock", "diff", "--format", "markdown", "a", "b"], {"format": "markdown"}),
        (["lock", "diff", "--json", "a", "b"], {"json": True}),
        (["lock", "--spec", "S", "diff", "a", "b"], {"spec": "S"}),
        (["lock", "diff", "a", "b", "--spec", "S"], {"spec": "S"}),
        (["--spec", "S", "lock", "-q", "diff", "a", "b"], {"spec": "S", "quiet": 1}),
        (["-v", "lock", "diff", "--format", "json", "a", "b"], {"verbose": 1, "format": "json"}),
        (["lock", "diff", "a", "--json", "b"], {"json": True}),
    ],
)
def test_a_sub_command_takes_its_options_and_the_global_ones(parsed, argv, attrs):
    args = parsed(*argv)
    assert (args.verb, args.subcommand, args.old, args.new) == ("lock", "diff", "a", "b")
    assert {k: getattr(args, k) for k in attrs} == attrs


@pytest.mark.parametrize(
    ("argv", "names", "platform", "attrs"),
    [
        (["lock", "resolve", "smoke", "diff"], ["smoke", "diff"], [], {}),
        (["lock", "resolve", "--platform", "diff"], [], ["diff"], {}),
        (["lock", "check", "--platform", "linux/amd64", "smoke"], ["smoke"], ["linux/amd64"], {}),
        (["lock", "check", "a", "--allow-unlocked", "b"], ["a", "b"], [], {"allow_unlocked": True}),
        (["lock", "resolve", "a", "--platform", "p", "b", "c"], ["a", "b", "c"], ["p"], {}),
        (["lock", "export", "a", "b", "--json"], ["a", "b"], [], {"json": True}),
    ],
)
def test_positionals_intermix_with_options(parsed, argv, names, platform, attrs):
    args = parsed(*argv)
    assert (args.verb, args.names, args.platform) == ("lock", names, platform)
    assert {k: getattr(args, k) for k in attrs} == attrs


def test_positionals_intermix_in_every_verb_with_a_list_of_them(parsed):
    assert parsed("render", "a", "--check", "b").targets == ["a", "b"]
    assert parsed("explain", "TC005", "--json", "UP015").code == ["TC005", "UP015"]


def test_the_command_line_reaches_argparse_as_given(monkeypatch):
    """No reordering, no patching afterwards: the top-level parser parses exactly what was typed."""
    seen = []
    original = argparse.ArgumentParser.parse_known_args

    def recording(self, args=None, namespace=None):
        if self.prog == "megacpp-env" and not seen:
            seen.append(list(args))
        return original(self, args, namespace)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", recording)
    monkeypatch.setattr(cli, "dispatch", lambda args: 0)
    argv = ["-q", "lock", "--spec", "S", "diff", "a", "--json", "b"]
    assert main(list(argv)) == 0
    assert seen == [argv]


def test_only_the_chosen_sub_command_is_imported():
    code = (
        "import sys\nfrom megacpp_env.cli import build_parsers\n"
        "build_parsers(['lock', 'check', 'smoke'])\n"
        "print(sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('megacpp_env.commands.lock')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['lock', 'lock_check']"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lock", "--check"], "--check is now a sub-command: megacpp-env lock check [TARGET...]"),
        (
            ["lock", "--check", "smoke", "--allow-unlocked"],
            "--check is now a sub-command: megacpp-env lock check [TARGET...]",
        ),
        (
            ["lock", "--export-requirements"],
            "--export-requirements is now a sub-command: megacpp-env lock export [TARGET...]",
        ),
        (
            ["lock", "smoke"],
            "argument COMMAND: invalid choice: 'smoke' (choose from 'resolve', 'check', 'export', 'diff'; "
            "to lock targets: megacpp-env lock resolve TARGET...)",
        ),
        (["lock", "chek"], "argument COMMAND: invalid choice: 'chek' (did you mean 'check'?)"),
        (["lock"], "the following arguments are required: COMMAND"),
    ],
)
def test_the_spellings_before_sub_commands_say_their_new_one(argv, message, capsys):
    err = _usage_error(argv, capsys)
    assert err.startswith("usage: megacpp-env lock ")
    assert err.endswith(f"megacpp-env lock: error: {message}\n")


@pytest.mark.parametrize(
    ("argv", "usage", "message"),
    [
        (["lock", "diff", "a", "b", "--platform"], "lock diff", "unrecognized arguments: --platform"),
        (["lock", "diff", "--chec", "a", "b"], "lock diff", "unrecognized arguments: --chec"),
        (["lock", "check", "--chec"], "lock check", "unrecognized arguments: --chec"),
        (
            ["lock", "check", "--alow-unlocked"],
            "lock check",
            "unrecognized arguments: --alow-unlocked (did you mean --allow-unlocked?)",
        ),
        (["lock", "resolve", "--allow-unlocked"], "lock resolve", "unrecognized arguments: --allow-unlocked"),
        (["lock", "check", "a", "--align", "b"], "lock check", "unrecognized arguments: --align b"),
        (["lock", "diff", "a", "b", "c"], "lock diff", "unrecognized arguments: c"),
        (["show", "a", "b"], "show", "unrecognized arguments: b"),
        (["targets", "x"], "targets", "unrecognized arguments: x"),
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
