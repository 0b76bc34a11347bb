"""`megacpp-env check`: validate the spec and run the policy rules."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from megacpp_env.commands._common import add_json, load

if TYPE_CHECKING:
    from megacpp_env.rules import Rule


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_json(parser)
    parser.add_argument("--rule", action="append", default=[], metavar="ID", help="run only this rule (repeatable)")
    parser.add_argument("--list-rules", action="store_true", help="list every rule with its id and severity")
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors")


def run(args: argparse.Namespace) -> int:
    from megacpp_env import rules
    from megacpp_env.ui import QUIET, paint, print_json, settings

    checked = rules.check(lambda: load(args), args.rule, strict=args.strict, list_rules=args.list_rules)
    if isinstance(checked, tuple):
        return _list_rules(checked, args.json)
    spec, findings, errors = checked.spec, checked.findings, checked.errors
    if args.json:
        print_json(
            {
                "spec": str(spec.path),
                "spec_digest": spec.digest(),
                "ok": not errors,
                "findings": [f.to_dict() for f in findings],
            }
        )
    else:
        quiet = settings().verbosity <= QUIET  # -q: only the failing findings and, if any, the verdict
        for f in errors if quiet else findings:
            print(f.format(str(spec.path)))
        warnings = len(findings) - len([f for f in findings if f.severity == "error"])
        verdict = paint("FAILED", "error") if errors else paint("ok", "ok")
        if errors or not quiet:
            print(f"{spec.path}: {verdict}: {len(spec.targets)} targets, {len(spec.sources)} sources, "
                  f"{len(findings) - warnings} errors, {warnings} warnings")  # fmt: skip
    return 1 if errors else 0


def _list_rules(listed: tuple[Rule, ...], as_json: bool) -> int:
    from megacpp_env.ui import print_json

    if as_json:
        print_json([r.to_dict() for r in listed])
    else:
        for r in listed:
            print(f"{r.code}  {r.severity:<7}  {r.summary}")
    return 0
