"""`megacpp-env reproduce GOLDEN --venv DIR --checkouts DIR`: make the golden's environment again
elsewhere (checkouts with their uncommitted diffs, the venv, locally built wheels rebuilt) and prove
it against the golden; exit 0 only when identical."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from megacpp_env.commands._common import add_json, spec_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("golden", metavar="GOLDEN", help="a golden name (see snapshot --golden) or a snapshot file")
    parser.add_argument("--venv", metavar="DIR", type=Path, required=True, help="where to make the venv (new or empty)")
    parser.add_argument(
        "--checkouts", metavar="DIR", type=Path, required=True,
        help="where to re-create the checkouts (each at DIR/<basename of its original path>)",
    )  # fmt: skip
    parser.add_argument(
        "--mirror", metavar="DIR", type=Path,
        help="install wheels from DIR (a directory of wheels or a `mirror` store) and fetch sources from its "
        "source mirror instead of the indexes and remotes",
    )  # fmt: skip
    parser.add_argument("--python", metavar="PATH", help="the interpreter to make the venv with (default: found)")
    parser.add_argument("--golden-dir", metavar="DIR", type=Path, help="where golden snapshots live")
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.repro.reproduce import ReproduceOptions, reproduce_golden
    from megacpp_env.ui import Progress, print_json

    opts = ReproduceOptions(venv=args.venv, checkouts=args.checkouts, mirror=args.mirror, python=args.python)
    progress = Progress()
    try:
        # each step on the progress line while it runs
        report, text = reproduce_golden(
            args.golden, args.golden_dir, spec_path(args), opts, lambda line: progress.show(line, force=True)
        )
    finally:
        progress.close()
    if args.json:
        print_json({"ok": report.identical, **report.to_dict()})
    else:
        sys.stdout.write(text)
    return 0 if report.identical else 1
