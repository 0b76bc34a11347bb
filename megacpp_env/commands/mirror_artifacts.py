"""``mirror-artifacts NAME --to DIR [--from URL] [--verify]``: fetch a pinned artifact set (FlashInfer's
cubins) and verify every file against the pinned checksums.txt; ``--verify`` checks a mirror offline."""

from __future__ import annotations

import argparse
from pathlib import Path

from megacpp_env.commands._common import add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="an artifact set under `artifacts:` in stack.yaml")
    parser.add_argument(
        "--to", required=True, metavar="DIR", help="the mirror directory (the set's env var points here)"
    )
    parser.add_argument("--from", dest="url", default="", metavar="URL", help="fetch from this mirror of the set's URL")
    parser.add_argument("--verify", action="store_true", help="only check DIR offline against the pins")
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.artifacts import mirror_and_verify
    from megacpp_env.ui import print_json

    dest = Path(args.to)
    done = mirror_and_verify(load(args), args.name, dest, url=args.url, verify_only=args.verify)
    name, result, problems = done.artifact.name, done.mirrored, done.problems
    if result is not None and not args.json:
        counts = f"{result.fetched} fetched, {result.kept} kept, {result.bytes} bytes"
        print(f"{name}: {result.files} files ({counts}) in {dest}")
    if args.json:
        print_json({"name": name, "dest": str(dest), "ok": not problems, "problems": problems})
    else:
        for p in problems:
            print(f"{name}: {p}")
        print(f"{name}: {'verified' if not problems else 'FAILED'}: {dest}")
    return 1 if problems else 0
