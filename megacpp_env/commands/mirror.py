"""``mirror TARGET --to DIR``: download every artifact of a target's committed lock(s), verify each
sha256 against the lock, store them content-addressed with a flat find-links directory."""

from __future__ import annotations

import argparse
import sys

from megacpp_env.commands._common import add_json, load

EPILOG = """\
layout: DIR/sha256/<hex> (content-addressed), DIR/files/<original filename> (hard links; use
  pip install --no-index --find-links DIR/files --require-hashes --no-deps
  -r locks/<target>.<os-arch>.requirements.txt),
  DIR/mirror.json (manifest). Re-running fetches only what is missing.

exit codes: 0 every artifact mirrored and verified; 1 a lock is missing, --platform names a platform
  the target does not have, or a download fails or does not match its sha256; 2 usage.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("target", help="the target whose lock(s) to mirror")
    parser.add_argument("--platform", action="append", metavar="P", help="only this platform (repeatable)")
    parser.add_argument("--to", required=True, metavar="DIR", help="mirror directory (created if missing)")
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from megacpp_env.lock.mirror import check_destination, committed_lock, mirror_target
    from megacpp_env.lock.state import jobs_for
    from megacpp_env.ui import Progress, print_json

    dest = check_destination(Path(args.to))  # before the spec: an existing file is a one-line error
    spec = load(args)
    rows = []
    for job in jobs_for(spec, [args.target], args.platform):  # a platform the target lacks is an error
        lock = committed_lock(spec.root, *job.key, path=job.lock_path)
        progress = Progress(total=sum(len(p.artifacts) for p in lock.packages))
        try:
            rows.append(mirror_target(lock, *job.key, dest, on_file=progress.step))
        finally:
            progress.close()
    if args.json:
        print_json({"mirror": str(dest), "locks": [r.to_dict() for r in rows]})
        return 0
    for r in rows:
        sys.stdout.write(
            f"mirrored {r.target} {r.platform}: {r.files} artifacts "
            f"({r.fetched} fetched, all sha256-verified) -> {r.find_links}\n"
        )
    return 0
