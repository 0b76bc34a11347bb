"""`megacpp-env pin-base TARGET [--platform P] [--check]`: pin base images by registry digest."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from megacpp_env.commands._common import add_json, load
from megacpp_env.layout import PLATFORMS

if TYPE_CHECKING:
    from megacpp_env.pinning import PinOutcome


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="target whose base images to pin (see `megacpp-env targets`)")
    parser.add_argument(
        "--platform",
        action="append",
        default=[],
        choices=PLATFORMS,
        metavar="P",
        help="only the base of this platform (repeatable; one image shared by several platforms is pinned for all)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when a base is unpinned or its tag no longer names the pinned digest",
    )
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    """JSON on failure comes from cli.main, as for every verb."""
    from megacpp_env import pinning

    outcome = pinning.pin_and_render(load(args), args.target, tuple(args.platform), check_only=args.check)
    if outcome.check:
        return _report_check(outcome, args.json)
    _report_pin(outcome, args.json)
    return 0


def _report_pin(outcome: PinOutcome, as_json: bool) -> None:
    from megacpp_env.ui import print_json

    spec = outcome.spec
    if as_json:
        print_json({"ok": True, "spec": str(spec.path), "written": outcome.written, "rendered": list(outcome.rendered),
                    "pins": [r.to_dict() for r in outcome.results]})  # fmt: skip
        return
    for r in outcome.results:
        e = r.entry
        print(f"{e.where(spec)} ({', '.join(e.platforms)}): {r.status}: {r.new_ref} [{r.media_type}]")
    if outcome.written:
        print(f"wrote {spec.path}" + "".join(f"; rendered {p}" for p in outcome.rendered))


def _report_check(outcome: PinOutcome, as_json: bool) -> int:
    from megacpp_env.ui import print_json

    spec, bad = outcome.spec, outcome.bad
    if as_json:
        print_json({"spec": str(spec.path), "ok": not bad, "pins": [r.to_dict() for r in outcome.results]})
        return 1 if bad else 0
    for line in outcome.check_lines():
        print(line)
    return 1 if bad else 0
