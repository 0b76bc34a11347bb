"""Argument parsing and dispatch only. Each verb lives in ``megacpp_env/commands/<module>.py``
and exposes ``add_arguments(parser)`` and ``run(args) -> int``; a group (``lock``) declares
``SUBCOMMANDS`` instead, real argparse sub-commands with a module each (``lock check``). The
command line is parsed as given: nothing reorders it or patches what argparse parsed.

Verb modules are imported only when their verb is chosen, so ``megacpp-env --help`` stays fast
(no jinja2, yaml or packaging import). ``main`` is the one error handler: a ``MegacppEnvError`` is
one line on stderr (exit 1) and, for a verb asked for JSON, also ``{"ok": false, "error": ...}``
on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, NoReturn

from megacpp_env import __version__
from megacpp_env.errors import EXIT_ABORT_BISECT, EXIT_BUG, EXIT_INTERRUPTED, EXIT_USAGE, MegacppEnvError, Terminated

# verb -> (module under megacpp_env.commands, one-line help). A module with ``run(args)`` is the verb;
# a module with a ``SUBCOMMANDS`` table instead (``lock``) is a group of real argparse sub-commands,
# each with a module of its own (``lock check`` -> ``commands/lock_check.py``).
VERBS: dict[str, tuple[str, str]] = {
    "check": ("check", "validate stack.yaml and run the policy rules"),
    "explain": ("explain", "print the documentation of a finding code (TC005, SP002, LG004, ...)"),
    "facts": ("facts", "upstream facts per pinned source: extract NAME --from CHECKOUT, check, show"),
    "targets": ("targets", "list the targets of the spec"),
    "schema": ("schema", "print the JSON Schema of stack.yaml (for editors)"),
    "show": ("show", "show the resolved view of one target"),
    "render": ("render", "write (or --check) the rendered Dockerfiles"),
    "lock": ("lock", "per-target locks: lock resolve | check | export | diff"),
    "gate": ("gate", "compare committed locks at a git ref with the working tree; enforce policy"),
    "mirror": ("mirror", "download and hash-verify every artifact of a lock into a local mirror"),
    "mirror-artifacts": ("mirror_artifacts", "fetch a pinned artifact set (FlashInfer cubins) and verify each file"),
    "mirror-sources": ("mirror_sources", "put every pinned source of targets into a local source mirror"),
    "checkout": ("checkout", "make a real git checkout of a pinned source"),
    "verify-checkout": ("verify_checkout", "verify a checkout is exactly at its pin"),
    "overlay": ("overlay", "file overlays onto pinned checkouts: new/apply/verify/status/restore"),
    "build-source": ("build_source", "build one pinned source into a wheel on this machine"),
    "build": ("build", "build a target's image with docker BuildKit"),
    "pin-base": ("pin_base", "pin a target's base images by registry digest; --check finds moved tags"),
    "sbom": ("sbom", "write the CycloneDX SBOM of a target's image (locks, sources, artifacts, base)"),
    "verify-image": ("verify_image", "snapshot inside an image and diff against its baked snapshot"),
    "snapshot": ("snapshot", "fingerprint this machine and environment"),
    "diff": ("diff", "explain drift between two snapshots"),
    "doctor": ("doctor", "check the live machine against what a target promises"),
    "completion": ("completion", "print the bash or zsh completion script"),
    "reproduce": ("reproduce", "make a golden's environment again elsewhere and prove it identical"),
    "run": ("run", "run a command only on the golden's environment (refuse on drift); record the run"),
    "bisect-check": ("bisect_check", "git bisect pre-check: exit 0 on the golden's environment, 125 (skip) if not"),
}

# Verbs whose exit codes another program reads its own way: an error of the verb itself (usage, a
# user error, a bug) exits with this code instead. `git bisect run` reads 1-127 (but 125) as "bad",
# so bisect-check's own failures abort the bisect (128) and never blame a commit.
ERROR_EXIT: dict[str, int] = {"bisect-check": EXIT_ABORT_BISECT}

SPEC_ENV = "MEGACPP_ENV_SPEC"  # spec/discover.py reads it; named here only for --help
COMMON = ("-h", "--help", "--spec", "-v", "--verbose", "-q", "--quiet")  # every verb parser has them
VALUED = ("--spec",)  # the one option of the top-level and group parsers that takes a value


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with three additions, all through argparse's public API:

    - it keeps the options its verb adds (``options``): an unrecognized one gets a did-you-mean;
    - a mistyped choice (a verb, a sub-command, a format) gets a did-you-mean, and a group's
      ``choice_hint`` (what an old spelling is now);
    - a command with positionals and no sub-commands parses them intermixed with its options
      (``lock resolve a --platform p b``), by argparse's ``parse_known_intermixed_args``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.options: list[str] = []
        self.positional_nargs: list[Any] = []
        self.choice_hint = ""
        self.intermixing = False
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.remember(action)
        return action

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        return self.recording(super().add_argument_group(*args, **kwargs))

    def add_mutually_exclusive_group(self, **kwargs: Any) -> Any:
        return self.recording(super().add_mutually_exclusive_group(**kwargs))

    def add_subparsers(self, **kwargs: Any) -> Any:
        self.positional_nargs.append(argparse.PARSER)
        return super().add_subparsers(**kwargs)

    def remember(self, action: argparse.Action) -> None:
        self.options += action.option_strings
        if not action.option_strings:
            self.positional_nargs.append(action.nargs)

    def recording(self, group: Any) -> Any:
        """A group's ``add_argument`` (and its nested groups') keeps what it adds here too."""
        add, nest = group.add_argument, group.add_mutually_exclusive_group

        def add_argument(*args: Any, **kwargs: Any) -> argparse.Action:
            action: argparse.Action = add(*args, **kwargs)
            self.remember(action)
            return action

        group.add_argument = add_argument
        group.add_mutually_exclusive_group = lambda **kwargs: self.recording(nest(**kwargs))
        return group

    def intermixable(self) -> bool:
        """Positionals, none of them a sub-command or a remainder (``run -- CMD``)."""
        nargs = self.positional_nargs
        return bool(nargs) and not any(n in (argparse.PARSER, argparse.REMAINDER) for n in nargs)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if self.intermixing or not self.intermixable():
            return super().parse_known_args(args, namespace)
        self.intermixing = True  # parse_known_intermixed_args calls parse_known_args twice
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self.intermixing = False

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        import difflib

        close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
        shown = f"did you mean {close[0]!r}?" if close else f"choose from {', '.join(map(repr, choices))}"
        hint = f"; {self.choice_hint}" if self.choice_hint and not close else ""
        raise argparse.ArgumentError(action, f"invalid choice: {value!r} ({shown}{hint})")


def _unrecognized(extra: list[str], parser: argparse.ArgumentParser) -> str:
    """``unrecognized arguments: --jsn (did you mean --json?)``: the closest option of the command."""
    import difflib

    options = [*COMMON, *(parser.options if isinstance(parser, _Parser) else ())]
    hints = {
        e: close[0]
        for e in extra
        if e.startswith("-") and (close := difflib.get_close_matches(e.split("=")[0], options, n=1, cutoff=0.75))
    }
    if len(hints) == 1 and len(extra) == 1:
        return f"unrecognized arguments: {extra[0]} (did you mean {hints[extra[0]]}?)"
    tail = f" (did you mean {', '.join(f'{v} for {k}' for k, v in hints.items())}?)" if hints else ""
    return f"unrecognized arguments: {' '.join(extra)}{tail}"


def _add_spec(parser: argparse.ArgumentParser, default: str | None) -> None:
    parser.add_argument(
        "--spec",
        default=default,
        metavar="PATH",
        help=f"the stack spec (default: ${SPEC_ENV}, else the nearest stack.yaml here or in a parent directory)",
    )


def _add_verbosity(parser: argparse.ArgumentParser, default: int | str) -> None:
    parser.add_argument(
        "-v", "--verbose", action="count", default=default, help="also show every external command run (git, uv)"
    )
    parser.add_argument(
        "-q", "--quiet", action="count", default=default, help="only results and errors: no progress, no build log"
    )


def _common_parent() -> argparse.ArgumentParser:
    """``--spec``, ``-q`` and ``-v`` are accepted before and after the verb; after the verb they win."""
    parent = argparse.ArgumentParser(add_help=False)
    _add_spec(parent, argparse.SUPPRESS)
    _add_verbosity(parent, argparse.SUPPRESS)
    return parent


def _first_word(argv: Sequence[str]) -> str | None:
    """The first word that is not an option (nor ``--spec``'s value): what names a verb, or a
    group's sub-command. A lookup: argv itself is parsed as given."""
    args = iter(argv)
    for arg in args:
        if arg in VALUED:
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None


def _chosen_verb(argv: Sequence[str]) -> str | None:
    word = _first_word(argv)
    return word if word in VERBS else None


def _chosen_word(argv: Sequence[str], verb: str) -> str | None:
    """The word after ``verb``: the sub-command a group's command line names, if any."""
    rest = list(argv)
    return _first_word(rest[rest.index(verb) + 1 :])


def _load_command(module: str) -> ModuleType:
    return importlib.import_module(f"megacpp_env.commands.{module}")


def subcommands(verb: str) -> dict[str, tuple[str, str]]:
    """A group's sub-commands (``lock``: resolve, check, export, diff), else nothing."""
    table: dict[str, tuple[str, str]] = getattr(_load_command(VERBS[verb][0]), "SUBCOMMANDS", {})
    return table


def build_parser(argv: Sequence[str], *, every_verb: bool = False) -> argparse.ArgumentParser:
    """The parser; only the chosen verb's options are added (imported) unless ``every_verb`` (shell
    completion needs every verb's and every sub-command's options)."""
    return build_parsers(argv, every_verb=every_verb)[0]


def build_parsers(
    argv: Sequence[str], *, every_verb: bool = False
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The top-level parser, and the parser of the chosen command (a verb, or a group's
    sub-command), which reports usage errors such as unrecognized arguments under its own usage."""
    parser = _Parser(
        prog="megacpp-env",
        description="One stack.yaml for the MegaCpp stack: check, render, lock, build, snapshot, diff.",
        epilog="exit codes: 0 ok, 1 findings or user error, 2 usage, 3 bug, 130 interrupted",
    )
    parser.add_argument("--version", action="version", version=f"megacpp-env {__version__}")
    _add_spec(parser, None)
    _add_verbosity(parser, 0)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    chosen = _chosen_verb(argv)
    parent = _common_parent()
    chosen_parser: argparse.ArgumentParser = parser
    for verb, (module, help_text) in VERBS.items():
        p = sub.add_parser(verb, help=help_text, description=help_text, parents=[parent])
        if verb == chosen or every_verb:
            command = _load_command(module)
            command.add_arguments(p)
            table = getattr(command, "SUBCOMMANDS", None)
            if table is not None:
                if isinstance(p, _Parser):
                    p.choice_hint = getattr(command, "CHOICE_HINT", "")
                word = _chosen_word(argv, verb) if verb == chosen else None
                p = _add_subcommands(p, table, parent, word, every=every_verb) or p
            if verb == chosen:
                chosen_parser = p
    return parser, chosen_parser


def _add_subcommands(
    group: argparse.ArgumentParser,
    table: dict[str, tuple[str, str]],
    parent: argparse.ArgumentParser,
    word: str | None,
    *,
    every: bool,
) -> argparse.ArgumentParser | None:
    """A group's sub-commands as real argparse sub-commands; only the chosen one's module is
    imported (``every``: all of them). Returns the chosen one's parser."""
    subs = group.add_subparsers(dest="subcommand", metavar="COMMAND", required=True)
    chosen = None
    for name, (module, help_text) in table.items():
        p = subs.add_parser(name, help=help_text, description=help_text, parents=[parent])
        if name == word or every:
            _load_command(module).add_arguments(p)
            chosen = p if name == word else chosen
    return chosen


def _module_of(args: argparse.Namespace) -> str:
    word = getattr(args, "subcommand", None)
    return subcommands(args.verb)[word][0] if word else VERBS[args.verb][0]


def _wants_json(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "json", False)) or getattr(args, "format", None) == "json"


def main(argv: Sequence[str] | None = None) -> int:
    return _main(list(sys.argv[1:] if argv is None else argv))


def entry() -> NoReturn:
    """The program (the console script, ``python -m megacpp_env``): ``main``, then exit. A verb whose
    module says ``FAST_EXIT = True`` (``snapshot``: its document is written, synced and closed, its
    children reaped) skips the interpreter's teardown: freeing what it held took 0.02 s of a 0.3 s
    repeat on the H200 (docs/BENCHMARKS.md)."""
    from megacpp_env.streams import guard_standard_streams

    guard_standard_streams()  # a closed descriptor 0-2 (`>&-`): /dev/null there; see streams
    _terminate_as_interrupt()
    try:
        code = main()
    except Terminated as exc:  # before a verb ran (dispatch reports one that reaches the verb)
        code = 128 + exc.signum
    verb = _chosen_verb(sys.argv[1:])
    if verb is not None and getattr(sys.modules.get(f"megacpp_env.commands.{VERBS[verb][0]}"), "FAST_EXIT", False):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        os._exit(code)
    sys.exit(code)


def _terminate_as_interrupt() -> None:
    """SIGTERM and SIGHUP raise ``errors.Terminated`` where the program is (unless they are ignored, as
    under ``nohup``): killed by default, the program would leave its children behind (git, in a group
    of its own that no terminal signal reaches, blocked for up to its deadline)."""
    import signal

    from megacpp_env.errors import Terminated

    def stop(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is signal.SIG_DFL:
            signal.signal(sig, stop)


def _main(args_list: list[str]) -> int:
    try:
        parser, chosen = build_parsers(args_list)
        args, extra = parser.parse_known_args(args_list)
        if extra:
            chosen.error(_unrecognized(extra, chosen))
    except SystemExit as exc:  # argparse: --help/--version exit 0, bad usage exits 2
        code = int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
        return _error_exit(_chosen_verb(args_list), code) if code else _flushed()
    from megacpp_env import ui

    ui.configure(verbosity=(getattr(args, "verbose", 0) or 0) - (getattr(args, "quiet", 0) or 0))
    return dispatch(args)


def dispatch(args: argparse.Namespace) -> int:
    """Run the chosen verb under the one error handler: a ``MegacppEnvError`` is one line on stderr
    (and ``{"ok": false, "error": ...}`` on stdout when JSON was asked for), ^C is 130, a bug 3."""
    from megacpp_env.streams import OutputError, flush_output

    try:
        code = int(_load_command(_module_of(args)).run(args))
        flush_output()  # a result that did not reach stdout is an error, not exit 0
        return code
    except MegacppEnvError as exc:
        if _wants_json(args) and not isinstance(exc, OutputError):
            from megacpp_env.ui import print_json

            print_json({"ok": False, "error": str(exc)})
        from megacpp_env.ui import paint

        print(f"megacpp-env {args.verb}: {paint('error', 'error', stream=sys.stderr)}: {exc}", file=sys.stderr)
        return _error_exit(args.verb, exc.exit_code)
    except KeyboardInterrupt:
        print("megacpp-env: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated as exc:
        import signal

        print(f"megacpp-env: terminated ({signal.Signals(exc.signum).name})", file=sys.stderr)
        return 128 + exc.signum
    except BrokenPipeError:
        return 0
    except Exception:  # a bug: show the traceback and ask for a report
        import traceback

        traceback.print_exc()
        print(
            f"megacpp-env {args.verb}: internal error (a bug in megacpp-env {__version__}); "
            "please report it with the traceback above",
            file=sys.stderr,
        )
        return _error_exit(args.verb, EXIT_BUG)


def _flushed() -> int:
    """0 after ``--help``/``--version``, or 1 when their text did not reach stdout (``streams.flush_output``)."""
    from megacpp_env.streams import OutputError, flush_output

    try:
        flush_output()
    except OutputError as exc:
        print(f"megacpp-env: error: {exc}", file=sys.stderr)
        return OutputError.exit_code
    return 0


def _error_exit(verb: str | None, code: int) -> int:
    return ERROR_EXIT.get(verb or "", code)
