"""`megacpp-env mirror-sources TARGET... --to DIR`: every pinned source of the targets as local bare
git repositories (submodules at their pinned commits, declared build-time fetches too).

``--from URL=PATH`` fetches the source pinned at URL from PATH instead (a git bundle, a bare
repository, another mirror's repository): git's ``url.<PATH>.insteadOf=<URL>``, passed with ``-c``.
Default DIR: ./.megacpp/source-mirror (the one ``build`` mounts into source stages).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from megacpp_env.commands._common import add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="+", metavar="TARGET")
    parser.add_argument("--to", type=Path, default=None, metavar="DIR", help="the mirror directory")
    parser.add_argument(
        "--from", dest="rewrites", action="append", default=[], metavar="URL=PATH",
        help="fetch the repository pinned at URL from PATH (a bundle or repository); repeatable",
    )  # fmt: skip
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.sourceplans import mirror_targets
    from megacpp_env.ui import print_json

    say = None if args.json else (lambda line: print(line, file=sys.stderr, flush=True))
    dest, report = mirror_targets(load(args), args.targets, args.to, args.rewrites, progress=say)
    if args.json:
        print_json({"ok": True, "mirror": str(dest), "sources": [m.to_dict() for m in report]})
        return 0
    for m in report:
        repos = sum(len(c) for c in m.repos.values())
        print(f"{m.action}: {m.source}: {len(m.repos)} repositor{'y' if len(m.repos) == 1 else 'ies'}, {repos} pin(s)")
    print(f"source mirror: {dest}")
    return 0
