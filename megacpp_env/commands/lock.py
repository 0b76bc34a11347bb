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
  megacpp-env lock --check [TARGET...] [--allow-unlocked] [--json]  verify offline (no network, no uv)
  megacpp-env lock --export-requirements [TARGET...]               re-write the pip exports offline
  megacpp-env lock diff OLD NEW [--format text|markdown|json]      explain changes (PEP 751 or requirements.txt)

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
    parser.add_argument("--format", action=_DiffOnly, help=argparse.SUPPRESS)
    add_json(parser)
    parser.add_argument("names", nargs="*", metavar="TARGET", help="targets (default: all); or: diff OLD NEW")


def run(args: argparse.Namespace) -> int:
    from megacpp_env.lock.report import LockRequest, run_lock
    from megacpp_env.ui import QUIET, Progress, settings

    request = LockRequest(
        names=tuple(args.names), platforms=args.platform, check=args.check,
        export_requirements=args.export_requirements, align=args.align, allow_unlocked=args.allow_unlocked,
        try_unreachable=args.try_unreachable, as_json=args.json, quiet=settings().verbosity <= QUIET,
    )  # fmt: skip
    printed = run_lock(load(args), request, progress=Progress)
    sys.stdout.write(printed.out)
    sys.stderr.write(printed.err)
    return 0 if printed.ok else 1
