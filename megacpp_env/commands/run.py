"""`megacpp-env run --golden NAME [--allow-drift] [--record FILE] -- CMD ...`: pre-check the
environment against a golden (what the golden inspected, warm cache), refuse on drift (or run anyway
with --allow-drift, and say so), always append a run record; exit with CMD's exit code when it ran."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from megacpp_env.commands._common import add_ignore, add_json, add_python, checked_python, spec_path

if TYPE_CHECKING:
    from megacpp_env.repro.guard import PreCheck


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--golden", metavar="NAME", required=True, help="a golden name or a snapshot file")
    parser.add_argument("--golden-dir", metavar="DIR", type=Path, help="where golden snapshots live")
    parser.add_argument("--allow-drift", action="store_true", help="run CMD even when the environment drifted")
    parser.add_argument(
        "--record", metavar="FILE", type=Path, help="the run record (default: <golden dir>/NAME.runs.jsonl)"
    )
    add_python(parser)
    parser.add_argument(
        "--paths", metavar="DIR", nargs="+", action="extend", type=Path,
        help="checkouts to inspect instead of the golden's (default: the ones the golden inspected)",
    )  # fmt: skip
    add_ignore(parser, "finding keys that are not drift")
    add_json(parser)
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command to run")


def run(args: argparse.Namespace) -> int:
    from megacpp_env.errors import SpecError
    from megacpp_env.repro import guard

    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise SpecError("no command to run: put it after --, e.g. run --golden NAME -- python bench.py", key="CMD")
    request = guard.GuardRequest(
        golden=args.golden, golden_dir=args.golden_dir, cmd=tuple(cmd), record=args.record, paths=args.paths,
        ignore=args.ignore, allow_drift=args.allow_drift, argv=sys.argv[1:], spec_path=spec_path(args),
        python=checked_python(args.python),
    )  # fmt: skip
    # the comparison is announced (stderr) before CMD runs: output while the work runs
    done = guard.run_guarded(
        request, checked=lambda check, name, drift: _announce(check, name, drift, args.allow_drift)
    )
    if done.refused:
        print(f"megacpp-env run: refused: the environment drifted from golden {done.golden} (run record: "
              f"{done.record_file}; --allow-drift runs anyway)", file=sys.stderr)  # fmt: skip
    _json(args, {"ok": done.exit_code == 0 and not done.refused, "refused": done.refused, **done.record.to_dict()})
    return done.exit_code


def _announce(check: PreCheck, name: str, drift: str, allowed: bool) -> None:
    sys.stderr.write(drift)
    if check.drift and not allowed:
        return
    digest = check.snapshot.digest
    if check.drift:
        print(f"megacpp-env run: WARNING: running on an environment that drifted from golden {name} "
              f"(--allow-drift; snapshot {digest})", file=sys.stderr)  # fmt: skip
    else:
        print(f"megacpp-env run: environment is golden {name} ({digest}, checked in {check.seconds:.2f}s)",
              file=sys.stderr)  # fmt: skip


def _json(args: argparse.Namespace, obj: dict[str, object]) -> None:
    if args.json:
        from megacpp_env.ui import print_json

        print_json(obj)
