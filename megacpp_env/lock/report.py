"""``gate``'s one domain call (``gate_shown``) and its rendering: text, GitHub-flavoured markdown (the
pull-request comment), JSON, GitHub workflow annotations or SARIF. Pure: returns text."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from megacpp_env.errors import MegacppEnvError
from megacpp_env.findings import Finding, formats
from megacpp_env.lock import diff as d
from megacpp_env.lock.checkresults import CheckResult, read_check_results
from megacpp_env.lock.comment import render_comment
from megacpp_env.lock.escape import plain
from megacpp_env.lock.gate import CODES, GateReport, Verdict, run_gate
from megacpp_env.spec.model import Spec


def verdict_line(verdict: Verdict, ack_name: str) -> str:
    if verdict.passed:
        n = len(verdict.acknowledged)
        return "Verdict: PASS" + (f" ({n} acknowledged change(s))" if n else "")
    n = len(verdict.violations)
    return f"Verdict: FAIL: {n} unacknowledged violation(s); acknowledge them in locks/{plain(ack_name)}"


def render_gate(report: GateReport, fmt: str, checks: Sequence[CheckResult] = (), root: str = "") -> str:
    """``gate``'s report: text (every line made ``plain``), the pull-request comment (markdown, see
    ``lock.comment``), JSON (credentials scrubbed), or its findings as GitHub workflow annotations or
    SARIF (paths relative to ``root``; every value made ``plain``)."""
    if fmt in ("github", "sarif"):
        shown = [dataclasses.replace(f, message=plain(f.message), key=plain(f.key)) for f in report.findings()]
        return formats.render(shown, fmt, docs=CODES, root=root)
    if fmt == "json":
        payload = {**report.to_dict(), **({"checks": [c.to_dict() for c in checks]} if checks else {})}
        return d.render(report.diffs, "json", payload=payload)
    if fmt == "markdown":
        return render_comment(report, base=report.base, checks=checks)
    changed = [x for x in report.diffs if x.changes]
    head = f"lock gate: base {plain(report.base)} ({report.commit[:12]})\n"
    return head + d.render(
        changed, fmt, verdict=verdict_line(report.verdict, report.ack_name), extra=_sections(report, checks)
    )


def _sections(report: GateReport, checks: Sequence[CheckResult]) -> list[str]:
    verdict = report.verdict
    out = [""]
    same = [x.title for x in report.diffs if not x.changes]
    if same:
        out.append(f"Unchanged locks: {', '.join(same)}")
    if report.new_locks:
        out.append(f"New locks (no base to compare; divergence rule only): {', '.join(report.new_locks)}")
    out += [f"Consistency: {r.summary()}" for r in report.reports]
    out += [f"Check {c.name}: {'passed' if c.passed else f'failed (exit {c.exit_code})'}" for c in checks]
    if verdict.violations:
        out += ["", "Violations:"] + [f"  {v.line()}" for v in verdict.violations]
    if verdict.acknowledged:
        out += ["", "Acknowledged:"] + [f"  {v.line()} -- {a.reason}" for v, a in verdict.acknowledged]
    if verdict.unused:
        out += ["", "Unused acknowledgements (remove them):"]
        out += [f"  {a.label()}" for a in verdict.unused]
    if not any(x.changes for x in report.diffs):
        out.insert(0, "No lock changes.")
    return out


def gate_text(
    spec: Spec, base: str, ack_file: Path | None, fmt: str, checks: Sequence[CheckResult] = (), root: str = ""
) -> tuple[GateReport, str]:
    """``gate``: the committed locks at ``base`` against the working tree, and its rendering."""
    report = run_gate(spec, base, ack_file)
    return report, render_gate(report, fmt, checks, root)


@dataclass(frozen=True, kw_only=True, slots=True)
class GateShown:
    """What ``gate`` prints and how it ends: ``error`` (raised by the verb after ``text`` is written)
    when the gate could not run, else the exit code (1 on unacknowledged violations)."""

    text: str
    exit_code: int = 0
    error: MegacppEnvError | None = None


def gate_shown(
    spec_path: Path | None,
    base: str,
    ack_file: Path | None,
    fmt: str,
    check_results: Path | None,
    root: str = "",
) -> GateShown:
    """``gate``'s one domain call: the checks the action ran, the spec at ``spec_path`` (None: none was
    named or found), the gate and its rendering; when any of it fails, the comment that says why
    (``markdown``) and the error. The spec is loaded here, not by the verb: its errors reach the comment."""
    from megacpp_env.spec import load_spec
    from megacpp_env.spec.discover import required

    checks: Sequence[CheckResult] = ()
    try:
        checks = read_check_results(check_results) if check_results is not None else ()
        report, text = gate_text(load_spec(required(spec_path)), base, ack_file, fmt, checks, root)
    except MegacppEnvError as exc:  # the comment says why there is no report; stderr gets the error
        return GateShown(text=gate_error_text(str(exc), base, fmt, checks), exit_code=exc.exit_code, error=exc)
    return GateShown(text=text, exit_code=0 if report.verdict.passed else 1)  # the checks fail their own step


def gate_error_text(error: str, base: str, fmt: str, checks: Sequence[CheckResult] = ()) -> str:
    """What ``gate`` writes to stdout when it could not run: the comment, for ``markdown`` (so the
    error reaches the pull request); nothing for the other formats (the error goes to stderr)."""
    if fmt == "github":  # the error as an annotation too, so the run's summary shows it
        return formats.github([Finding(code="gate", severity="error", message=plain(error))])
    return render_comment(None, base=base, checks=checks, error=error) if fmt == "markdown" else ""
