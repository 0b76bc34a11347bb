"""Helpers shared by command modules: loading the spec named by ``--spec`` and a ``--json`` flag."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from megacpp_env.spec.model import Spec


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a machine-readable JSON report on stdout")


def load(args: argparse.Namespace) -> Spec:
    """The spec named by ``--spec``, ``$MEGACPP_ENV_SPEC`` or found upward from the working directory."""
    from megacpp_env.spec import load_spec
    from megacpp_env.spec.discover import required_path

    return load_spec(required_path(args.spec))


def load_optional(args: argparse.Namespace) -> Spec | None:
    """The spec when its file exists (errors in it still fail); None on a machine without one.

    Verbs that also work without stack.yaml (snapshot, verify-checkout, overlay, diff) use this.
    """
    from megacpp_env.spec.discover import chosen_path

    path = chosen_path(args.spec)
    if path is None or not path.is_file():
        return None
    from megacpp_env.spec import load_spec

    return load_spec(path)
