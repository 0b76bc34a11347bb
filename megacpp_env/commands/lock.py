"""``lock [TARGET...]``: resolve per-target, per-platform locks with uv; ``--check`` verifies them
offline; ``--export-requirements`` re-writes the pip exports. ``lock diff OLD NEW`` is a sub-verb
(``commands/lock_diff.py``)."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_json, load

EPILOG = """\
forms:
  megacpp-env lock [TARGET...] [--platform P] [--align] [--json]   resolve with uv, write locks/
      [--upgrade | --upgrade-package NAME...] [--exclude-newer DATE|none]
  megacpp-env lock --check [TARGET...] [--allow-unlocked] [--json]  verify offline (no network, no uv)
  megacpp-env lock --export-requirements [TARGET...]               re-write the pip exports offline
  megacpp-env lock diff OLD NEW [--format text|markdown|json]      explain changes (PEP 751 or requirements.txt)

re-locking: the committed lock is uv's preferences, so only what the spec's changes force moves (the
  output lists what moved); --upgrade-package NAME (repeatable) lets NAME move too, --upgrade resolves
  from scratch. --exclude-newer DATE (2026-11-20 or an RFC 3339 time) hides every file uploaded later;
  the lock records it and later runs keep it (none drops it), so the same command on another day gives
  the same lock.

files: locks/pylock.<target>-<os>-<arch>.toml (PEP 751) and locks/<target>.<os-arch>.requirements.txt
  (pip install --require-hashes --no-deps -r ...); a target whose toolchain takes CUDA from PyPI
  (toolchains.X.cuda.pypi) also gets its toolchain lock, locks/pylock.<target>-cuda-<os>-<arch>.toml and
  locks/<target>-cuda.<os-arch>.requirements.txt, written and checked with it. A target whose explicit
  index is marked reachable_here: false is skipped by `lock` and reported by `--check` as
  "unlocked: index NAME (URL) unreachable here" until its lock is committed.

exit codes: 0 ok; 1 a lock is missing/stale/unlocked, locks diverge (lock), or a uv/spec error;
  lock diff: 0 always when both files are readable (it explains; `gate` enforces), 1 when one is not;
  2 usage (a missing OLD/NEW, two modes at once, --format without diff).
"""


class _DiffOnly(argparse.Action):
    def __call__(
        self, parser: argparse.ArgumentParser, namespace: object, values: object, option_string: str | None = None
    ) -> None:
        parser.error(f"{option_string}: an option of lock diff only (megacpp-env lock diff OLD NEW {option_string} F)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--platform", action="append", metavar="P", help="only this platform (repeatable)")
    modes = parser.add_mutually_exclusive_group()
    modes.add_argument("--check", action="store_true", help="verify locks offline against the spec")
    modes.add_argument(
        "--export-requirements", action="store_true",
        help="only re-write the requirements exports from the existing locks (offline)",
    )  # fmt: skip
    modes.add_argument(
        "--align", action="store_true", help="re-resolve diverging locks constrained by their group's first lock"
    )
    parser.add_argument(
        "--allow-unlocked", action="store_true",
        help="with --check: report, but do not fail on, targets whose index is unreachable here and that "
        "have no lock yet",
    )  # fmt: skip
    parser.add_argument(
        "--try-unreachable", action="store_true",
        help="resolve targets even if their index is marked reachable_here: false",
    )  # fmt: skip
    parser.add_argument("--upgrade", action="store_true", help="resolve from scratch: the committed lock pins nothing")
    parser.add_argument(
        "--upgrade-package", action="append", default=[], metavar="NAME",
        help="let NAME move to its newest allowed version (and what that forces); repeatable",
    )  # fmt: skip
    parser.add_argument(
        "--exclude-newer", metavar="DATE",
        help="ignore files uploaded after DATE (recorded in the lock, kept by later runs; none drops it)",
    )  # fmt: skip
    parser.add_argument("--format", action=_DiffOnly, help=argparse.SUPPRESS)
    add_json(parser)
    parser.add_argument("names", nargs="*", metavar="TARGET", help="targets (default: all); or: diff OLD NEW")


def run(args: argparse.Namespace) -> int:
    from megacpp_env.errors import EXIT_USAGE
    from megacpp_env.lock.report import LockRequest, run_lock
    from megacpp_env.ui import QUIET, Progress, settings

    moves = args.upgrade or args.upgrade_package or args.exclude_newer is not None
    if moves and (args.check or args.export_requirements):
        sys.stderr.write("megacpp-env lock: error: --upgrade, --upgrade-package and --exclude-newer resolve; "
                         "they do not go with --check or --export-requirements\n")  # fmt: skip
        return EXIT_USAGE
    request = LockRequest(
        names=tuple(args.names), platforms=args.platform, check=args.check,
        export_requirements=args.export_requirements, align=args.align, allow_unlocked=args.allow_unlocked,
        try_unreachable=args.try_unreachable, as_json=args.json, quiet=settings().verbosity <= QUIET,
        upgrade=args.upgrade, upgrade_packages=tuple(args.upgrade_package), exclude_newer=args.exclude_newer,
    )  # fmt: skip
    printed = run_lock(load(args), request, progress=Progress)
    sys.stdout.write(printed.out)
    sys.stderr.write(printed.err)
    return 0 if printed.ok else 1
