"""``mirror TARGET --to DIR``: download every artifact of a target's committed lock(s), verify each
sha256 against the lock, store them content-addressed with a flat find-links directory."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from megacpp_env.commands._common import add_json

if TYPE_CHECKING:
    from pathlib import Path

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

    from megacpp_env.commands._common import load
    from megacpp_env.ui import print_json

    spec = load(args)
    from megacpp_env.lock.state import jobs_for

    root = Path(args.to)
    jobs = jobs_for(spec, [args.target], args.platform)  # a platform the target lacks is an error
    rows = [_mirror_one(spec.root, *job.key, root) for job in jobs]
    if args.json:
        print_json({"mirror": str(root), "locks": rows})
    else:
        for r in rows:
            sys.stdout.write(
                f"mirrored {r['target']} {r['platform']}: {r['files']} artifacts "
                f"({r['fetched']} fetched, all sha256-verified) -> {r['find_links']}\n"
            )
    return 0


def _mirror_one(spec_root: Path, target: str, platform: str, root: Path) -> dict[str, Any]:
    from megacpp_env import layout
    from megacpp_env.errors import StaleError
    from megacpp_env.lock.mirror import links_dir, mirror_lock
    from megacpp_env.lock.pylock import read_pylock
    from megacpp_env.ui import Progress

    path = layout.lock_path(spec_root, target, platform)
    if not path.exists():
        raise StaleError(f"no lock for {target} {platform}: {path} (run: megacpp-env lock {target})")
    lock = read_pylock(path)
    progress = Progress(total=sum(len(p.artifacts) for p in lock.packages))
    try:
        files = mirror_lock(lock, root, on_file=progress.step)
    finally:
        progress.close()
    return {
        "target": target,
        "platform": platform,
        "files": len(files),
        "fetched": sum(f.fetched for f in files),
        "find_links": str(links_dir(root)),
    }
