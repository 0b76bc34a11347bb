"""``python -m megacpp_env.srcbuild``: the source steps of an image, from plan files (no spec, no YAML).

    build   --plan FILE --venv PY --workdir DIR --wheel-dir DIR [--mirror DIR] [--overlays DIR]
            [--install] [--no-sanity] [--jobs N] [--json]
    collect --plan FILE... --venv PY --wheels DIR --src DIR [--json]
    jobs    --plan FILE [--json]        what the jobs formula decides on this machine
    closure                             the files an image's source stages copy of the tool

Exit 0 on success, 1 on a failed step (the message names the source, the step and its last output
lines), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from megacpp_env.errors import MegacppEnvError
from megacpp_env.srcbuild import closure, jobs
from megacpp_env.srcbuild.build import BuildInputs, build_source
from megacpp_env.srcbuild.collect import collect
from megacpp_env.srcbuild.plan import read_plan
from megacpp_env.srcbuild.run import resolve_python


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m megacpp_env.srcbuild", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build one source from its plan")
    b.add_argument("--plan", type=Path, required=True)
    b.add_argument("--venv", required=True, help="the target venv (directory or bin/python)")
    b.add_argument("--workdir", type=Path, required=True, help="where the checkout goes")
    b.add_argument("--wheel-dir", type=Path, required=True)
    b.add_argument("--mirror", type=Path, default=None, help="a source mirror (mirror-sources)")
    b.add_argument("--overlays", type=Path, default=None, help="the directory holding overlays/<name>")
    b.add_argument("--install", action="store_true", help="install into the venv and run the sanity checks")
    b.add_argument("--no-sanity", action="store_true")
    b.add_argument("--jobs", type=_positive, default=0)
    c = sub.add_parser("collect", help="install every source's result, dependency check, sanity of all")
    c.add_argument("--plan", type=Path, action="append", required=True, dest="plans")
    c.add_argument("--venv", required=True)
    c.add_argument("--wheels", type=Path, required=True, help="holds <name>/*.whl per wheel source")
    c.add_argument("--src", type=Path, required=True, help="holds <dist>/ per path source")
    c.add_argument("--resolutions", type=Path, default=None, help="the target's resolutions.json (depcheck)")
    j = sub.add_parser("jobs", help="the jobs formula's decision for a plan on this machine")
    j.add_argument("--plan", type=Path, required=True)
    sub.add_parser("closure", help="list the tool files the source stages copy")
    for sp in (b, c, j):
        sp.add_argument("--json", action="store_true")
    return p


def _positive(text: str) -> int:
    value = int(text) if text.isascii() and text.isdigit() else -1
    if not 1 <= value <= 4096:
        raise argparse.ArgumentTypeError(f"expected a number of compile jobs from 1 to 4096, got {text!r}")
    return value


def _line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _build(args: argparse.Namespace) -> dict[str, object]:
    inputs = BuildInputs(
        python=resolve_python(args.venv),
        workdir=args.workdir,
        wheel_dir=args.wheel_dir,
        overlays=args.overlays,
        mirror=args.mirror,
        jobs=args.jobs,
        install=args.install,
        sanity=not args.no_sanity,
    )
    return build_source(read_plan(args.plan), inputs, progress=_line).to_dict()


def _collect(args: argparse.Namespace) -> dict[str, object]:
    plans = [read_plan(p) for p in args.plans]
    python = resolve_python(args.venv)
    result = collect(
        plans, python=python, wheels=args.wheels, src=args.src, resolutions=args.resolutions, progress=_line
    )
    return result.to_dict()


def _jobs(args: argparse.Namespace) -> dict[str, object]:
    return jobs.decide(read_plan(args.plan).jobs, jobs.read_resources()).to_dict()


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "closure":
        print("\n".join(closure.closure()))
        return 0
    try:
        doc = {"build": _build, "collect": _collect, "jobs": _jobs}[args.command](args)
    except MegacppEnvError as exc:
        print(f"megacpp_env.srcbuild {args.command}: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(doc, indent=None if args.json else 2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
