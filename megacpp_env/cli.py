"""Argument parsing and dispatch only. Each verb lives in ``megacpp_env/commands/<module>.py``
and exposes ``add_arguments(parser)`` and ``run(args) -> int``; a sub-verb (``lock diff``) is a
real argparse sub-command of its verb with a module of its own.

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
from megacpp_env.errors import EXIT_ABORT_BISECT, EXIT_BUG, EXIT_INTERRUPTED, EXIT_USAGE, MegacppEnvError

# verb -> (module under megacpp_env.commands, one-line help)
VERBS: dict[str, tuple[str, str]] = {
    "check": ("check", "validate stack.yaml and run the policy rules"),
    "explain": ("explain", "print the documentation of a finding code (TC005, SP002, LG004, ...)"),
    "facts": ("facts", "upstream facts per pinned source: extract NAME --from CHECKOUT, check, show"),
    "targets": ("targets", "list the targets of the spec"),
    "schema": ("schema", "print the JSON Schema of stack.yaml (for editors)"),
    "show": ("show", "show the resolved view of one target"),
    "render": ("render", "write (or --check) the rendered Dockerfiles"),
    "lock": ("lock", "resolve per-target locks with hashes; 'lock diff OLD NEW' explains changes"),
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

# (verb, word) -> (module under megacpp_env.commands, one-line help): `megacpp-env lock diff ...`
SUBVERBS: dict[tuple[str, str], tuple[str, str]] = {
    ("lock", "diff"): ("lock_diff", "explain the changes between two locks (PEP 751 or requirements)"),
}

# Verbs whose exit codes another program reads its own way: an error of the verb itself (usage, a
# user error, a bug) exits with this code instead. `git bisect run` reads 1-127 (but 125) as "bad",
# so bisect-check's own failures abort the bisect (128) and never blame a commit.
ERROR_EXIT: dict[str, int] = {"bisect-check": EXIT_ABORT_BISECT}

SPEC_ENV = "MEGACPP_ENV_SPEC"  # spec/discover.py reads it; named here only for --help


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with a did-you-mean for a mistyped choice (a verb, an action, a format)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        import difflib

        close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
        shown = f"did you mean {close[0]!r}?" if close else f"choose from {', '.join(map(repr, choices))}"
        raise argparse.ArgumentError(action, f"invalid choice: {value!r} ({shown})")


def _unrecognized(extra: list[str], args: argparse.Namespace) -> str:
    """``unrecognized arguments: --jsn (did you mean --json?)``: the closest option of the verb."""
    import difflib

    options = list(_probe(_module_of(args), common=True).options())
    hints = {
        e: close[0]
        for e in extra
        if e.startswith("-") and (close := difflib.get_close_matches(e.split("=")[0], options, n=1, cutoff=0.75))
    }
    if len(hints) == 1 and len(extra) == 1:
        return f"unrecognized arguments: {extra[0]} (did you mean {hints[extra[0]]}?)"
    tail = f" (did you mean {', '.join(f'{v} for {k}' for k, v in hints.items())}?)" if hints else ""
    return f"unrecognized arguments: {' '.join(extra)}{tail}"


class _NotForSubverb(argparse.Action):
    """An option of the verb given with one of its sub-verbs: a usage error naming it."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: object, values: object, option_string: str | None = None
    ) -> None:
        parser.error(f"{option_string}: not an option of {parser.prog.removeprefix('megacpp-env ')}")


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


def _chosen_verb(argv: Sequence[str]) -> str | None:
    args = iter(argv)
    for arg in args:
        if arg in VERBS:
            return arg
        if arg == "--spec":
            next(args, None)
        elif not arg.startswith("-"):
            return None
    return None


class _Probe(argparse.ArgumentParser):
    """A parser that keeps every ``Action`` its ``add_argument`` returns, so ``cli`` can ask which
    options a verb has, which take a value, and its list positional, through public API only
    (``Action.option_strings``, ``.nargs``, ``.dest``). Argument groups fold into the parser itself:
    a probe only describes arguments, it never parses a command line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.actions: list[argparse.Action] = []
        self.folding = False  # argparse's own groups, made in __init__, stay real groups
        super().__init__(*args, **kwargs)
        self.folding = True

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.actions.append(action)
        return action

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        return self if self.folding else super().add_argument_group(*args, **kwargs)

    def add_mutually_exclusive_group(self, **kwargs: Any) -> Any:
        return self if self.folding else super().add_mutually_exclusive_group(**kwargs)

    def options(self) -> dict[str, argparse.Action]:
        return {flag: a for a in self.actions for flag in a.option_strings}


def _probe(module: str, *, common: bool = False) -> _Probe:
    """The arguments of a verb's (or sub-verb's) module; ``common`` adds what every verb parser has
    besides (``-h``, ``--spec``, ``-v``, ``-q``), else only ``--spec``."""
    probe = _Probe(add_help=common)
    _add_spec(probe, argparse.SUPPRESS)
    if common:
        _add_verbosity(probe, argparse.SUPPRESS)
    _load_command(module).add_arguments(probe)
    return probe


def _chosen_subverb(argv: Sequence[str], verb: str | None) -> str | None:
    """The verb's first positional word, when it names a sub-verb: ``diff`` in ``lock --format
    markdown diff A B`` (the verb's own options tell which of them take a value)."""
    if verb is None or not any(v == verb for v, _word in SUBVERBS):
        return None
    options = _probe(VERBS[verb][0]).options()
    rest = list(argv)[list(argv).index(verb) + 1 :]
    i = 0
    while i < len(rest) and rest[i].startswith("-"):
        action = options.get(rest[i])
        i += 2 if action is not None and action.nargs != 0 and "=" not in rest[i] else 1
    word = rest[i] if i < len(rest) else None
    return word if word is not None and (verb, word) in SUBVERBS else None


def canonical_argv(argv: Sequence[str]) -> list[str]:
    """Options given between a verb and its sub-verb belong to the sub-verb: move them after it."""
    argv = list(argv)
    verb = _chosen_verb(argv)
    word = _chosen_subverb(argv, verb)
    if verb is None or word is None:
        return argv
    i = argv.index(verb)
    j = argv.index(word, i + 1)
    return [*argv[: i + 1], word, *argv[i + 1 : j], *argv[j + 1 :]]


def _load_command(module: str) -> ModuleType:
    return importlib.import_module(f"megacpp_env.commands.{module}")


def _add_subverb(
    verb_parser: argparse.ArgumentParser, verb: str, word: str, parent: argparse.ArgumentParser
) -> argparse.ArgumentParser:
    module, help_text = SUBVERBS[(verb, word)]
    subs = verb_parser.add_subparsers(dest="subverb", metavar="ACTION", required=True)
    p = subs.add_parser(word, help=help_text, description=help_text, parents=[parent])
    _load_command(module).add_arguments(p)
    own = _probe(module, common=True).options()
    for action in _probe(VERBS[verb][0]).actions:
        flags = [f for f in action.option_strings if f not in own]
        if flags:
            p.add_argument(*flags, nargs=action.nargs, action=_NotForSubverb, help=argparse.SUPPRESS)
    return p


def build_parser(argv: Sequence[str], *, every_verb: bool = False) -> argparse.ArgumentParser:
    """The parser; only the chosen verb's options are added (imported) unless ``every_verb`` (shell
    completion needs every verb's own options; sub-verbs are left out)."""
    return build_parsers(argv, every_verb=every_verb)[0]


def build_parsers(
    argv: Sequence[str], *, every_verb: bool = False
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The top-level parser, and the parser of the chosen verb (or sub-verb), which reports usage
    errors such as unrecognized arguments under its own usage line."""
    parser: argparse.ArgumentParser = _Parser(
        prog="megacpp-env",
        description="One stack.yaml for the MegaCpp stack: check, render, lock, build, snapshot, diff.",
        epilog="exit codes: 0 ok, 1 findings or user error, 2 usage, 3 bug, 130 interrupted",
    )
    parser.add_argument("--version", action="version", version=f"megacpp-env {__version__}")
    _add_spec(parser, None)
    _add_verbosity(parser, 0)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    chosen = _chosen_verb(argv)
    word = _chosen_subverb(argv, chosen)
    parent = _common_parent()
    chosen_parser = parser
    for verb, (module, help_text) in VERBS.items():
        p = sub.add_parser(verb, help=help_text, description=help_text, parents=[parent])
        if verb == chosen and word is not None:
            chosen_parser = _add_subverb(p, verb, word, parent)
        elif verb == chosen:
            _load_command(module).add_arguments(p)
            chosen_parser = p
        elif every_verb:
            _load_command(module).add_arguments(p)
    return parser, chosen_parser


def _intermixed(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """Positionals left over after options (``lock a --check b``) join the verb's list positional,
    as ``parse_intermixed_args`` would (which argparse does not offer with sub-commands)."""
    if not extra or any(e.startswith("-") for e in extra):
        return extra
    lists = [a for a in _probe(_module_of(args)).actions if not a.option_strings and a.nargs == "*"]
    if not lists:
        return extra
    setattr(args, lists[0].dest, [*(getattr(args, lists[0].dest) or []), *extra])
    return []


def _module_of(args: argparse.Namespace) -> str:
    word = getattr(args, "subverb", None)
    return SUBVERBS[(args.verb, word)][0] if word else VERBS[args.verb][0]


def _wants_json(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "json", False)) or getattr(args, "format", None) == "json"


def main(argv: Sequence[str] | None = None) -> int:
    return _main(canonical_argv(sys.argv[1:] if argv is None else argv))


def entry() -> NoReturn:
    """The program (the console script, ``python -m megacpp_env``): ``main``, then exit. A verb whose
    module says ``FAST_EXIT = True`` (``snapshot``: its document is written, synced and closed, its
    children reaped) skips the interpreter's teardown: freeing what it held took 0.02 s of a 0.3 s
    repeat on the H200 (docs/BENCHMARKS.md)."""
    from megacpp_env.streams import guard_standard_streams

    guard_standard_streams()  # a closed descriptor 0-2 (`>&-`): /dev/null there; see streams
    code = main()
    verb = _chosen_verb(canonical_argv(sys.argv[1:]))
    if verb is not None and getattr(sys.modules.get(f"megacpp_env.commands.{VERBS[verb][0]}"), "FAST_EXIT", False):
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        os._exit(code)
    sys.exit(code)


def _main(args_list: list[str]) -> int:
    try:
        parser, chosen = build_parsers(args_list)
        args, extra = parser.parse_known_args(args_list)
        extra = _intermixed(args, extra)
        if extra:
            chosen.error(_unrecognized(extra, args))
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
