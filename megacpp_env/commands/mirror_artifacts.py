"""``mirror-artifacts NAME --to DIR [--from URL] [--verify]``: fetch a pinned artifact set (FlashInfer's
cubins) and verify every file against the pinned checksums.txt; ``--verify`` checks a mirror offline."""

from __future__ import annotations

import argparse
from pathlib import Path

from megacpp_env.commands._common import add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="an artifact set under `artifacts:` in stack.yaml")
    parser.add_argument(
        "--to", required=True, metavar="DIR", help="the mirror directory (the set's env var points here)"
    )
    parser.add_argument("--from", dest="url", default="", metavar="URL", help="fetch from this mirror of the set's URL")
    parser.add_argument("--verify", action="store_true", help="only check DIR offline against the pins")
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.artifacts import mirror_artifacts, verify_artifacts
    from megacpp_env.errors import SpecError
    from megacpp_env.ui import print_json

    spec = load(args)
    artifact = spec.artifacts.get(args.name)
    if artifact is None:
        known = ", ".join(spec.artifacts) or "none"
        raise SpecError(f"no artifact set {args.name!r} (known: {known})", file=str(spec.path), key="artifacts")
    dest = Path(args.to)
    if not args.verify:
        result = mirror_artifacts(artifact, dest, url=args.url)
        if not args.json:
            print(
                f"{artifact.name}: {result.files} files ({result.fetched} fetched, {result.kept} kept, "
                f"{result.bytes} bytes) in {dest}"
            )
    problems = verify_artifacts(artifact, dest)
    if args.json:
        print_json({"name": artifact.name, "dest": str(dest), "ok": not problems, "problems": problems})
    else:
        for p in problems:
            print(f"{artifact.name}: {p}")
        print(f"{artifact.name}: {'verified' if not problems else 'FAILED'}: {dest}")
    return 1 if problems else 0
