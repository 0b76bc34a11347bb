"""`megacpp-env doctor TARGET`: the live machine against what a target promises; exit 1 on errors."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from megacpp_env.commands._common import add_json, add_python, checked_python, load
from megacpp_env.commands._snapshot import inspected_python, snapshot_of


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="a target of the spec (e.g. gb10, cloud)")
    add_json(parser)
    parser.add_argument(
        "--snapshot", metavar="FILE", type=Path, help="check this snapshot instead of taking a live one"
    )
    add_python(parser)
    parser.add_argument("--torch", action="store_true", help="import torch for its cuDNN/NCCL and loaded libraries")
    parser.add_argument(
        "--paths",
        metavar="DIR",
        action="append",
        type=Path,
        default=[],
        help="another checkout to inspect (repeatable: one DIR per use, so it never takes TARGET)",
    )


def run(args: argparse.Namespace) -> int:
    from megacpp_env.doctor import run_doctor
    from megacpp_env.ui import print_json

    python = checked_python(args.python)
    spec = load(args)
    spec.target(args.target)  # an unknown target fails before any snapshot is taken
    snap = snapshot_of(args, python, spec=spec)
    report = run_doctor(spec, args.target, snap)
    if args.json:
        print_json({**report.to_dict(), "snapshot_digest": snap.digest, "inspected_python": inspected_python(snap)})
    else:
        sys.stdout.write(report.render_text())
    return 0 if report.ok else 1
