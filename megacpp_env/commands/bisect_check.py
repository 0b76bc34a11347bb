"""`megacpp-env bisect-check GOLDEN [--package NAME] [--worktree DIR]`: a `git bisect run` pre-check.
Exit 0 when the environment is the golden's (same snapshot digest, the project's package imported
from the worktree), 125 (skip) when it is not; its own errors exit 128, which aborts the bisect
instead of marking a commit bad."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from megacpp_env.commands._common import add_json, add_python, checked_python, spec_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("golden", metavar="GOLDEN", help="a golden name or a snapshot file")
    parser.add_argument("--package", metavar="NAME", help="the project's import name (default: from pyproject.toml)")
    parser.add_argument(
        "--worktree", metavar="DIR", type=Path, default=Path(), help="the worktree under bisect (default: .)"
    )
    parser.add_argument("--golden-dir", metavar="DIR", type=Path, help="where golden snapshots live")
    add_python(parser)
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.repro.bisect import check_golden
    from megacpp_env.ui import print_json

    ref, package, verdict = check_golden(
        args.golden, args.golden_dir, spec_path(args), worktree=args.worktree.resolve(), package=args.package,
        python=checked_python(args.python),
    )  # fmt: skip
    if args.json:
        print_json(verdict.to_dict())
    else:
        state = "matches" if verdict.match else "does NOT match (skip: exit 125)"
        print(f"bisect-check {ref.name}: environment {state}; {package} from {verdict.origin or '(nowhere)'}")
        for problem in verdict.problems:
            print(f"  {problem}", file=sys.stderr)
    return verdict.exit_code
