"""`megacpp-env check`: validate the spec (every error of it, in one run) and run the policy rules,
with the spec's suppressions; text, JSON, GitHub workflow annotations or SARIF."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from megacpp_env.commands._common import spec_path, workspace

if TYPE_CHECKING:
    from megacpp_env.codes import Checked
    from megacpp_env.rules import Rule


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=("text", "json", "github", "sarif"), default="text",
        help="github: workflow annotations with file and line; sarif: SARIF 2.1.0 (code scanning)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="the same as --format json")
    parser.add_argument("--rule", action="append", default=[], metavar="CODE", help="run only this rule (repeatable)")
    parser.add_argument("--list-rules", action="store_true", help="list every rule with its code and severity")
    parser.add_argument("--strict", action="store_true", help="warnings fail too (suppressed findings never do)")


def run(args: argparse.Namespace) -> int:
    from megacpp_env.codes import check_spec

    fmt = "json" if args.json else args.format
    checked = check_spec(
        spec_path(args), args.rule, strict=args.strict, list_rules=args.list_rules,
        file_errors=fmt in ("github", "sarif"),  # a broken file is an annotation too
    )  # fmt: skip
    if args.list_rules:
        return _list_rules(checked.rules, fmt == "json")
    if fmt in ("github", "sarif"):
        from megacpp_env.findings import formats

        sys.stdout.write(formats.render(checked.findings, fmt, docs=checked.docs, root=workspace()))
    elif fmt == "json":
        _json(checked)
    else:
        _text(checked)
    return 1 if checked.errors else 0


def _json(checked: Checked) -> None:
    from megacpp_env.findings import counts
    from megacpp_env.ui import print_json

    spec = checked.spec
    print_json(
        {
            "spec": checked.file,
            "spec_digest": spec.digest() if spec else None,
            "ok": not checked.errors,
            "counts": counts(checked.findings),
            "findings": [f.to_dict() for f in checked.findings],
        }
    )


def _text(checked: Checked) -> None:
    from megacpp_env.errors import one_line
    from megacpp_env.findings import counts
    from megacpp_env.ui import QUIET, paint, settings

    quiet = settings().verbosity <= QUIET  # -q: only the failing findings and, if any, the verdict
    shown = checked.errors if quiet else sorted(checked.findings, key=lambda f: not f.suppressed)
    for f in shown:  # suppressed ones first: what needs doing stands next to the verdict (and ends a log)
        print(one_line(f.format()))
    if checked.errors or not quiet:
        n = counts(checked.findings)
        verdict = paint("FAILED", "error") if checked.errors else paint("ok", "ok")
        spec = checked.spec
        sizes = f"{len(spec.targets)} targets, {len(spec.sources)} sources, " if spec else "the spec did not load: "
        print(f"{checked.file}: {verdict}: {sizes}{n['error']} errors, {n['warning']} warnings, "
              f"{n['suppressed']} suppressed")  # fmt: skip


def _list_rules(listed: tuple[Rule, ...], as_json: bool) -> int:
    from megacpp_env.ui import print_json

    if as_json:
        print_json([r.to_dict() for r in listed])
    else:
        for r in listed:
            print(f"{r.code}  {r.severity:<7}  {r.summary}")
    return 0
