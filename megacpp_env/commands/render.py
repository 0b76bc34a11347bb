"""`megacpp-env render [TARGET...] [--check]`: write or verify images/<target>/Dockerfile."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="*", metavar="TARGET", help="targets to render (default: all)")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 with a unified diff if a file is stale"
    )
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env import render
    from megacpp_env.ui import print_json

    spec = load(args)
    files = render.render_all(spec, args.targets)
    if args.check:
        stale = render.staleness(spec.root, files)
        if args.json:
            print_json({"stale": [{"path": s.relpath, "diff": s.diff} for s in stale], "ok": not stale})
        else:
            for s in stale:
                sys.stdout.write(s.diff)
            for s in stale:
                print(f"stale: {s.relpath} (run `megacpp-env render` and commit the result)", file=sys.stderr)
        return 1 if stale else 0
    changed = render.write(spec.root, files)
    if args.json:
        print_json({"written": changed, "unchanged": [f.relpath for f in files if f.relpath not in changed]})
    else:
        for f in files:
            print(f"{'wrote' if f.relpath in changed else 'unchanged'}: {f.relpath}")
    return 0
