"""`megacpp-env diff A B`: explain the drift between two snapshots; exit 1 when anything outside
the ignore list (``--ignore`` and the spec's ``snapshot.ignore``) differs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from megacpp_env.commands._common import add_ignore, add_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", type=Path, metavar="A", help="the reference snapshot (e.g. the golden one)")
    parser.add_argument("b", type=Path, metavar="B", help="the snapshot to compare with it")
    parser.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    add_json(parser)
    add_ignore(parser, "finding keys to ignore")


def run(args: argparse.Namespace) -> int:
    from megacpp_env.commands._common import load_optional
    from megacpp_env.snapshot.report import explain_drift

    report, text = explain_drift(args.a, args.b, args.ignore, load_optional(args), "json" if args.json else args.format)
    sys.stdout.write(text)
    return 1 if report.drift else 0
