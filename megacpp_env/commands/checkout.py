"""`megacpp-env checkout NAME [--dest DIR] [--mirror DIR] [--json]`: a real git checkout of a pinned source.

Fetched by SHA (shallow where the server allows), submodules at the commits the superproject pins,
a provenance record in DEST/.megacpp-checkout.json. Idempotent: an existing DEST is reused only
when `verify-checkout` would pass it (judged by content; changes only where the source's overlay
manifest vouches for them); any other tree is refused, never modified. Default DEST:
./.megacpp/src/<name-with-dashes> beside the spec (images pass --dest /opt/src/<name-with-dashes>).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from megacpp_env.commands._common import add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="a source of the spec (sources.NAME; - and _ both accepted)")
    parser.add_argument("--dest", type=Path, default=None, metavar="DIR", help="where to check out")
    parser.add_argument(
        "--mirror", type=Path, default=None, metavar="DIR",
        help="fetch from this source mirror (mirror-sources); the recorded origin stays the pinned URL",
    )  # fmt: skip
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.sourceplans import checkout_pinned
    from megacpp_env.ui import print_json

    source, dest, result = checkout_pinned(load(args), args.name, args.dest, args.mirror)
    if args.json:
        print_json(result.to_dict())
        return 0
    st = result.state
    subs = f", {len(st.submodules)} submodule(s) at their pins" if st.submodules else ""
    print(f"{result.action}: {dest}: {source.name} at {st.head}{subs}")
    return 0
