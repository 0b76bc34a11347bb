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
    from megacpp_env import layout
    from megacpp_env.checkout import default_dest, find_source
    from megacpp_env.sourceplans import plan_of, target_for
    from megacpp_env.srcbuild.build import BuildInputs, build_source
    from megacpp_env.srcbuild.jobs import decide, read_resources
    from megacpp_env.srcbuild.run import resolve_python
    from megacpp_env.ui import print_json

    spec = load(args)
    source = find_source(spec, args.name)
    plan = plan_of(spec, target_for(spec, source, args.target), source)
    root = args.resources_root
    resources = read_resources(proc=root / "proc", sys=root / "sys") if root is not None else None
    if args.dry_run:
        decision = decide(plan.jobs, resources or read_resources(), jobs=args.jobs)
        doc = {"ok": True, "dry_run": True, "name": plan.name, "target": plan.target, "commit": plan.commit,
               "jobs_inputs": plan.jobs.to_dict(), "jobs": decision.to_dict()}  # fmt: skip
        if args.json:
            print_json(doc)
            return 0
        exported = " ".join(f"{k}={v}" for k, v in sorted(decision.env.items())) or "nothing"
        print(f"{plan.name} ({plan.target}): {decision.max_jobs} job(s) x {decision.nvcc_threads} nvcc thread(s); "
              f"exports {exported}\n  {decision.why}")  # fmt: skip
        return 0
    inputs = BuildInputs(
        python=resolve_python(args.venv),
        workdir=args.workdir or default_dest(spec.root, source),
        wheel_dir=args.wheel_dir or spec.root / ".megacpp" / "wheels" / source.name,
        overlays=layout.overlays_dir(spec.root),
        mirror=args.mirror,
        jobs=args.jobs,
        install=args.install,
        sanity=not args.no_sanity,
        resources=resources,
    )
    # Progress (and the build's own output) on stderr, also with --json: a CUDA build runs for minutes.
    result = build_source(plan, inputs, progress=lambda line: print(line, file=sys.stderr, flush=True))
    if args.json:
        print_json({"ok": True, **result.to_dict()})
        return 0
    made = result.wheel or f"{result.checkout} (path source)"
    print(f"built {plan.name} ({plan.target}) at {plan.commit} in {result.seconds:.1f}s: {made}")
    return 0
