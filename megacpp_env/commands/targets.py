"""`megacpp-env targets`: list the targets of the spec."""

from __future__ import annotations

import argparse

from megacpp_env.commands._common import add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.ui import print_json

    spec = load(args)
    rows = [
        {
            "name": t.name,
            "platforms": list(t.platforms),
            "toolchain": t.toolchain.name,
            "cuda": t.toolchain.cuda,
            "sources": [s.name for s in t.sources],
            "description": t.description,
        }
        for t in spec.targets.values()
    ]
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        print(f"{row['name']:<8} {','.join(row['platforms']):<26} {row['toolchain']:<20} {row['description']}")
    return 0
