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
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from megacpp_env.commands._common import add_ignore, add_json, add_python, checked_python, load_optional, take

if TYPE_CHECKING:
    from megacpp_env.repro.export import ExportedLock
    from megacpp_env.snapshot.document import Snapshot


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


def run(args: argparse.Namespace) -> int:
    from megacpp_env.repro.export import check_lock_path, export_lock
    from megacpp_env.snapshot import golden
    from megacpp_env.snapshot.document import check_output, json_schema, write_snapshot
    from megacpp_env.snapshot.repo import check_repo
    from megacpp_env.snapshot.report import render, render_summary
    from megacpp_env.ui import QUIET, settings

    if args.schema:
        sys.stdout.write(json_schema())
        return 0
    python = checked_python(args.python)
    args.repo = check_repo(args.repo) if args.repo is not None else None
    output = check_output(args.output) if args.output else None
    lock_file = check_lock_path(args.export_lock) if args.export_lock else None
    loader = functools.cache(lambda: load_optional(args))
    gold = golden.prepare(store=args.golden, check=args.check_golden, directory=args.golden_dir, spec=loader)
    snap = take(args, python, load_spec=loader)
    spec = loader()  # cached; raises here if the spec is broken
    if output is not None:
        write_snapshot(snap, output)
    if args.json:
        sys.stdout.write(snap.to_json())
    exported = export_lock(snap, lock_file) if lock_file is not None else None
    if exported is not None:
        print(f"lock of this environment written: {lock_file}", file=sys.stderr if args.json else sys.stdout)
    if args.golden and gold is not None:
        _store_golden(snap, gold.directory, args.golden, exported, sys.stderr if args.json else sys.stdout)
    if not args.json and settings().verbosity > QUIET:
        sys.stdout.write(render_summary(snap))
    if gold is None or gold.reference is None:
        return 0
    ignore = golden.ignore_patterns(args.ignore, spec)
    report = golden.check_golden(snap, gold.reference, args.check_golden, ignore=ignore)
    (sys.stderr if args.json else sys.stdout).write(render(report, "text"))
    return 1 if report.drift else 0


def _store_golden(snap: Snapshot, directory: Path, name: str, exported: ExportedLock | None, out: TextIO) -> None:
    """The golden document, then its capture (diffs, untracked files, distributions) beside it."""
    from megacpp_env.repro.capture import store_capture
    from megacpp_env.snapshot import golden

    path, _changed = golden.store_golden(snap, directory, name)
    artifacts = exported.artifacts if exported else None
    capture_file, capture = store_capture(
        snap, path, name, artifacts=artifacts, artifacts_from=exported.path if exported else ""
    )
    print(f"golden {name} stored: {path} (capture: {capture_file})", file=out)
    for problem in capture.problems:
        print(f"  not captured: {problem}", file=out)
