"""`megacpp-env pin-base TARGET [--platform P] [--check]`: pin base images by registry digest."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from megacpp_env.commands._common import add_json, load

if TYPE_CHECKING:
    from megacpp_env.pinning import PinResult
    from megacpp_env.spec.model import Spec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", help="target whose base images to pin (see `megacpp-env targets`)")
    parser.add_argument(
        "--platform",
        action="append",
        default=[],
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
    from megacpp_env import build, pinning, registry

    spec = load(args)
    target = spec.target(args.target)
    platforms = tuple(build.resolve_platform(target, p) for p in args.platform)
    client = registry.Client()
    if args.check:
        return _report_check(spec, pinning.check(spec, target.name, platforms, client), args.json)
    results = pinning.pin(spec, target.name, platforms, client)
    written = pinning.write_pins(spec, results)
    rendered = _render(spec, target.name) if written else []
    _report_pin(spec, results, written, rendered, args.json)
    return 0


def _render(spec: Spec, target: str) -> list[str]:
    from megacpp_env import render
    from megacpp_env.spec import load_spec

    new_spec = load_spec(spec.path)
    return render.write(new_spec.root, render.render_target(new_spec, target))


def _report_pin(spec: Spec, results: list[PinResult], written: bool, rendered: list[str], as_json: bool) -> None:
    from megacpp_env.ui import print_json

    if as_json:
        print_json({"ok": True, "spec": str(spec.path), "written": written, "rendered": rendered,
                    "pins": [r.to_dict() for r in results]})  # fmt: skip
        return
    for r in results:
        e = r.entry
        print(f"{e.where(spec)} ({', '.join(e.platforms)}): {r.status}: {r.new_ref} [{r.media_type}]")
    if written:
        print(f"wrote {spec.path}" + "".join(f"; rendered {p}" for p in rendered))


def _report_check(spec: Spec, results: list[PinResult], as_json: bool) -> int:
    from megacpp_env import pinning
    from megacpp_env.ui import print_json

    bad = [r for r in results if r.status != pinning.OK]
    if as_json:
        print_json({"spec": str(spec.path), "ok": not bad, "pins": [r.to_dict() for r in results]})
        return 1 if bad else 0
    for r in results:
        if r.status == pinning.MOVED:
            print(f"drift: {pinning.moved_message(spec, r)}")
        elif r.status == pinning.UNPINNED:
            print(f"unpinned: {pinning.unpinned_message(spec, r)}")
        else:
            print(f"{r.entry.where(spec)}: ok: {r.entry.image} (the tag still names the pinned digest)")
    return 1 if bad else 0
