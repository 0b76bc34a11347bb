"""`megacpp-env verify-checkout PATH [--expect NAME] [--json]`: is PATH exactly its pin?

Checks: .git present, HEAD == the pin, clean (or exactly the state `overlay apply` recorded),
submodules at the commits the superproject pins. Without --expect the pin comes from the
checkout's provenance record (and the spec's entry for that source, when the spec loads).
Exit 1 when not as pinned.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from megacpp_env.commands._common import add_json, load, load_optional


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, metavar="PATH", help="the checkout to verify")
    parser.add_argument("--expect", metavar="NAME", default=None, help="the source of the spec it must match")
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.checkout import verify_as_pinned
    from megacpp_env.ui import print_json

    # --expect NAME looks the source up in the spec, so it must load; else a spec is optional
    spec = load(args) if args.expect else load_optional(args)
    source, result = verify_as_pinned(args.path, expect=args.expect, spec=spec)
    if args.json:
        print_json(result.to_dict())
    elif result.ok:
        st = result.state
        how = f"overlay {source.overlay if source else '?'} applied, as its manifest says" if st.dirty else "clean"
        print(f"{args.path}: ok: {st.source or 'checkout'} at {st.head} ({how})")
    else:
        print(f"{args.path}: not as pinned:")
        for problem in result.problems:
            print(f"  - {problem}")
    if not args.json and result.exceptions:
        print(f"{args.path}: declared exceptions (stack.yaml `unobtainable:`), left out and not stood in for:")
        for line in result.exceptions:
            print(f"  - {line}")
    return 0 if result.ok else 1
