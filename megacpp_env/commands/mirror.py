"""``mirror TARGET --to DIR``: download every artifact of a target's committed lock(s), verify each
sha256 against the lock, store them content-addressed with a flat find-links directory."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_epilog, add_json, load

EPILOG = """\
layout: DIR/sha256/<hex> (content-addressed), DIR/files/<original filename> (hard links; use
  pip install --no-index --find-links DIR/files --require-hashes --no-deps
  -r locks/<target>.<os-arch>.requirements.txt),
  DIR/mirror.json (manifest). Re-running fetches only what is missing.

exit codes: 0 every artifact mirrored and verified; 1 a lock is missing, --platform names a platform
  the target does not have, or a download fails or does not match its sha256; 2 usage.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_epilog(parser, EPILOG)
    parser.add_argument("target", help="the target whose lock(s) to mirror")
    parser.add_argument("--platform", action="append", metavar="P", help="only this platform (repeatable)")
    parser.add_argument("--to", required=True, metavar="DIR", help="mirror directory (created if missing)")
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from megacpp_env.lock.mirror import mirror_locks
    from megacpp_env.ui import Progress, print_json

    dest, rows = mirror_locks(Path(args.to), load(args), args.target, args.platform, progress=Progress)
    if args.json:
        print_json({"mirror": str(dest), "locks": [r.to_dict() for r in rows]})
        return 0
    for r in rows:
        sys.stdout.write(
            f"mirrored {r.target} {r.platform}: {r.files} artifacts "
            f"({r.fetched} fetched, all sha256-verified) -> {r.find_links}\n"
        )
    return 0
