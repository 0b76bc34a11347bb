"""Render a ``DiffReport`` as text (terminal), markdown (a PR or issue comment) or JSON."""

from __future__ import annotations

import json

from megacpp_env.snapshot.diff import DiffReport


def _summary(report: DiffReport) -> str:
    counts = report.counts()
    parts = [f"{n} {s}" for s, n in counts.items() if n]
    ignored = f"; {len(report.ignored)} ignored" if report.ignored else ""
    if not report.drift:
        same = "same digest" if report.a_digest == report.b_digest else "no drift outside the ignore list"
        return f"no drift between {report.a_label} and {report.b_label} ({same}){ignored}"
    total = sum(n for s, n in counts.items() if s != "note")
    return f"drift between {report.a_label} and {report.b_label}: {total} difference(s) ({', '.join(parts)}){ignored}"


def render_text(report: DiffReport) -> str:
    lines = [_summary(report), f"  {report.a_label}: {report.a_digest}", f"  {report.b_label}: {report.b_digest}"]
    for area, findings in report.by_area():
        lines.append(f"{area}")
        lines.extend(f"  {f.severity:<8} {f.message}" for f in findings)
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: DiffReport) -> str:
    lines = [
        "### megacpp-env snapshot diff",
        "",
        _summary(report),
        "",
        f"- `{report.a_label}`: `{report.a_digest}`",
        f"- `{report.b_label}`: `{report.b_digest}`",
    ]
    for area, findings in report.by_area():
        lines += ["", f"#### {area}", "", "| severity | finding |", "|---|---|"]
        lines.extend(f"| {f.severity} | {_md(f.message)} |" for f in findings)
    if report.ignored:
        lines += ["", f"<details><summary>{len(report.ignored)} ignored</summary>", ""]
        lines.extend(f"- {_md(f.message)}" for f in report.ignored)
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def render_json(report: DiffReport) -> str:
    return json.dumps(report.to_dict(), indent=2, sort_keys=True) + "\n"


def render(report: DiffReport, fmt: str) -> str:
    return {"text": render_text, "markdown": render_markdown, "json": render_json}[fmt](report)
