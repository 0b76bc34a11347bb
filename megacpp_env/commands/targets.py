"""`megacpp-env targets`: list the targets of the spec."""

from __future__ import annotations

import argparse

from megacpp_env.commands._common import add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.spec.view import target_rows
    from megacpp_env.ui import print_json

    rows = target_rows(load(args))
    if args.json:
        print_json(rows)
        return 0
    cells = [(str(r["name"]), ",".join(r["platforms"]), str(r["toolchain"]), str(r["description"])) for r in rows]
    widths = [max((len(c[i]) for c in cells), default=0) for i in range(3)]  # each column as wide as its data
    for cell in cells:
        print(" ".join(f"{text:<{w}}" for text, w in zip(cell[:3], widths, strict=True)), cell[3])
    return 0
