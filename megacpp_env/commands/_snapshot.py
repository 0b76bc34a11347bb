"""Taking (or, ``--snapshot FILE``, reading) a snapshot from a verb's parsed arguments (``snapshot``,
``doctor``), and saying which
interpreter it inspected. The plan is resolved and launched (``snapshot.plan``: the speculative
verification and the NVML reader start) before the collectors are imported: hashing the largest
installed files is the critical path, and the imports overlap it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from megacpp_env.snapshot.document import Snapshot
    from megacpp_env.spec.model import Spec


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


def take(
    args: argparse.Namespace,
    python: str | None,
    *,
    spec: Spec | None = None,
    load_spec: Callable[[], Spec | None] | None = None,
) -> Snapshot:
    """The snapshot the arguments ask for; ``load_spec`` (instead of ``spec``) lets a collector
    thread load the spec off the critical path. On a terminal (not CI, not --json, not -q) one
    status line says what it is still waiting for."""
    from megacpp_env.cmdline import redact_argv
    from megacpp_env.snapshot.context import SnapshotOptions
    from megacpp_env.snapshot.plan import launch, resolve
    from megacpp_env.spec.discover import chosen_path
    from megacpp_env.ui import Progress

    progress = Progress(enabled=False if getattr(args, "json", False) else None)
    opts = SnapshotOptions(
        python=python,
        paths=tuple(args.paths),
        spec=spec,
        spec_path=None if spec is not None else chosen_path(getattr(args, "spec", None)),
        load_spec=load_spec,
        import_torch=args.torch,
        use_cache=not getattr(args, "no_cache", False),
        repo=getattr(args, "repo", None),
        command=" ".join(["megacpp-env", *redact_argv(sys.argv[1:])]),
        on_progress=_reporter(progress) if progress.enabled else None,
    )
    plan = resolve(opts)
    with launch(plan) as started:
        from megacpp_env.snapshot.collect import take_snapshot

        with progress:
            snap = take_snapshot(opts, plan=plan, started=started)
    say_inspected_python(snap)
    return snap


def snapshot_of(args: argparse.Namespace, python: str | None, *, spec: Spec | None) -> Snapshot:
    """``--snapshot FILE`` read (and the interpreter it inspected said), else a live snapshot."""
    if getattr(args, "snapshot", None) is None:
        return take(args, python, spec=spec)
    from megacpp_env.snapshot.document import load_snapshot

    snap = load_snapshot(args.snapshot)
    say_inspected_python(snap)
    return snap


def _reporter(progress: object) -> Callable[[tuple[str, ...], float], None]:
    from megacpp_env.snapshot.registry import label

    def report(pending: tuple[str, ...], seconds: float) -> None:
        progress.show(f"snapshot {seconds:4.1f}s: {', '.join(label(n) for n in pending)}")  # type: ignore[attr-defined]

    return report
