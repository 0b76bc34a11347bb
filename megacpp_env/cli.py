"""Argument parsing and dispatch only. Each verb lives in ``megacpp_env/commands/<module>.py``
and exposes ``add_arguments(parser)`` and ``run(args) -> int``.

Verb modules are imported only when their verb is chosen, so ``megacpp-env --help`` stays fast
(no jinja2, yaml or packaging import).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from megacpp_env import __version__
from megacpp_env.errors import EXIT_BUG, EXIT_INTERRUPTED, EXIT_USAGE, MegacppEnvError

# verb -> (module under megacpp_env.commands, one-line help)
VERBS: dict[str, tuple[str, str]] = {
    "check": ("check", "validate stack.yaml and run the policy rules"),
    "targets": ("targets", "list the targets of the spec"),
    "show": ("show", "show the resolved view of one target"),
    "render": ("render", "write (or --check) the rendered Dockerfiles"),
    "lock": ("lock", "resolve per-target locks with hashes; 'lock diff OLD NEW' explains changes"),
    "gate": ("gate", "compare committed locks at a git ref with the working tree; enforce policy"),
    "mirror": ("mirror", "download and hash-verify every artifact of a lock into a local mirror"),
    "checkout": ("checkout", "make a real git checkout of a pinned source"),
    "verify-checkout": ("verify_checkout", "verify a checkout is exactly at its pin"),
    "overlay": ("overlay", "file overlays onto pinned checkouts: new/apply/verify/status/restore"),
    "build": ("build", "build a target's image with docker BuildKit"),
    "pin-base": ("pin_base", "pin a target's base images by registry digest; --check finds moved tags"),
    "verify-image": ("verify_image", "snapshot inside an image and diff against its baked snapshot"),
    "snapshot": ("snapshot", "fingerprint this machine and environment"),
    "diff": ("diff", "explain drift between two snapshots"),
    "doctor": ("doctor", "check the live machine against what a target promises"),
}

SPEC_ENV = "MEGACPP_ENV_SPEC"  # spec/discover.py reads it; named here only for --help


def _add_spec(parser: argparse.ArgumentParser, default: str | None) -> None:
    parser.add_argument(
        "--spec",
        default=default,
        metavar="PATH",
        help=f"the stack spec (default: ${SPEC_ENV}, else the nearest stack.yaml here or in a parent directory)",
    )


def _common_parent() -> argparse.ArgumentParser:
    """``--spec`` is accepted before and after the verb; after the verb it wins."""
    parent = argparse.ArgumentParser(add_help=False)
    _add_spec(parent, argparse.SUPPRESS)
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


def _load_command(verb: str) -> ModuleType:
    return importlib.import_module(f"megacpp_env.commands.{VERBS[verb][0]}")


def build_parser(argv: Sequence[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="megacpp-env",
        description="One stack.yaml for the MegaCpp stack: check, render, lock, build, snapshot, diff.",
        epilog="exit codes: 0 ok, 1 findings or user error, 2 usage, 3 bug, 130 interrupted",
    )
    parser.add_argument("--version", action="version", version=f"megacpp-env {__version__}")
    _add_spec(parser, None)
    sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    chosen = _chosen_verb(argv)
    parent = _common_parent()
    for verb, (_module, help_text) in VERBS.items():
        p = sub.add_parser(verb, help=help_text, description=help_text, parents=[parent])
        if verb == chosen:
            _load_command(verb).add_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(args_list)
        args = parser.parse_args(args_list)
    except SystemExit as exc:  # argparse: --help/--version exit 0, bad usage exits 2
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return int(_load_command(args.verb).run(args))
    except MegacppEnvError as exc:
        print(f"megacpp-env {args.verb}: error: {exc}", file=sys.stderr)
        return exc.exit_code
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
        return EXIT_BUG
