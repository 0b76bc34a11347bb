"""``lock resolve [TARGET...]``: resolve per-target, per-platform locks with uv and write them; what
moved against the committed lock is listed (``megacpp-env lock --help`` for the forms)."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_flag, add_json, load
from megacpp_env.commands.lock import add_selection


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_selection(parser)
    add_json(parser)
    add_flag(parser, "--align", "re-resolve diverging locks constrained by their group's first lock")
    add_flag(parser, "--try-unreachable", "resolve targets even if their index is marked reachable_here: false")
    add_flag(parser, "--upgrade", "resolve from scratch: the committed lock pins nothing")
    parser.add_argument(
        "--upgrade-package", action="append", default=[], metavar="NAME",
        help="let NAME move to its newest allowed version (and what that forces); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--exclude-newer", metavar="DATE",
        help="ignore files uploaded after DATE (recorded in the lock, kept by later runs; none drops it)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from megacpp_env.lock.offline import Selection
    from megacpp_env.lock.workflow import ResolveRequest, resolve_locks
    from megacpp_env.ui import Progress

    request = ResolveRequest(
        selection=Selection(names=tuple(args.names), platforms=tuple(args.platform)), align=args.align,
        try_unreachable=args.try_unreachable, upgrade=args.upgrade, upgrade_packages=tuple(args.upgrade_package),
        exclude_newer=args.exclude_newer,
    )  # fmt: skip
    done = resolve_locks(load(args), request, progress=Progress)
    sys.stdout.write(done.render("json" if args.json else "text"))
    return 0 if done.ok else 1
