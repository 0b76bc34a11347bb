"""``gate --base GITREF``: compare the committed locks at GITREF with the working tree, classify every
change and fail on policy violations that no reviewed acknowledgement covers."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from megacpp_env.commands._common import add_json

if TYPE_CHECKING:
    from megacpp_env.lock.consistency import GroupReport
    from megacpp_env.lock.diff import LockDiff
    from megacpp_env.lock.gate import Verdict

MARKER = "<!-- megacpp-env-lock-gate -->"
EPILOG = """\
policy: these fail unless acknowledged in the ack file (default locks/ACKNOWLEDGED.toml):
  hashes-changed (same version, new hashes), index-changed, downgraded, any change of a toolchain
  package (torch, triton, pytorch-triton, nvidia-*, cuda-*) in an existing lock, and divergence
  between locks that must agree (platforms of a target; spec `aligned` groups).
  A lock new since GITREF is shown; only the divergence rule applies to it.

ack file entries: [[ack]] package = "torch", change = "upgraded", reason = "...",
  optional target / platform / version.

exit codes: 0 pass (no violations, or all acknowledged); 1 unacknowledged violations, an unknown
  ref, a malformed ack file or an --ack FILE that does not exist; 2 usage.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--base", required=True, metavar="GITREF", help="the ref to compare against (origin/main)")
    parser.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    add_json(parser)
    parser.add_argument("--ack", metavar="FILE", help="acknowledgement file (default: locks/ACKNOWLEDGED.toml)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from megacpp_env.commands._common import load
    from megacpp_env.lock import acks, gate
    from megacpp_env.lock.consistency import check_locks
    from megacpp_env.lock.gitlocks import lock_pairs

    spec = load(args)
    root = spec.root
    commit, pairs = lock_pairs(root, args.base)
    diffs = [p.diff() for p in pairs]
    violations = [
        v for p, d in zip(pairs, diffs, strict=True) for v in gate.diff_violations(d, new_lock=p.base is None)
    ]
    reports = check_locks(spec)
    violations += gate.divergence_violations(reports)
    ack_file = Path(args.ack) if args.ack else acks.ack_path(root)
    verdict = gate.apply_acks(violations, acks.load_acks(ack_file, required=bool(args.ack)))
    fmt = "json" if args.json else args.format
    new = {p.title for p in pairs if p.base is None}
    sys.stdout.write(_render(fmt, args.base, commit, diffs, new, reports, verdict, ack_file.name))
    return 0 if verdict.passed else 1


def _verdict_line(verdict: Verdict, ack_name: str, markdown: bool) -> str:
    if verdict.passed:
        n = len(verdict.acknowledged)
        text = "Verdict: PASS" + (f" ({n} acknowledged change(s))" if n else "")
    else:
        n = len(verdict.violations)
        text = f"Verdict: FAIL: {n} unacknowledged violation(s); acknowledge them in locks/{ack_name}"
    return f"**{text}**" if markdown else text


def _render(
    fmt: str,
    ref: str,
    commit: str,
    diffs: list[LockDiff],
    new: set[str],
    reports: list[GroupReport],
    verdict: Verdict,
    ack_name: str,
) -> str:
    from megacpp_env.lock import diff as d

    changed = [x for x in diffs if x.changes]
    if fmt == "json":
        payload = {
            "base": ref,
            "commit": commit,
            "passed": verdict.passed,
            "new_locks": sorted(new),
            "violations": [v.to_dict() for v in verdict.violations],
            "acknowledged": [{"violation": v.to_dict(), "ack": a.to_dict()} for v, a in verdict.acknowledged],
            "unused_acks": [a.to_dict() for a in verdict.unused],
            "consistency": [{"group": r.group.name, "summary": r.summary()} for r in reports],
        }
        return d.render(diffs, "json", payload=payload)
    md = fmt == "markdown"
    extra = _sections(diffs, changed, new, reports, verdict, md)
    head = (
        [MARKER, f"## megacpp-env lock gate (base `{ref}` {commit[:12]})", ""]
        if md
        else [f"lock gate: base {ref} ({commit[:12]})"]
    )
    return "\n".join(head) + "\n" + d.render(changed, fmt, verdict=_verdict_line(verdict, ack_name, md), extra=extra)


def _sections(
    diffs: list[LockDiff],
    changed: list[LockDiff],
    new: set[str],
    reports: list[GroupReport],
    verdict: Verdict,
    md: bool,
) -> list[str]:
    bullet = "- " if md else "  "
    out = [""]
    same = [x.title for x in diffs if not x.changes]
    if same:
        out.append(f"Unchanged locks: {', '.join(same)}")
    if new:
        out.append(f"New locks (no base to compare; divergence rule only): {', '.join(sorted(new))}")
    out += [f"Consistency: {r.summary()}" for r in reports]
    if verdict.violations:
        out += ["", "Violations:"] + [bullet + v.line() for v in verdict.violations]
    if verdict.acknowledged:
        out += ["", "Acknowledged:"] + [f"{bullet}{v.line()} -- {a.reason}" for v, a in verdict.acknowledged]
    if verdict.unused:
        out += ["", "Unused acknowledgements (remove them):"] + [
            f"{bullet}{a.package} {a.change}" for a in verdict.unused
        ]
    if not changed:
        out.insert(0, "No lock changes.")
    return out
