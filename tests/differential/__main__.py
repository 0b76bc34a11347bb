"""``python -m tests.differential [--tool-root DIR | --commit REV] [--scale X] [--only TEXT]``:
run the corpus against one tool copy, one line per mutation, then the per-class table; every
failing mutation's report goes to ``--reports FILE``. Exit 1 when any mutation failed."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.differential.corpus import GROUPS, corpus, run_all, table
from tests.differential.engine import Outcome
from tests.differential.harness import REPO_ROOT, Harness, tool_at


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.differential", description=__doc__)
    parser.add_argument("--tool-root", type=Path, default=REPO_ROOT, help="a directory holding megacpp_env/")
    parser.add_argument("--commit", help="run the tool as it was at this commit instead (git archive)")
    parser.add_argument(
        "--scale", type=float, default=None, help="budget multiplier (default $MEGACPP_DIFF_SCALE or 1)"
    )
    parser.add_argument("--most", type=int, default=None, help="at most this many mutations per class")
    parser.add_argument("--only", action="append", default=[], help="classes whose name contains this (repeatable)")
    parser.add_argument("--reports", type=Path, help="write every failing mutation's report here")
    return parser.parse_args()


def main() -> int:
    args = _args()
    groups = [g for g in GROUPS if not args.only or any(o in g.name for o in args.only)]
    mutations = corpus(groups, factor=args.scale, most=args.most)
    print(f"{len(mutations)} mutations in {len(groups)} classes", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="megacpp-differential-") as tmp:
        base = Path(tmp)
        tool = tool_at(args.commit, base / "tool") if args.commit else args.tool_root
        harness = Harness.build(base)
        with harness.engines(tool, "tool") as engines:
            outcomes = run_all(engines, mutations, progress=_progress)
    print(table(outcomes))
    failed = [o for o in outcomes if not o.ok]
    if args.reports:
        args.reports.write_text("\n\n".join(o.report() for o in failed) + "\n")
    return 1 if failed else 0


def _progress(outcome: Outcome) -> None:
    print(f"{outcome.verdict():<40.40} {outcome.label}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
