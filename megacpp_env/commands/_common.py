"""Helpers shared by command modules: loading the spec named by ``--spec`` and a ``--json`` flag."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from megacpp_env.spec.model import Spec


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a machine-readable JSON report on stdout")


def load(args: argparse.Namespace) -> Spec:
    from megacpp_env.spec import load_spec

    return load_spec(args.spec)
