"""The gate's pull-request comment (``gate --format markdown``): GitHub-flavoured markdown that a pull
request cannot write into, that fits a comment, and that says first what a reviewer must know.

* Every value from an input (lock titles, package names, versions, markers, URLs, file names, the
  acknowledgements' fields, the base ref, error messages, check logs) is a code span or a fenced
  block (``lock.escape``); the rest is this module's own fixed words. No emphasis, link, image or
  inline HTML is written at all; the only HTML is the marker comments and ``<details>``.
* Order: the verdict, a summary table (per changed lock; per check), violations, acknowledged
  changes, unused acknowledgements; then, collapsed, every lock's changes and every failing check's
  output.
* Size: at most ``COMMENT_CAP`` bytes (GitHub refuses a comment over 65,536 characters). Rows that do
  not fit are left out, counted, and the report says where the whole of it is.
* The first line is ``MARKER``. When there is nothing to report (no lock changed, nothing violated,
  every check passed, no error) the second line is ``QUIET``: the comment script then posts nothing
  unless a comment of the gate already exists (which it updates).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from megacpp_env.lock import diff as d
from megacpp_env.lock.acks import Ack
from megacpp_env.lock.checkresults import CheckResult
from megacpp_env.lock.escape import code, fenced
from megacpp_env.lock.gate import GateReport, Violation

MARKER = "<!-- megacpp-env-lock-gate -->"
QUIET = "<!-- megacpp-env-lock-gate: nothing to report -->"
COMMENT_CAP = 50_000  # bytes (UTF-8): well below GitHub's 65,536 characters
_RESERVE = 1000  # bytes kept for closing a collapsed section and the "left out" note (its command <= 480)
LOG_LIMIT = 4000  # characters of the end of one failing check's output


@dataclass
class _Writer:
    """Lines under a byte budget; rows that do not fit are counted, not written."""

    cap: int
    lines: list[str] = field(default_factory=list)
    size: int = 0
    left_out: int = 0

    def room(self, lines: Sequence[str], budget: int | None = None) -> bool:
        limit = self.cap - _RESERVE if budget is None else min(budget, self.cap - _RESERVE)
        return self.size + sum(len(x.encode()) + 1 for x in lines) <= limit

    def add(self, *lines: str) -> None:
        self.lines += lines
        self.size += sum(len(x.encode()) + 1 for x in lines)

    def section(
        self, head: Sequence[str], rows: Sequence[str], tail: Sequence[str] = ("",), *, share: float = 1.0
    ) -> bool:
        """``head``, as many ``rows`` as fit in ``share`` of the room left, ``tail``; nothing (False)
        when not even the head and one row fit."""
        budget = self.size + int((self.cap - _RESERVE - self.size) * share)
        if not rows or not self.room([*head, rows[0], *tail], budget):
            self.left_out += len(rows)
            return False
        self.add(*head)
        for i, row in enumerate(rows):
            if not self.room([row, *tail], budget):
                self.left_out += len(rows) - i
                break
            self.add(row)
        self.add(*tail)
        return True


def quiet(report: GateReport | None, checks: Sequence[CheckResult], error: str) -> bool:
    """Nothing a reviewer must see: no lock changed or appeared, the verdict passed, every check passed."""
    if error or report is None or any(not c.passed for c in checks):
        return False
    changed = any(x.changes for x in report.diffs) or report.new_locks
    return not changed and report.verdict.passed and not report.verdict.acknowledged


def render_comment(
    report: GateReport | None,
    *,
    base: str,
    checks: Sequence[CheckResult] = (),
    error: str = "",
    cap: int = COMMENT_CAP,
) -> str:
    """The comment for a gate ``report``; or, when the gate could not run, for its ``error``."""
    w = _Writer(cap=cap)
    w.add(MARKER)
    if quiet(report, checks, error):
        w.add(QUIET)
    failed = [c for c in checks if not c.passed]
    state = "ERROR" if error else "FAIL" if (report and not report.verdict.passed) or failed else "PASS"
    w.add(f"## megacpp-env lock gate: {state}", "")
    if error or report is None:
        w.add(f"The gate could not run: {code(error or 'no report', limit=1000)}", "")
        w.add(f"Base {code(base)}.", "")
    else:
        w.add(_verdict(report), "", f"Base {code(report.base)} at {code(report.commit[:12])}.", "")
        _summary(w, report)
    _checks(w, checks)
    if report is not None:
        _findings(w, report)
        _details(w, report)
    _logs(w, failed)
    if w.left_out:
        w.add(
            f"Left out to fit a comment: {w.left_out} row(s). The whole report: the job log, or "
            f"{code(f'megacpp-env gate --base {base}', limit=120)} (add --json for every field).",
        )
    return "\n".join(w.lines).rstrip("\n") + "\n"


def _verdict(report: GateReport) -> str:
    v = report.verdict
    if v.passed:
        n = len(v.acknowledged)
        return "Verdict: PASS" + (f" ({n} acknowledged change(s))" if n else "")
    return (
        f"Verdict: FAIL: {len(v.violations)} unacknowledged violation(s); acknowledge each in "
        f"{code('locks/' + report.ack_name)} (reviewed in this pull request) or undo it"
    )


def _summary(w: _Writer, report: GateReport) -> None:
    changed = [x for x in report.diffs if x.changes]
    if not changed:
        w.add("No lock changes.", "")
    by_lock: dict[str, list[Violation]] = {}
    for v in report.verdict.violations:
        by_lock.setdefault(v.lock, []).append(v)
    acked: dict[str, int] = {}
    for v, _ack in report.verdict.acknowledged:
        acked[v.lock] = acked.get(v.lock, 0) + 1
    rows = [
        f"| {code(x.title, cell=True)} | {d.summary(x)} | {x.unchanged} | {len(by_lock.get(x.title, []))} | "
        f"{acked.get(x.title, 0)} |"
        for x in changed
    ]
    w.section(["| lock | changes | unchanged | violations | acknowledged |", "|---|---|---:|---:|---:|"], rows)
    if report.new_locks:
        w.section(["New locks (no base to compare; only the divergence rule applies):", ""],
                  [f"- {code(t)}" for t in report.new_locks])  # fmt: skip
    same = [x.title for x in report.diffs if not x.changes and x.title not in report.new_locks]
    if same:
        w.add(f"Unchanged locks: {len(same)}.", "")
    w.section(["Consistency:", ""], [f"- {code(r.summary())}" for r in report.reports])


def _checks(w: _Writer, checks: Sequence[CheckResult]) -> None:
    rows = [
        f"| {code(c.name, cell=True)} | {'passed' if c.passed else f'failed (exit {c.exit_code})'} |" for c in checks
    ]
    w.section(["| check | result |", "|---|---|"], rows)


def _violation(v: Violation) -> str:
    detail = f": {code(v.detail)}" if v.detail else ""
    return f"- {code(v.lock)}: {code(v.package)} {code(v.change)} ({v.rule}){detail}"


def _findings(w: _Writer, report: GateReport) -> None:
    v = report.verdict
    # shares of the room left: what fails first, and some room for the collapsed details after it
    w.section([f"### Violations ({len(v.violations)})", ""], [_violation(x) for x in v.violations], share=0.5)
    w.section(
        [f"### Acknowledged ({len(v.acknowledged)})", ""],
        [f"{_violation(x)}; reason: {code(a.reason)}" for x, a in v.acknowledged],
        share=0.4,
    )
    w.section(
        [f"### Unused acknowledgements ({len(v.unused)}): remove them", ""],
        [f"- {_ack(a)}" for a in v.unused],
        share=0.2,
    )


def _ack(a: Ack) -> str:
    scope = [f"{k} {code(val)}" for k, val in (("target", a.target), ("platform", a.platform), ("version", a.version))
             if val]  # fmt: skip
    return f"{code(a.package)} {code(a.change)}" + (f" ({', '.join(scope)})" if scope else "")


def _details(w: _Writer, report: GateReport) -> None:
    changed = [x for x in report.diffs if x.changes]
    if not changed:
        return
    total = sum(len(x.changes) for x in changed)
    opened = False
    for i, x in enumerate(changed):
        head = [f"#### {code(x.title)}: {d.summary(x)}; {x.unchanged} unchanged", "",
                "| package | direct | change | old | new | details |", "|---|---|---|---|---|---|"]  # fmt: skip
        if not opened:
            head = [f"<details><summary>Lock changes: {total} in {len(changed)} lock(s)</summary>", "", *head]
        share = 1 / (len(changed) - i)  # each lock an equal part of what is left
        if w.section(head, [_change_row(c) for c in x.changes], share=share):
            opened = True
        w.section([], [f"- note: {code(n)}" for n in x.notes], share=share)
    if opened:
        w.add("</details>", "")


def _change_row(c: d.PackageChange) -> str:
    cells = [code(c.label, cell=True), "yes" if c.direct else "", d.change_text(c),
             code(c.old or "-", cell=True), code(c.new or "-", cell=True),
             code("; ".join(c.details), cell=True) if c.details else ""]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def _logs(w: _Writer, failed: Sequence[CheckResult]) -> None:
    """Each failing check's output, collapsed: as much of its end as the budget leaves."""
    for c in failed:
        name = c.name if c.name.replace("-", "").isalnum() else "a check"  # inside HTML: no markup
        head = f"<details><summary>Output of {name} (exit {c.exit_code})</summary>"
        room = w.cap - _RESERVE - w.size - len(head) - 40
        if room < 200:
            w.left_out += 1
            continue
        w.add(head, "", *fenced(c.log or "(no output)", limit=min(LOG_LIMIT, room - 40)), "", "</details>", "")
