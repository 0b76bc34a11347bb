"""`megacpp-env build-source NAME`: build one pinned source into a wheel on this machine (bare metal).

The same ``build_source`` an image's source stage runs, from a plan made in memory from the spec:
checkout (from ``--mirror`` when given), verify, overlay, build-time fetches, pre-build commands,
forced source build into a wheel with the jobs formula's variables; ``--install`` also installs it
into ``--venv`` and runs its sanity checks. Default checkout: ./.megacpp/src/<name-with-dashes>;
default wheel directory: ./.megacpp/wheels/<name>. ``--dry-run`` builds nothing: it shows the jobs
formula's decision on this machine (or on the ``/proc`` and ``/sys`` trees under ``--resources-root``)
and the exact variables the build would get.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from megacpp_env.commands._common import add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME", help="a source of the spec (- and _ both accepted)")
    parser.add_argument("--target", default="", help="whose build env and jobs settings (default: the only one)")
    parser.add_argument("--venv", default=None, metavar="PY_OR_DIR", help="target venv (default: the active one)")
    parser.add_argument("--mirror", type=Path, default=None, metavar="DIR", help="a source mirror (mirror-sources)")
    parser.add_argument("--workdir", type=Path, default=None, metavar="DIR", help="where the checkout goes")
    parser.add_argument("--wheel-dir", type=Path, default=None, metavar="DIR", help="where the wheel goes")
    parser.add_argument("--install", action="store_true", help="install the wheel into --venv and run sanity")
    parser.add_argument("--no-sanity", action="store_true", help="with --install: skip the sanity checks")
    parser.add_argument("--jobs", type=positive_int, default=0, metavar="N", help="compile jobs (default: the formula)")
    parser.add_argument("--dry-run", action="store_true", help="build nothing: show the jobs and what is exported")
    parser.add_argument("--resources-root", type=Path, default=None, metavar="DIR",
                        help="read the machine's memory and CPUs from DIR/proc and DIR/sys (default: / )")  # fmt: skip
    add_json(parser)


def positive_int(text: str) -> int:
    """``--jobs N``: a whole number >= 1 (a usage error otherwise: exit 2, nothing built)."""
    value = int(text) if text.isascii() and text.isdigit() else -1
    if not 1 <= value <= 4096:
        raise argparse.ArgumentTypeError(f"expected a number of compile jobs from 1 to 4096, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from megacpp_env import sourceplans
    from megacpp_env.ui import print_json

    request = sourceplans.SourceBuildRequest(
        name=args.name, target=args.target, venv=args.venv, mirror=args.mirror, workdir=args.workdir,
        wheel_dir=args.wheel_dir, install=args.install, sanity=not args.no_sanity, jobs=args.jobs,
        dry_run=args.dry_run, resources_root=args.resources_root,
    )  # fmt: skip
    # Progress (and the build's own output) on stderr, also with --json: a CUDA build runs for minutes.
    done = sourceplans.build_or_plan(
        load(args), request, progress=lambda line: print(line, file=sys.stderr, flush=True)
    )
    plan, decision, built = done.plan, done.decision, done.built
    if decision is not None:
        doc = {"ok": True, "dry_run": True, "name": plan.name, "target": plan.target, "commit": plan.commit,
               "jobs_inputs": plan.jobs.to_dict(), "jobs": decision.to_dict()}  # fmt: skip
        if args.json:
            print_json(doc)
            return 0
        exported = " ".join(f"{k}={v}" for k, v in sorted(decision.env.items())) or "nothing"
        print(f"{plan.name} ({plan.target}): {decision.max_jobs} job(s) x {decision.nvcc_threads} nvcc thread(s); "
              f"exports {exported}\n  {decision.why}")  # fmt: skip
    elif built is not None and args.json:
        print_json({"ok": True, **built.to_dict()})
    elif built is not None:
        made = built.wheel or f"{built.checkout} (path source)"
        print(f"built {plan.name} ({plan.target}) at {plan.commit} in {built.seconds:.1f}s: {made}")
    return 0
