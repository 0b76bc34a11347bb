"""``facts show SOURCE``: one source's committed facts (``facts/SOURCE.toml``), as written or as JSON."""

from __future__ import annotations

import argparse

from megacpp_env.commands._common import add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="SOURCE", help="the source")
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.facts.workflow import read_shown
    from megacpp_env.ui import print_json

    shown = read_shown(load(args), args.name)
    if args.json:
        print_json(shown.facts.to_dict())
    else:
        print(shown.text, end="")
    return 0
