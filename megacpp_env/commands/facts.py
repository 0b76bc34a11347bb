"""``facts extract NAME --from CHECKOUT|SDIST`` / ``facts check`` / ``facts show NAME``: upstream facts
per pinned source (megacpp_env/facts)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from megacpp_env.commands._common import add_json, load

if TYPE_CHECKING:
    from megacpp_env.facts.workflow import Extracted

ACTIONS = ("extract", "check", "show")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=ACTIONS, help="extract: read one source's facts; check: all, offline; show")
    parser.add_argument("name", nargs="?", metavar="SOURCE", help="the source (extract, show)")
    parser.add_argument("--from", dest="origin", metavar="PATH", help="extract: a checkout at the pin, or an sdist")
    parser.add_argument("--wheel", metavar="WHEEL", help="extract: a wheel built from the pin: its METADATA too")
    parser.add_argument(
        "--requirements",
        action="append",
        default=[],
        metavar="FILE",
        help="extract: the requirements file setup.py computes install_requires from (repeatable)",
    )
    parser.add_argument(
        "--build-requirements",
        action="append",
        default=[],
        metavar="FILE",
        help="extract: a build requirements file to add to [build-system].requires (repeatable)",
    )
    parser.add_argument(
        "--listed-requirements",
        action="append",
        default=[],
        metavar="FILE",
        help="extract: a requirements file the project ships; what it lists and install_requires drops is recorded",
    )
    parser.add_argument(
        "--unverified",
        metavar="REASON",
        default="",
        help="extract: record facts not read from a clean checkout at the pin, and why",
    )
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.errors import EXIT_USAGE
    from megacpp_env.facts import workflow
    from megacpp_env.ui import print_json

    if args.action in ("extract", "show") and not args.name:
        print(f"megacpp-env facts {args.action}: a SOURCE is required", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "extract" and not args.origin:
        print("megacpp-env facts extract: --from CHECKOUT (or an sdist) is required", file=sys.stderr)
        return EXIT_USAGE
    request = workflow.FactsRequest(
        action=args.action,
        name=args.name or "",
        origin=Path(args.origin) if args.origin else None,
        wheel=Path(args.wheel) if args.wheel else None,
        requirements=tuple(args.requirements),
        build_requirements=tuple(args.build_requirements),
        listed_requirements=tuple(args.listed_requirements),
        unverified=args.unverified,
    )
    result = workflow.run(load(args), request)
    if isinstance(result, workflow.Extracted):
        _print_extracted(result, as_json=args.json)
        return 0
    if isinstance(result, workflow.Shown):
        if args.json:
            print_json(result.facts.to_dict())
        else:
            print(result.text, end="")
        return 0
    errors = [f for f in result if f.fails()]
    if args.json:
        facts = [{"source": f.key.removeprefix("sources."), "state": f.area, **f.to_dict()} for f in result]
        print_json({"ok": not errors, "facts": facts})
        return 1 if errors else 0
    for f in result:
        text = f"{f.area}: {f.key.removeprefix('sources.')}: {f.message}"
        print(f"{text} (remedy: {f.remedy})" if f.remedy and f.severity != "ok" else text)
    return 1 if errors else 0


def _print_extracted(result: Extracted, *, as_json: bool) -> None:
    from megacpp_env.ui import print_json

    facts = result.facts
    if as_json:
        print_json(
            {"source": facts.source, "path": result.path, "changed": result.changed, "verified": facts.verified,
             "facts": facts.to_dict()}
        )  # fmt: skip
        return
    state = "wrote" if result.changed else "unchanged"
    note = "" if facts.verified else f" (unverified: {facts.reason})"
    print(
        f"{state}: {result.path}: {facts.distribution.name} {facts.distribution.version} at {facts.commit[:12]}{note}"
    )
