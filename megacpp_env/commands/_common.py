"""Helpers shared by command modules: loading the spec named by ``--spec``, options several verbs
share (``--json``, ``--python``, ``--ignore``), and turning parsed arguments into the typed options
of a snapshot. ``argparse.Namespace`` stops here: domain code takes typed parameters."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from megacpp_env.snapshot.document import Snapshot
    from megacpp_env.spec.model import Spec


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print a machine-readable JSON report on stdout")


def load(args: argparse.Namespace) -> Spec:
    """The spec named by ``--spec``, ``$MEGACPP_ENV_SPEC`` or found upward from the working directory."""
    from megacpp_env.spec import load_spec
    from megacpp_env.spec.discover import required_path

    return load_spec(required_path(args.spec))


def load_optional(args: argparse.Namespace) -> Spec | None:
    """The spec when its file exists (errors in it still fail); None on a machine without one.

    Verbs that also work without stack.yaml (snapshot, verify-checkout, overlay, diff) use this.
    """
    from megacpp_env.spec.discover import chosen_path

    path = chosen_path(args.spec)
    if path is None or not path.is_file():
        return None
    from megacpp_env.spec import load_spec

    return load_spec(path)


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
        "--python",
        metavar="PATH",
        help="the interpreter to inspect (default: $VIRTUAL_ENV's, else the first python3 on PATH)",
    )


def inspected_python(snap: Snapshot) -> dict[str, str]:
    """Which interpreter a snapshot inspected and why (``--json`` reports carry it)."""
    return {
        "path": str(snap.host.get("inspected_python") or ""),
        "reason": str(snap.host.get("inspected_python_reason") or ""),
    }


def say_inspected_python(snap: Snapshot) -> None:
    """One stderr line, unless -q: the interpreter inspected, why, and how to pick another (the snapshot
    and `doctor --json` carry it too)."""
    from megacpp_env.snapshot.interpreter import PICK_ANOTHER
    from megacpp_env.ui import QUIET, settings

    if settings().verbosity <= QUIET:
        return
    found = inspected_python(snap)
    why = f" ({found['reason']})" if found["reason"] else ""
    print(f"megacpp-env: inspected {found['path']}{why}; {PICK_ANOTHER}", file=sys.stderr)


def checked_python(python: str | None) -> str | None:
    """An explicit ``--python`` that is not an executable file is a user error, before anything runs."""
    if not python:
        return None
    from megacpp_env.snapshot.interpreter import check_interpreter

    return check_interpreter(python)


def take(
    args: argparse.Namespace,
    python: str | None,
    *,
    spec: Spec | None = None,
    load_spec: Callable[[], Spec | None] | None = None,
) -> Snapshot:
    """The snapshot the arguments ask for; ``load_spec`` (instead of ``spec``) lets a collector
    thread load the spec off the critical path. On a terminal (not CI, not --json, not -q) one
    status line says what it is still waiting for. Verification starts first (``snapshot.early``),
    before the collectors are imported: hashing the largest installed files is the critical path."""
    from megacpp_env.snapshot import early

    try:
        early.start(python, use_cache=not getattr(args, "no_cache", False))
        return _take(args, python, spec=spec, load_spec=load_spec)
    finally:
        early.discard()  # a run the snapshot did not take (another interpreter, an error) is stopped


def _take(
    args: argparse.Namespace, python: str | None, *, spec: Spec | None, load_spec: Callable[[], Spec | None] | None
) -> Snapshot:
    from megacpp_env.snapshot.collect import SnapshotOptions, take_snapshot
    from megacpp_env.ui import Progress

    progress = Progress(enabled=False if getattr(args, "json", False) else None)

    def report(pending: tuple[str, ...], seconds: float) -> None:
        progress.show(f"snapshot {seconds:4.1f}s: {', '.join(WAITING_FOR.get(n, n) for n in pending)}")

    from megacpp_env.cmdline import redact_argv

    opts = SnapshotOptions(
        python=python,
        paths=tuple(args.paths),
        spec=spec,
        load_spec=load_spec,
        import_torch=args.torch,
        use_cache=not getattr(args, "no_cache", False),
        repo=getattr(args, "repo", None),
        command=" ".join(["megacpp-env", *redact_argv(sys.argv[1:])]),
        on_progress=report if progress.enabled else None,
    )
    with progress:
        snap = take_snapshot(opts)
    say_inspected_python(snap)
    return snap


WAITING_FOR = {
    "python": "verifying installed files",
    "torch": "torch",
    "checkouts": "checkouts",
    "gpu": "GPUs",
    "repo": "training repository",
}
