"""`megacpp-env render [TARGET...] [--check]`: write or verify images/<target>/Dockerfile."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_flag, add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="*", metavar="TARGET", help="targets to render (default: all)")
    add_flag(parser, "--check", "write nothing; exit 1 with a unified diff if a file is stale")
    add_flag(parser, "--fail-on-write", "exit 1 when a file was written (a pre-commit fixer: the fixed files are "
             "then reviewed and staged)")  # fmt: skip
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env import render
    from megacpp_env.ui import QUIET, paint, paint_diff, print_json, settings

    done = render.render_or_check(load(args), args.targets, check_only=args.check)
    files, stale, changed = done.files, done.stale, done.written
    if args.check:
        if args.json:
            print_json({"stale": [{"path": s.relpath, "diff": s.diff} for s in stale], "ok": not stale})
        else:
            for s in stale:
                sys.stdout.write(paint_diff(s.diff))
            for s in stale:
                stale_word = paint("stale", "error", stream=sys.stderr)
                print(f"{stale_word}: {s.relpath} (run `megacpp-env render` and commit the result)", file=sys.stderr)
        return 1 if stale else 0
    if args.json:
        print_json({"written": changed, "unchanged": [f.relpath for f in files if f.relpath not in changed]})
    else:
        for f in files:
            if f.relpath in changed:
                print(f"{paint('wrote', 'ok')}: {f.relpath}")
            elif settings().verbosity > QUIET:
                print(f"unchanged: {f.relpath}")
    return 1 if changed and args.fail_on_write else 0
