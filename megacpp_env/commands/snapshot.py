"""`megacpp-env snapshot`: fingerprint this machine and the environment a user means.

Inspects the active virtual environment (or ``--python``), not only the tool's own interpreter.
Works without a stack.yaml; with one, it also inspects the spec's source checkouts and uses its
golden directory. ``--check-golden NAME`` exits 1 (printing the diff) when the machine drifted.
Every argument that can be wrong (``--python``, ``--output``, the golden names, the golden to
check against) is checked before the snapshot is taken.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from megacpp_env.commands._common import add_json

if TYPE_CHECKING:
    from megacpp_env.snapshot.document import Snapshot
    from megacpp_env.spec.model import Spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", metavar="FILE", type=Path, help="write the snapshot document to FILE")
    add_json(parser)
    parser.add_argument("--golden", metavar="NAME", help="also store the snapshot as golden NAME")
    parser.add_argument("--check-golden", metavar="NAME", help="diff against golden NAME; exit 1 on drift")
    parser.add_argument(
        "--golden-dir",
        metavar="DIR",
        type=Path,
        help="where golden snapshots live (default: the spec's snapshot.golden_dir)",
    )
    add_ignore(parser, "finding keys to ignore for --check-golden")
    parser.add_argument(
        "--paths",
        metavar="DIR",
        nargs="+",
        action="extend",
        type=Path,
        default=[],
        help="more source checkouts to inspect (repeatable)",
    )
    add_python(parser)
    parser.add_argument(
        "--torch",
        action="store_true",
        help="import torch in a subprocess for its build facts and loaded CUDA libraries",
    )
    parser.add_argument("--no-cache", action="store_true", help="re-hash every installed file")


def add_ignore(parser: argparse.ArgumentParser, what: str) -> None:
    """``--ignore PATTERN``, one pattern per use (repeatable), so it never swallows a positional."""
    parser.add_argument(
        "--ignore",
        metavar="PATTERN",
        action="append",
        default=[],
        help=f"{what} (fnmatch on the key and its prefixes, e.g. 'gpu', 'env.NCCL_*'; repeatable)",
    )


def add_python(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--python", metavar="PATH", help="the interpreter to inspect (default: $VIRTUAL_ENV's, else the tool's own)"
    )


def check_python(args: argparse.Namespace) -> None:
    """An explicit ``--python`` that is not an executable file is a user error, before anything runs."""
    if args.python:
        from megacpp_env.snapshot.python_env import check_interpreter

        args.python = check_interpreter(args.python)


def take(args: argparse.Namespace, spec: Spec | None, load_spec: Callable[[], Spec | None] | None = None) -> Snapshot:
    """``load_spec`` (instead of ``spec``) lets the snapshot load the spec in a collector thread."""
    from megacpp_env.snapshot.collect import SnapshotOptions, take_snapshot

    opts = SnapshotOptions(
        python=args.python,
        paths=tuple(args.paths),
        spec=spec,
        load_spec=load_spec,
        import_torch=args.torch,
        use_cache=not getattr(args, "no_cache", False),
        command=" ".join(["megacpp-env", *sys.argv[1:]]),
    )
    return take_snapshot(opts)


def summary(snap: Snapshot) -> str:
    py = snap.area("python")
    dists = py.get("distributions") or {}
    drifted = sorted(d["name"] for d in dists.values() if (d.get("integrity") or {}).get("status") == "drifted")
    gpus = snap.area("gpu").get("devices") or []
    errors = sorted(name for name, area in snap.facts.items() if isinstance(area, dict) and "error" in area)
    lines = [
        f"snapshot {snap.digest}",
        f"  python {(py.get('interpreter') or {}).get('version', '?')}: {len(dists)} distributions, "
        f"{snap.timing.get('integrity', {}).get('files', 0)} files verified, "
        f"{len(drifted)} with drift{': ' + ', '.join(drifted) if drifted else ''}",
        f"  gpu: {', '.join(str(g.get('name')) for g in gpus) or 'none'}",
        f"  checkouts: {len(snap.area('checkouts'))}",
    ]
    if errors:
        lines.append(f"  collectors that failed: {', '.join(errors)}")
    lines.append(f"  took {snap.timing.get('total', 0):.2f}s")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class Golden:
    """The golden directory and, for ``--check-golden``, the stored reference (loaded up front)."""

    directory: Path
    reference: Snapshot | None = None


def prepare_golden(args: argparse.Namespace, spec: Callable[[], Spec | None]) -> Golden | None:
    """Resolve the golden directory, validate the names and load the golden to check against."""
    if not (args.golden or args.check_golden):
        return None
    from megacpp_env.snapshot import golden

    directory = golden.golden_dir(spec() if args.golden_dir is None else None, args.golden_dir)
    if args.golden:
        golden.golden_path(directory, args.golden)
    reference = golden.load_golden(directory, args.check_golden) if args.check_golden else None
    return Golden(directory=directory, reference=reference)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.commands._common import load_optional
    from megacpp_env.snapshot.document import check_output, write_snapshot

    check_python(args)
    output = check_output(args.output) if args.output else None
    loader = functools.cache(lambda: load_optional(args))
    gold = prepare_golden(args, loader)
    snap = take(args, None, loader)
    spec = loader()  # cached; raises here if the spec is broken
    if output is not None:
        write_snapshot(snap, output)
    if args.json:
        sys.stdout.write(snap.to_json())
    if args.golden and gold is not None:
        from megacpp_env.snapshot import golden

        path, _changed = golden.store_golden(snap, gold.directory, args.golden)
        print(f"golden {args.golden} stored: {path}", file=sys.stderr if args.json else sys.stdout)
    if not args.json:
        sys.stdout.write(summary(snap))
    if gold is not None and gold.reference is not None:
        return _check(snap, gold.reference, args, spec)
    return 0


def _check(snap: Snapshot, reference: Snapshot, args: argparse.Namespace, spec: Spec | None) -> int:
    from megacpp_env.snapshot import golden
    from megacpp_env.snapshot.report import render

    ignore = [*args.ignore, *(spec.snapshot.ignore if spec else ())]
    report = golden.check_golden(snap, reference, args.check_golden, ignore=ignore)
    stream = sys.stderr if args.json else sys.stdout
    stream.write(render(report, "text"))
    return 1 if report.drift else 0
