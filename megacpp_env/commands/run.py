"""`megacpp-env run --golden NAME [--allow-drift] [--record FILE] -- CMD ...`: pre-check the
environment against a golden (what the golden inspected, warm cache), refuse on drift (or run anyway
with --allow-drift, and say so), always append a run record; exit with CMD's exit code when it ran."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from megacpp_env.commands._common import add_ignore, add_json, add_python, checked_python, load_optional

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
    from megacpp_env.redact import redact_argv
    from megacpp_env.repro import goldens, guard, runrecord
    from megacpp_env.snapshot.golden import golden_dir, ignore_patterns
    from megacpp_env.snapshot.report import render

    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise SpecError("no command to run: put it after --, e.g. run --golden NAME -- python bench.py", key="CMD")
    spec = functools.cache(lambda: load_optional(args))
    ref = goldens.resolve(args.golden, golden_dir(spec() if args.golden_dir is None else None, args.golden_dir))
    record_file = runrecord.check_record_path(args.record or guard.default_record_file(ref))
    opts = goldens.options_like(
        ref.snapshot, python=checked_python(args.python), paths=args.paths,
        spec=goldens.spec_loader(ref.snapshot, spec), command=" ".join(["megacpp-env", *redact_argv(sys.argv[1:])]),
    )  # fmt: skip
    check = guard.precheck(ref, opts, ignore=ignore_patterns(args.ignore, spec()))
    if check.drift:
        sys.stderr.write(render(check.report, "text"))
    if check.drift and not args.allow_drift:
        record = guard.record_of(check, cmd, ran=False, exit_code=None, wall=None, allowed=False)
        runrecord.append(record_file, record.to_dict())
        print(f"megacpp-env run: refused: the environment drifted from golden {ref.name} (run record: {record_file}; "
              "--allow-drift runs anyway)", file=sys.stderr)  # fmt: skip
        _json(args, {"ok": False, "refused": True, **record.to_dict()})
        return 1
    _announce(check, ref.name, args.allow_drift)
    code, wall = guard.run_command(cmd)
    record = guard.record_of(check, cmd, ran=True, exit_code=code, wall=wall, allowed=args.allow_drift)
    runrecord.append(record_file, record.to_dict())
    _json(args, {"ok": code == 0, "refused": False, **record.to_dict()})
    return code


def _announce(check: PreCheck, name: str, allowed: bool) -> None:
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
