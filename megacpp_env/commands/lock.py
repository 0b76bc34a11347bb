"""``lock [TARGET...]``: resolve per-target, per-platform locks with uv; ``--check`` verifies them
offline; ``lock diff OLD NEW`` explains the changes between two lock files."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from megacpp_env.commands._common import add_json

if TYPE_CHECKING:
    from megacpp_env.lock.consistency import GroupReport
    from megacpp_env.lock.pylock import Lock
    from megacpp_env.lock.resolve import Resolved
    from megacpp_env.lock.state import LockJob
    from megacpp_env.spec.model import Spec

EPILOG = """\
forms:
  megacpp-env lock [TARGET...] [--platform P] [--align] [--json]   resolve with uv, write locks/
  megacpp-env lock --check [TARGET...] [--allow-unlocked] [--json]  verify offline (no network, no uv)
  megacpp-env lock --export-requirements [TARGET...]               re-write the pip exports offline
  megacpp-env lock diff OLD NEW [--format text|markdown|json]      explain changes (PEP 751 or requirements.txt)

files: locks/pylock.<target>.<os-arch>.toml (PEP 751) and locks/<target>.<os-arch>.requirements.txt
  (pip install --require-hashes --no-deps -r ...). A target whose explicit index is marked
  reachable_here: false is skipped by `lock` and reported by `--check` as
  "unlocked: index NAME (URL) unreachable here" until its lock is committed.

exit codes: 0 ok; 1 a lock is missing/stale/unlocked, locks diverge (lock), or a uv/spec error;
  lock diff: 0 always when both files are readable (it explains; `gate` enforces), 1 when one is not;
  2 usage (a missing OLD/NEW, two modes at once, --format without diff).
"""

FORMATS = ("text", "markdown", "json")
MODES = (("--check", "check"), ("--export-requirements", "export_requirements"), ("--align", "align"))
LOCK_ONLY = (
    *MODES,
    ("--platform", "platform"),
    ("--allow-unlocked", "allow_unlocked"),
    ("--try-unreachable", "try_unreachable"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    _add_options(parser)
    parser.add_argument("--format", choices=FORMATS, help="lock diff only: output format (default: text)")
    # REMAINDER: argparse cannot parse options that follow a variable list of positionals, nor a
    # sub-verb next to TARGET...; run() parses what follows the first TARGET (or `diff`) itself.
    parser.add_argument(
        "names", nargs=argparse.REMAINDER, metavar="TARGET", help="targets (default: all); or: diff OLD NEW"
    )


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--platform", action="append", metavar="P", help="only this platform (repeatable)")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--check", action="store_true", help="verify locks offline against the spec")
    modes.add_argument(
        "--export-requirements",
        action="store_true",
        help="only re-write the requirements exports from the existing locks (offline)",
    )
    modes.add_argument(
        "--align", action="store_true", help="re-resolve diverging locks constrained by their group's first lock"
    )
    parser.add_argument(
        "--allow-unlocked",
        action="store_true",
        help="with --check: report, but do not fail on, "
        "targets whose index is unreachable here and that have no lock yet",
    )
    parser.add_argument(
        "--try-unreachable",
        action="store_true",
        help="resolve targets even if their index is marked reachable_here: false",
    )
    add_json(parser)


def _targets_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="megacpp-env lock", epilog=EPILOG)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--spec", metavar="PATH", help=argparse.SUPPRESS)
    _add_options(parser)
    parser.add_argument("names", nargs="*", metavar="TARGET", help="targets (default: all)")
    return parser


def _diff_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="megacpp-env lock diff", description="explain the changes between two locks (PEP 751 or requirements)"
    )
    parser.add_argument("--spec", metavar="PATH", help=argparse.SUPPRESS)
    parser.add_argument("old", metavar="OLD", help="the old lock")
    parser.add_argument("new", metavar="NEW", help="the new lock")
    parser.add_argument("--format", choices=FORMATS, help="output format (default: text)")
    add_json(parser)
    return parser


def _finish_parsing(args: argparse.Namespace) -> bool:
    """Parse the arguments REMAINDER left in ``args.names`` into ``args``; True for ``lock diff``.
    Usage errors raise SystemExit(2) through argparse."""
    rest = list(args.names)
    del args.names
    if rest[:1] == ["diff"]:
        parser = _diff_parser()
        given = [flag for flag, dest in LOCK_ONLY if getattr(args, dest)]
        if given:
            parser.error(f"{', '.join(given)}: not an option of lock diff")
        parser.parse_intermixed_args(rest[1:], namespace=args)
        return True
    parser = _targets_parser()
    parser.parse_intermixed_args(rest, namespace=args)
    if args.format:
        parser.error("--format: an option of lock diff only (megacpp-env lock diff OLD NEW --format F)")
    modes = [flag for flag, dest in MODES if getattr(args, dest)]
    if len(modes) > 1:
        parser.error(f"{' and '.join(modes)} are mutually exclusive")
    return False


def run(args: argparse.Namespace) -> int:
    from megacpp_env.errors import EXIT_USAGE

    try:
        is_diff = _finish_parsing(args)
    except SystemExit as exc:  # argparse printed the usage error (exit 2) or the help (exit 0)
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if is_diff:
        return _diff(args)
    from megacpp_env.commands._common import load

    spec = load(args)
    from megacpp_env.lock.state import jobs_for

    jobs = jobs_for(spec, args.names or None, args.platform)
    if args.check:
        return _check(spec, jobs, args)
    if args.export_requirements:
        return _export(spec, jobs)
    return _lock(spec, jobs, args)


def _diff(args: argparse.Namespace) -> int:
    from megacpp_env.lock import diff

    fmt = "json" if args.json else (args.format or "text")
    old, new = diff.read_any(args.old), diff.read_any(args.new)
    result = diff.diff_locks(old, new, title=f"{args.old} -> {args.new}")
    sys.stdout.write(diff.render([result], fmt))
    return 0


def _check(spec: Spec, jobs: list[LockJob], args: argparse.Namespace) -> int:
    from megacpp_env.lock.consistency import check_locks
    from megacpp_env.lock.state import UNLOCKED, check_job

    states = [check_job(job, spec.root) for job in jobs]
    keys = {j.key for j in jobs}
    reports = [r for r in check_locks(spec) if keys & set(r.group.members)]
    failing = [s for s in states if not s.ok and not (args.allow_unlocked and s.state == UNLOCKED)]
    if args.json:
        from megacpp_env.ui import print_json

        print_json(
            {
                "locks": [s.to_dict() for s in states],
                "consistency": [_report_dict(r) for r in reports],
                "ok": not failing,
            }
        )
    else:
        for s in states:
            print(s.line())
        for r in reports:
            print(("warning: " if r.failing else "") + r.summary())
            for d in r.failing:
                print(f"  {d.line()}")
    return 1 if failing else 0


def _report_dict(r: GroupReport) -> dict[str, Any]:
    return {
        "group": r.group.name,
        "shared": r.shared,
        "divergences": [d.to_dict() for d in r.divergences],
        "only_in": {k: list(v) for k, v in r.only_in.items()},
    }


def _export(spec: Spec, jobs: list[LockJob]) -> int:
    from megacpp_env.lock.state import export_only, rel

    missing = 0
    for job in jobs:
        if not job.lock_path.exists():
            print(f"missing: {job.label}: {rel(job.lock_path, spec.root)}", file=sys.stderr)
            missing += 1
            continue
        changed = export_only(job, spec.root)
        print(f"{'wrote' if changed else 'unchanged'}: {rel(job.export_path, spec.root)}")
    return 1 if missing else 0


def _lock(spec: Spec, jobs: list[LockJob], args: argparse.Namespace) -> int:
    from megacpp_env.lock.consistency import check_locks
    from megacpp_env.lock.state import unreachable_text

    runnable = [j for j in jobs if args.try_unreachable or not j.unreachable]
    skipped = [j for j in jobs if j not in runnable]
    results = _resolve(runnable, None)
    fresh = {j.key: r.lock for j, r in zip(runnable, results, strict=True)}
    keys = {j.key for j in jobs}
    reports = [r for r in check_locks(spec, fresh) if keys & set(r.group.members)]
    notes = _uv_version_notes(runnable)
    if args.align and any(r.failing for r in reports):
        results, reports, align_notes = _realign(spec, runnable, results, reports)
        reports = [r for r in reports if keys & set(r.group.members)]
        notes += align_notes
    rows = [_write(spec, j, r) for j, r in zip(runnable, results, strict=True)]
    for j in skipped:
        rows.append(
            {
                "target": j.inputs.target,
                "platform": j.inputs.platform,
                "state": "skipped",
                "detail": f"unlocked: {unreachable_text(j.unreachable)}",
            }
        )
    _print_lock(rows, reports, notes, args.json)
    explicit_skip = bool(args.names) and bool(skipped)
    return 1 if explicit_skip or any(r.failing for r in reports) else 0


def _resolve(jobs: list[LockJob], constraints: dict[tuple[str, str], dict[str, str]] | None) -> list[Resolved]:
    from megacpp_env.lock.resolve import resolve_all
    from megacpp_env.ui import Progress

    progress = Progress(total=len(jobs))
    progress.step("resolving " + ", ".join(j.label for j in jobs), advance=0)
    try:
        return resolve_all(
            [j.inputs for j in jobs],
            constraints=constraints,
            on_done=lambda r: progress.step(f"locked {r.inputs.target} {r.inputs.platform}"),
        )
    finally:
        progress.close()


def _realign(
    spec: Spec, jobs: list[LockJob], results: list[Resolved], reports: list[GroupReport]
) -> tuple[list[Resolved], list[GroupReport], list[str]]:
    """Re-resolve diverging groups constrained to one member (see megacpp_env.lock.align)."""
    from megacpp_env.lock.align import align_group
    from megacpp_env.lock.consistency import check_locks

    fresh = {j.key: r.lock for j, r in zip(jobs, results, strict=True)}
    inputs = {j.key: j.inputs for j in jobs}
    redone: dict[tuple[str, str], Resolved] = {}
    notes: list[str] = []
    for report in (r for r in reports if r.failing):
        aligned = align_group(report, _with_disk_locks(spec, report, fresh), inputs)
        redone.update(aligned.results)
        notes += aligned.notes
    results = [redone.get(j.key, r) for j, r in zip(jobs, results, strict=True)]
    fresh = {j.key: r.lock for j, r in zip(jobs, results, strict=True)}
    return results, check_locks(spec, fresh), notes


def _with_disk_locks(
    spec: Spec, report: GroupReport, fresh: dict[tuple[str, str], Lock]
) -> dict[tuple[str, str], Lock]:
    """Members resolved in this run, plus the committed locks of members not re-resolved now."""
    from megacpp_env import layout
    from megacpp_env.lock.pylock import read_pylock

    out = {}
    for key in report.compared:
        out[key] = fresh[key] if key in fresh else read_pylock(layout.lock_path(spec.root, *key))
    return out


def _write(spec: Spec, job: LockJob, result: Resolved) -> dict[str, Any]:
    from megacpp_env.lock.state import rel, write_lock

    changed = write_lock(job, result.lock, spec.root)
    return {
        "target": job.inputs.target,
        "platform": job.inputs.platform,
        "state": "written" if changed else "unchanged",
        "path": rel(job.lock_path, spec.root),
        "export": rel(job.export_path, spec.root),
        "packages": len(result.lock.packages),
        "seconds": round(result.seconds, 2),
        "uv_runs": result.uv_runs,
    }


def _uv_version_notes(jobs: list[LockJob]) -> list[str]:
    from megacpp_env.uv import uv_version

    want = {r.removeprefix("uv==") for j in jobs for r in j.inputs.requirements if r.startswith("uv==")}
    have = uv_version() if want else ""
    return (
        [f"warning: resolved with uv {have}; the toolchain pins uv {', '.join(sorted(want))}"] if want - {have} else []
    )


def _print_lock(rows: list[dict[str, Any]], reports: list[GroupReport], notes: list[str], as_json: bool) -> None:
    if as_json:
        from megacpp_env.ui import print_json

        print_json({"locks": rows, "consistency": [_report_dict(r) for r in reports], "notes": notes})
        return
    for note in notes:
        print(note)
    for row in rows:
        if row["state"] == "skipped":
            print(f"skipped: {row['target']} {row['platform']}: {row['detail']}")
        else:
            print(f"{row['state']}: {row['path']} ({row['packages']} packages, {row['seconds']}s) + {row['export']}")
    for r in reports:
        print(r.summary())
        for d in r.divergences:
            print(f"  {d.line()}")
