"""``lock export [TARGET...]``: re-write the pip ``--require-hashes`` exports from the committed locks,
offline. Exit 1 when a selected lock is missing (nothing to export from)."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_json, load
from megacpp_env.commands.lock import add_selection


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_selection(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.lock.offline import Selection, export_committed

    done = export_committed(load(args), Selection(names=tuple(args.names), platforms=tuple(args.platform)))
    sys.stdout.write(done.render("json" if args.json else "text"))
    sys.stderr.write(done.problems())
    return 0 if done.ok else 1
