"""``facts extract NAME --from CHECKOUT|SDIST`` / ``facts check`` / ``facts show NAME``: upstream facts
per pinned source (megacpp_env/facts)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from megacpp_env.commands._common import add_json, load

if TYPE_CHECKING:
    from megacpp_env.spec.model import Source

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

    if args.action in ("extract", "show") and not args.name:
        print(f"megacpp-env facts {args.action}: a SOURCE is required", file=sys.stderr)
        return EXIT_USAGE
    if args.action == "extract" and not args.origin:
        print("megacpp-env facts extract: --from CHECKOUT (or an sdist) is required", file=sys.stderr)
        return EXIT_USAGE
    return {"extract": _extract, "check": _check, "show": _show}[args.action](args)


def _command(src: Source, args: argparse.Namespace) -> str:
    """The command line recorded in the file: names, never this machine's paths."""
    origin = Path(args.origin)
    shown = origin.name if origin.is_file() else "CHECKOUT"
    parts = ["megacpp-env", "facts", "extract", src.name, "--from", shown]
    if args.wheel:
        parts += ["--wheel", Path(args.wheel).name]
    for flag, values in (
        ("--requirements", args.requirements),
        ("--build-requirements", args.build_requirements),
        ("--listed-requirements", args.listed_requirements),
    ):
        for value in values:
            parts += [flag, value]
    if args.unverified:
        parts += ["--unverified", args.unverified]
    return shlex.join(parts)


def _extract(args: argparse.Namespace) -> int:
    from megacpp_env.facts.extract import ExtractRequest, extract
    from megacpp_env.facts.store import facts_path, write_facts

    spec = load(args)
    src = spec.source(args.name)
    request = ExtractRequest(
        source=src.name,
        commit=src.commit,
        origin=Path(args.origin),
        subdir=src.subdir,
        wheel=Path(args.wheel) if args.wheel else None,
        requirements_files=tuple(args.requirements),
        build_requirements_files=tuple(args.build_requirements),
        listed_requirements_files=tuple(args.listed_requirements),
        unverified=args.unverified,
        command=_command(src, args),
        unobtainable=tuple(src.unobtainable),
    )
    facts = extract(request)
    changed = write_facts(spec.root, facts)
    path = facts_path(spec.root, src.name).relative_to(spec.root).as_posix()
    if args.json:
        from megacpp_env.ui import print_json

        print_json(
            {"source": src.name, "path": path, "changed": changed, "verified": facts.verified, "facts": facts.to_dict()}
        )
    else:
        state = "wrote" if changed else "unchanged"
        note = "" if facts.verified else f" (unverified: {facts.reason})"
        print(f"{state}: {path}: {facts.distribution.name} {facts.distribution.version} at {facts.commit[:12]}{note}")
    return 0


def _check(args: argparse.Namespace) -> int:
    from megacpp_env.facts.check import check_facts

    spec = load(args)
    findings = check_facts(spec)
    errors = [f for f in findings if f.severity == "error"]
    if args.json:
        from megacpp_env.ui import print_json

        print_json({"ok": not errors, "facts": [f.to_dict() for f in findings]})
    else:
        for f in findings:
            text = f"{f.state}: {f.source}: {f.message}"
            print(f"{text} (remedy: {f.remedy})" if f.remedy and f.severity != "ok" else text)
    return 1 if errors else 0


def _show(args: argparse.Namespace) -> int:
    from megacpp_env.errors import MegacppEnvError
    from megacpp_env.facts.check import extract_hint
    from megacpp_env.facts.store import facts_path, read_facts, render_facts

    spec = load(args)
    src = spec.source(args.name)
    path = facts_path(spec.root, src.name)
    if not path.is_file():
        raise MegacppEnvError(f"no {path.relative_to(spec.root)} (remedy: {extract_hint(src)})")
    facts = read_facts(path)
    if args.json:
        from megacpp_env.ui import print_json

        print_json(facts.to_dict())
    else:
        print(render_facts(facts), end="")
    return 0
