"""Helpers shared by command modules: loading the spec named by ``--spec`` and the options several
verbs share (``--json``, ``--python``, ``--ignore``). Taking a snapshot from parsed arguments is
``commands._snapshot``. ``argparse.Namespace`` stops here: domain code takes typed parameters."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from megacpp_env.spec.model import Spec


def add_epilog(parser: argparse.ArgumentParser, text: str) -> None:
    """Text after the options in ``--help``, laid out as written (examples, forms, exit codes)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = text


def add_flag(parser: argparse.ArgumentParser, flag: str, help_text: str) -> None:
    """An option that is on or off (``--check``)."""
    parser.add_argument(flag, action="store_true", help=help_text)


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a machine-readable JSON report on stdout")


def workspace() -> str:
    """What paths in CI formats are relative to: ``$GITHUB_WORKSPACE`` in a workflow, else here."""
    import os
    from pathlib import Path

    return os.environ.get("GITHUB_WORKSPACE") or str(Path.cwd())


def load(args: argparse.Namespace) -> Spec:
    """The spec named by ``--spec``, ``$MEGACPP_ENV_SPEC`` or found upward from the working directory."""
    from megacpp_env.spec import load_spec
    from megacpp_env.spec.discover import required_path

    return load_spec(required_path(args.spec))


def spec_path(args: argparse.Namespace) -> Path | None:
    """Where the spec is (``--spec``, ``$MEGACPP_ENV_SPEC`` or found upward), not loaded: for a domain
    call whose report holds the spec's errors (``check``, ``gate``); None when none was named or found."""
    from megacpp_env.spec.discover import chosen_path

    return chosen_path(args.spec)


def load_optional(args: argparse.Namespace) -> Spec | None:
    """The spec when its file exists (errors in it still fail); None on a machine without one.

    Verbs that also work without stack.yaml (snapshot, verify-checkout, overlay, diff) use this.
    """
    from megacpp_env.spec.discover import chosen_path, load_present

    return load_present(chosen_path(args.spec))


def add_ignore(parser: argparse.ArgumentParser, what: str) -> None:
    """``--ignore PATTERN``, one pattern per use (repeatable), so it never swallows a positional."""
    parser.add_argument(
        "--ignore",
        metavar="PATTERN",
        action="append",
        default=[],
        help=f"{what} (fnmatch on the key and its prefixes, e.g. 'gpu', 'env.NCCL_*'; repeatable)",
    )


def add_python(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="the interpreter to inspect (default: $VIRTUAL_ENV's, else the project's .venv as uv finds it, "
        "else the first python3 on PATH)",
    )


def checked_python(python: str | None) -> str | None:
    """An explicit ``--python`` that is not an executable file is a user error, before anything runs."""
    if not python:
        return None
    from megacpp_env.snapshot.interpreter import check_interpreter

    return check_interpreter(python)
