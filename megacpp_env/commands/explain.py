"""`megacpp-env explain CODE...`: the documentation of a finding code (a policy rule, the spec's own
errors, the lock gate, doctor, diff, the facts and dependency checks), from its family's registry,
with an example and how to silence it. ``--list`` lists every code; ``--all`` documents every code
(``--format markdown`` is docs/CODES.md)."""

from __future__ import annotations

import argparse
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("code", nargs="*", metavar="CODE", help="a finding code, e.g. TC005, SP002, LG004")
    parser.add_argument("--all", action="store_true", help="document every code")
    parser.add_argument("--list", action="store_true", help="one line per code: code, severity, summary")
    parser.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    parser.add_argument("--json", action="store_true", help="the same as --format json")


def run(args: argparse.Namespace) -> int:
    from megacpp_env.codes import explain
    from megacpp_env.errors import UsageError
    from megacpp_env.findings.formats import render_docs

    if not (args.code or args.all or args.list):
        raise UsageError("name a CODE (e.g. TC005), or --list or --all", remedy="megacpp-env explain --list")
    docs = explain(args.code, every=args.all or args.list)
    sys.stdout.write(render_docs(docs, "json" if args.json else "list" if args.list else args.format))
    return 0
