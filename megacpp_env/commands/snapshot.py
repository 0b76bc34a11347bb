"""`megacpp-env snapshot`: fingerprint this machine and the environment a user means.

Inspects the active virtual environment (or ``--python``), not only the tool's own interpreter.
Works without a stack.yaml; with one, it also inspects the spec's source checkouts and uses its
golden directory. ``--repo`` names the training repository (default: the git work tree of the
working directory), recorded outside the digest. ``--schema`` prints the published JSON Schema of
the document and takes no snapshot. ``--check-golden NAME`` exits 1 (printing the diff) when the machine drifted.
Every argument that can be wrong (``--python``, ``--output``, the golden names, the golden to
check against) is checked before the snapshot is taken.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from megacpp_env.commands._common import add_ignore, add_json, add_python, checked_python, spec_path
from megacpp_env.commands._snapshot import take

if TYPE_CHECKING:
    from megacpp_env.snapshot.document import Snapshot
    from megacpp_env.spec.model import Spec

# The program exits without the interpreter's teardown once this verb is done (``cli.entry``): its
# document is written and synced, its children reaped.
FAST_EXIT = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", metavar="FILE", type=Path, help="write the snapshot document to FILE")
    add_json(parser)
    parser.add_argument("--golden", metavar="NAME", help="also store the snapshot as golden NAME")
    parser.add_argument("--check-golden", metavar="NAME", help="diff against golden NAME; exit 1 on drift")
    parser.add_argument(
        "--golden-dir", metavar="DIR", type=Path,
        help="where golden snapshots live (default: the spec's snapshot.golden_dir)",
    )  # fmt: skip
    add_ignore(parser, "finding keys to ignore for --check-golden")
    parser.add_argument(
        "--paths", metavar="DIR", nargs="+", action="extend", type=Path, default=[],
        help="more source checkouts to inspect (repeatable)",
    )  # fmt: skip
    add_python(parser)
    parser.add_argument(
        "--torch",
        action="store_true",
        help="import torch in a subprocess for its build facts and loaded CUDA libraries",
    )  # fmt: skip
    parser.add_argument("--no-cache", action="store_true", help="re-hash every installed file")
    parser.add_argument(
        "--export-lock", metavar="FILE", type=Path,
        help="also write a PEP 751 lock (pylock.toml or pylock.NAME.toml) of the distributions this box runs",
    )  # fmt: skip
    parser.add_argument(
        "--repo", metavar="PATH", type=Path,
        help="the training repository to record (commit, dirty state, diff digest; not in the digest); "
        "default: the git work tree of the working directory",
    )  # fmt: skip
    parser.add_argument("--schema", action="store_true", help="print the JSON Schema of the snapshot document and exit")
    parser.add_argument("--timings", action="store_true", help="print where the time went (per collector) to stderr")


def run(args: argparse.Namespace) -> int:
    from megacpp_env.repro.session import SnapshotRequest, session
    from megacpp_env.ui import QUIET, settings

    python = None if args.schema else checked_python(args.python)

    def taker(repo: Path | None, load_spec: Callable[[], Spec | None]) -> Snapshot:
        """The snapshot with this command's options and progress line (the session checks ``repo``)."""
        return take(argparse.Namespace(**{**vars(args), "repo": repo}), python, load_spec=load_spec)

    done = session(
        SnapshotRequest(
            take=taker, spec_path=spec_path(args), schema=args.schema, repo=args.repo, output=args.output,
            export_lock=args.export_lock, golden=args.golden, check_golden=args.check_golden,
            golden_dir=args.golden_dir, ignore=tuple(args.ignore),
        )
    )  # fmt: skip
    if done.snapshot is None:
        sys.stdout.write(done.schema)
        return 0
    out, err = (sys.stderr, sys.stderr) if args.json else (sys.stdout, sys.stderr)  # --json: stdout is the document
    if args.json:
        sys.stdout.write(done.snapshot.to_json())
    out.writelines(f"{note}\n" for note in done.notes)
    if not args.json and settings().verbosity > QUIET:
        sys.stdout.write(done.summary())
    if args.timings:
        err.write(done.timings())
    err.writelines(f"megacpp-env snapshot: error: incomplete: {line}\n" for line in done.failed)
    out.write(done.drift())
    return done.exit_code
