"""``lock resolve | check | export | diff``: per-target, per-platform locks. A group of real argparse
sub-commands, one module each (``commands/lock_<name>.py``); ``cli`` imports only the chosen one."""

from __future__ import annotations

import argparse

from megacpp_env.commands._common import add_epilog

SUBCOMMANDS = {
    "resolve": ("lock_resolve", "resolve per-target locks with uv and write locks/ (what moved is listed)"),
    "check": ("lock_check", "verify the committed locks against the spec, offline (no network, no uv)"),
    "export": ("lock_export", "re-write the pip requirements exports from the committed locks, offline"),
    "diff": ("lock_diff", "explain the changes between two locks (PEP 751 or requirements)"),
}

# The spellings before lock had sub-commands: refused with what they are now (docs/DESIGN.md, "Verbs").
MOVED = {"--check": "check", "--export-requirements": "export"}
CHOICE_HINT = "to lock targets: megacpp-env lock resolve TARGET..."  # after an unknown sub-command

EPILOG = """\
forms:
  megacpp-env lock resolve [TARGET...] [--platform P] [--align] [--json]   resolve with uv, write locks/
      [--upgrade | --upgrade-package NAME...] [--exclude-newer DATE|none]
  megacpp-env lock check [TARGET...] [--allow-unlocked] [--json]   verify offline (no network, no uv)
  megacpp-env lock export [TARGET...] [--json]                     re-write the pip exports offline
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
  index is marked reachable_here: false is skipped by `lock resolve` and reported by `lock check` as
  "unlocked: index NAME (URL) unreachable here" until its lock is committed.

exit codes: 0 ok; 1 a lock is missing/stale/unlocked, locks diverge (resolve), or a uv/spec error;
  lock diff: 0 always when both files are readable (it explains; `gate` enforces), 1 when one is not;
  2 usage. Before sub-commands: `lock TARGET...` is `lock resolve TARGET...`, `lock --check` is
  `lock check`, `lock --export-requirements` is `lock export`.
"""


class _Moved(argparse.Action):
    """An option that became a sub-command: a usage error naming its new spelling."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: object, values: object, option_string: str | None = None
    ) -> None:
        word = MOVED[str(option_string)]
        parser.error(f"{option_string} is now a sub-command: megacpp-env lock {word} [TARGET...]")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The group itself: its epilog, and the moved options (hidden) that say their new spelling."""
    add_epilog(parser, EPILOG)
    for flag in MOVED:
        parser.add_argument(flag, nargs=0, action=_Moved, help=argparse.SUPPRESS)


def add_selection(parser: argparse.ArgumentParser) -> None:
    """Which locks a sub-command works on: targets and platforms."""
    parser.add_argument("--platform", action="append", default=[], metavar="P", help="only this platform (repeatable)")
    parser.add_argument("names", nargs="*", metavar="TARGET", help="targets (default: all)")
