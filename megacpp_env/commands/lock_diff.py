"""``lock diff OLD NEW``: explain the changes between two locks (PEP 751 or pip-compile requirements
with hashes). Exit 0 when both files are readable: it explains; ``gate`` enforces."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_json

FORMATS = ("text", "markdown", "json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", metavar="OLD", help="the old lock")
    parser.add_argument("new", metavar="NEW", help="the new lock")
    parser.add_argument("--format", choices=FORMATS, default="text", help="output format (default: text)")
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.lock.diff import diff_files

    sys.stdout.write(diff_files(args.old, args.new).render("json" if args.json else args.format))
    return 0
