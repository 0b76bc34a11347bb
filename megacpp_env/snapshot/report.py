"""Render a ``DiffReport`` as text (terminal), markdown (a PR or issue comment) or JSON, and a
snapshot as the short summary ``snapshot`` prints."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # a plain snapshot renders no diff: diff is not imported for it
    from megacpp_env.snapshot.diff import DiffReport
    from megacpp_env.snapshot.document import Snapshot
    from megacpp_env.spec.model import Spec


def _gpus(gpu: dict[str, Any]) -> str:
    """``8 x NVIDIA H100 80GB HBM3 (132 SMs, 700 W)``, one group per distinct model and setting."""
    groups: dict[str, int] = {}
    for g in gpu.get("devices") or []:
        bits = [
            f"{g['sm_count']} SMs" if g.get("sm_count") else "",
            f"{g['power_limit_w']:g} W" if g.get("power_limit_w") else "",
        ]
        detail = ", ".join(b for b in bits if b)
        label = f"{g.get('name')}{f' ({detail})' if detail else ''}"
        groups[label] = groups.get(label, 0) + 1
    if groups:
        return ", ".join(f"{n} x {label}" if n > 1 else label for label, n in groups.items())
    return f"none ({gpu['reason']})" if gpu.get("present") is False else "none"  # no GPU: a fact, not a failure


def _repo(repo: dict[str, Any]) -> str:
    if not repo.get("git"):
        return "none (not in a git work tree)"
    dirty = " with local changes" if repo.get("dirty") else ""
    return f"{repo.get('path')} at {str(repo.get('commit'))[:12]}{dirty} (not in the digest)"


def render_summary(snap: Snapshot) -> str:
    py = snap.area("python")
    dists = py.get("distributions") or {}
    drifted = sorted(d["name"] for d in dists.values() if (d.get("integrity") or {}).get("status") == "drifted")
    errors = sorted(name for name, area in snap.facts.items() if isinstance(area, dict) and "error" in area)
    lines = [
        f"snapshot {snap.digest}",
        f"  python {(py.get('interpreter') or {}).get('version', '?')}: {len(dists)} distributions, "
        f"{snap.timing.get('integrity', {}).get('files', 0)} files verified, "
        f"{len(drifted)} with drift{': ' + ', '.join(drifted) if drifted else ''}",
        f"  gpu: {_gpus(snap.area('gpu'))}",
        f"  checkouts: {len(snap.area('checkouts'))}",
    ]
    if isinstance(snap.live.get("repo"), dict):
        lines.append(f"  training repository: {_repo(snap.live['repo'])}")
    if errors:
        lines.append(f"  collectors that failed: {', '.join(errors)}")
    lines.append(f"  took {snap.timing.get('total', 0):.2f}s")
    return "\n".join(lines) + "\n"


def render_timings(snap: Snapshot, *, started: float | None, total: float | None) -> str:
    """``snapshot --timings``: where the seconds went. ``started``: seconds from the process's start
    to the snapshot's (interpreter start, imports, argument checks); ``total``: to now. Collectors
    run at once, so the snapshot's wall time is its slowest collector's (the critical path) plus
    the probe and the assembly."""
    timing = snap.timing
    areas = {k: v for k, v in timing.items() if isinstance(v, (int, float)) and k not in ("total", "probe")}
    slowest = max(sorted(areas), key=lambda k: areas[k], default="")  # a tie: the first by name
    lines = ["timings (s):"]
    if started is not None:
        lines.append(f"  process start to snapshot   {started:7.3f}  (interpreter, imports, argument checks)")
    lines.append(f"  snapshot                    {timing.get('total', 0):7.3f}  (critical path: {slowest or '-'})")
    lines += [f"    {k:<25} {v:7.3f}" for k, v in sorted(areas.items(), key=lambda kv: -kv[1])]
    lines.append(f"    {'probe (cached: 0)':<25} {timing.get('probe', 0):7.3f}")
    integrity = timing.get("integrity")
    if isinstance(integrity, dict):
        sec = integrity.get("seconds", {})
        lines.append(
            f"    integrity: {integrity.get('files', 0)} files, {integrity.get('hashed', 0)} hashed "
            f"({integrity.get('bytes_hashed', 0) / 1e9:.2f} GB), {integrity.get('cache_hits', 0)} cached, "
            f"{integrity.get('workers', 0)} workers, slowest {sec.get('worker_max', 0):.3f}"
        )
    if total is not None:
        lines.append(f"  process, all told           {total:7.3f}")
    return "\n".join(lines) + "\n"


def _summary(report: DiffReport) -> str:
    counts = report.counts()
    parts = [f"{n} {s}" for s, n in counts.items() if n and s != "note"]  # they add up to the total
    notes = counts.get("note", 0)
    ignored = (f"; {notes} note(s)" if notes else "") + (f"; {len(report.ignored)} ignored" if report.ignored else "")
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


def explain_drift(a: Path, b: Path, ignore: Sequence[str], spec: Spec | None, fmt: str) -> tuple[DiffReport, str]:
    """``diff A B``: the drift between two snapshot files (``ignore`` and the spec's
    ``snapshot.ignore`` patterns left out), and its rendering in ``fmt``."""
    from megacpp_env.snapshot.diff import diff_snapshots
    from megacpp_env.snapshot.document import load_snapshot
    from megacpp_env.snapshot.golden import ignore_patterns

    patterns = ignore_patterns(ignore, spec)
    report = diff_snapshots(load_snapshot(a), load_snapshot(b), ignore=patterns, a_label=str(a), b_label=str(b))
    return report, render(report, fmt)
