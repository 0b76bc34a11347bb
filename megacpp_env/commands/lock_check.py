"""``lock check [TARGET...]``: verify the committed locks against the spec, offline: no network, no
uv (the pre-commit hook and the lock-gate action run it). Exit 1 when a lock is missing, stale or
unlocked (``--allow-unlocked``: reported, not failed), or a consistency group diverges."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_flag, add_json, load
from megacpp_env.commands.lock import add_selection


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_selection(parser)
    add_json(parser)
    add_flag(parser, "--allow-unlocked", "report, but do not fail on, targets whose index is unreachable here and "
             "that have no lock yet")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from megacpp_env.lock.offline import Selection, check_committed
    from megacpp_env.ui import QUIET, settings

    selection = Selection(names=tuple(args.names), platforms=tuple(args.platform))
    checked = check_committed(load(args), selection, allow_unlocked=args.allow_unlocked)
    sys.stdout.write(checked.render("json" if args.json else "text", quiet=settings().verbosity <= QUIET))
    return 0 if checked.ok else 1
