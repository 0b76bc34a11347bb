"""``facts extract SOURCE --from CHECKOUT|SDIST``: read one pinned source's upstream facts (its
metadata, build requirements, what it reads from the environment) and write ``facts/SOURCE.toml``."""

from __future__ import annotations

import argparse
from pathlib import Path

from megacpp_env.commands._common import add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="SOURCE", help="the source")
    add_json(parser)
    parser.add_argument(
        "--from", dest="origin", metavar="PATH", required=True, help="a checkout at the pin, or an sdist"
    )
    parser.add_argument("--wheel", metavar="WHEEL", help="a wheel built from the pin: its METADATA too")
    for flag, what in (
        ("--requirements", "the requirements file setup.py computes install_requires from"),
        ("--build-requirements", "a build requirements file to add to [build-system].requires"),
        ("--listed-requirements", "a requirements file the project ships; what it lists and install_requires "
         "drops is recorded"),
    ):  # fmt: skip
        parser.add_argument(flag, action="append", default=[], metavar="FILE", help=f"{what} (repeatable)")
    parser.add_argument(
        "--unverified", metavar="REASON", default="",
        help="record facts not read from a clean checkout at the pin, and why",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from megacpp_env.facts import workflow
    from megacpp_env.ui import print_json

    request = workflow.FactsRequest(
        name=args.name, origin=Path(args.origin), wheel=Path(args.wheel) if args.wheel else None,
        requirements=tuple(args.requirements), build_requirements=tuple(args.build_requirements),
        listed_requirements=tuple(args.listed_requirements), unverified=args.unverified,
    )  # fmt: skip
    done = workflow.extract_and_write(load(args), request)
    facts = done.facts
    if args.json:
        print_json(
            {"source": facts.source, "path": done.path, "changed": done.changed, "verified": facts.verified,
             "facts": facts.to_dict()}
        )  # fmt: skip
        return 0
    state = "wrote" if done.changed else "unchanged"
    note = "" if facts.verified else f" (unverified: {facts.reason})"
    print(f"{state}: {done.path}: {facts.distribution.name} {facts.distribution.version} at {facts.commit[:12]}{note}")
    return 0
