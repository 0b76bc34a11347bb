"""`megacpp-env snapshot`: fingerprint this machine and the environment a user means.

Inspects the active virtual environment (or ``--python``), not only the tool's own interpreter.
Works without a stack.yaml; with one, it also inspects the spec's source checkouts and uses its
golden directory. ``--check-golden NAME`` exits 1 (printing the diff) when the machine drifted.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from megacpp_env.snapshot.document import Snapshot
    from megacpp_env.spec.model import Spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", metavar="FILE", type=Path, help="write the snapshot document to FILE")
    parser.add_argument("--json", action="store_true", help="print the snapshot document on stdout")
    parser.add_argument("--golden", metavar="NAME", help="also store the snapshot as golden NAME")
    parser.add_argument("--check-golden", metavar="NAME", help="diff against golden NAME; exit 1 on drift")
    parser.add_argument(
        "--golden-dir",
        metavar="DIR",
        type=Path,
        help="where golden snapshots live (default: the spec's snapshot.golden_dir)",
    )
    parser.add_argument(
        "--ignore",
        metavar="PATTERN",
        nargs="+",
        default=[],
        help="finding keys to ignore for --check-golden (fnmatch, e.g. 'gpu' 'env.NCCL_*')",
    )
    parser.add_argument(
        "--paths", metavar="DIR", nargs="+", type=Path, default=[], help="more source checkouts to inspect"
    )
    parser.add_argument(
        "--python", metavar="PATH", help="the interpreter to inspect (default: $VIRTUAL_ENV's, else the tool's own)"
    )
    parser.add_argument(
        "--torch",
        action="store_true",
        help="import torch in a subprocess for its build facts and loaded CUDA libraries",
    )
    parser.add_argument("--no-cache", action="store_true", help="re-hash every installed file")


def load_optional_spec(path: str) -> Spec | None:
    """The spec when the file exists (errors in it still fail); None on a machine without one."""
    if not Path(path).is_file():
        return None
    from megacpp_env.spec import load_spec

    return load_spec(Path(path))


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


def run(args: argparse.Namespace) -> int:
    from megacpp_env.fsutil import atomic_write_text

    loader = functools.cache(lambda: load_optional_spec(args.spec))
    snap = take(args, None, loader)
    spec = loader()  # cached; raises here if the spec is broken
    if args.output:
        atomic_write_text(args.output, snap.to_json())
    if args.json:
        sys.stdout.write(snap.to_json())
    from megacpp_env.snapshot import golden

    directory = golden.golden_dir(spec, args.golden_dir)
    if args.golden:
        path, _changed = golden.store_golden(snap, directory, args.golden)
        print(f"golden {args.golden} stored: {path}", file=sys.stderr if args.json else sys.stdout)
    if not args.json:
        sys.stdout.write(summary(snap))
    if args.check_golden:
        return _check(snap, directory, args, spec)
    return 0


def _check(snap: Snapshot, directory: Path, args: argparse.Namespace, spec: Spec | None) -> int:
    from megacpp_env.snapshot import golden
    from megacpp_env.snapshot.report import render

    ignore = [*args.ignore, *(spec.snapshot.ignore if spec else ())]
    report = golden.check_golden(snap, directory, args.check_golden, ignore=ignore)
    stream = sys.stderr if args.json else sys.stdout
    stream.write(render(report, "text"))
    return 1 if report.drift else 0
