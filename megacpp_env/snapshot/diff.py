"""Explain the drift between two snapshots: findings grouped by area, ranked by severity.

Every difference in the hashed facts is a finding (nothing is silently dropped: areas without a
dedicated explainer fall back to ``key: old -> new``). Host/timing differences are ``note``s,
shown but never drift. ``--ignore`` patterns (fnmatch) are matched against a finding's dotted key
and every prefix of it, so ``gpu`` ignores the whole area and ``env.NCCL_*`` some variables.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from megacpp_env.findings import SEVERITIES, CodeDoc, Finding, Severity
from megacpp_env.snapshot import registry
from megacpp_env.snapshot.document import Snapshot, errors
from megacpp_env.snapshot.registry import HOST_AREA, HOST_CODE, OTHER_CODE, code_of, label, rank, severity_of

SHOW_FILES = 5
Explainer = Callable[[Mapping[str, Any], Mapping[str, Any]], list[Finding]]


def area_codes() -> dict[str, str]:
    """area -> the code of a difference there (``explain SD004``), from the registrations; host's too."""
    return {**{c.area: c.code for c in registry.collectors()}, HOST_AREA: HOST_CODE}


def diff_code(area: str) -> str:
    """The code of a difference in ``area``; one no collector registers: SD000."""
    return code_of(area)


def _finding(*, area: str, severity: str, key: str, message: str) -> Finding:
    """A difference in ``area`` (its code is the area's; its severity one of ``findings.SEVERITIES``)."""
    return Finding(code=diff_code(area), severity=cast("Severity", severity), area=area, key=key, message=message)


def codes() -> tuple[CodeDoc, ...]:
    """The documentation of each area's code (``explain``), from the collector registry."""
    family = "snapshot diff (megacpp-env diff, snapshot --check-golden, run, reproduce)"
    docs = [
        CodeDoc(
            code=code,
            severity=cast("Severity", severity_of(area)),
            summary=f"the {area} area differs between two snapshots",
            family=family,
            doc=f"Every difference in the hashed facts of the {area} area ({label(area)}) is a finding of "
            f"severity {severity_of(area)}; `--ignore {area}` (or a dotted key under it) leaves it out.",
            example=f"diff a.json b.json -> {area}\n  {severity_of(area)}  {area}.<key>: <old> -> <new>",
            silence=f"--ignore {area} (or --ignore {area}.<key>), or snapshot.ignore in stack.yaml",
        )
        for area, code in area_codes().items()
    ]
    docs.append(
        CodeDoc(
            code=OTHER_CODE,
            severity="info",
            summary="an area no collector of this version knows differs",
            family=family,
            doc="A snapshot written by another version of the tool has an area this one does not "
            "describe: its differences are reported generically (key: old -> new).",
            example="diff old.json new.json -> info  newarea.x: 1 -> 2",
            silence="--ignore AREA",
        )
    )
    return tuple(docs)


@dataclass(frozen=True, kw_only=True, slots=True)
class DiffReport:
    a_label: str
    b_label: str
    a_digest: str
    b_digest: str
    findings: tuple[Finding, ...]
    ignored: tuple[Finding, ...] = ()

    @property
    def drift(self) -> bool:
        return any(f.severity != "note" for f in self.findings)

    def by_area(self) -> list[tuple[str, list[Finding]]]:
        groups: dict[str, list[Finding]] = {}
        for f in self.findings:
            groups.setdefault(f.area, []).append(f)
        return sorted(groups.items(), key=lambda kv: (SEVERITIES.index(kv[1][0].severity), rank(kv[0])))

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.severity == s) for s in registry.SEVERITIES}

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": {"label": self.a_label, "digest": self.a_digest},
            "b": {"label": self.b_label, "digest": self.b_digest},
            "same_digest": self.a_digest == self.b_digest,
            "drift": self.drift,
            "counts": self.counts(),
            "findings": [f.to_dict() for f in self.findings],
            "ignored": [f.to_dict() for f in self.ignored],
        }


def show(value: Any) -> str:
    if value is None:
        return "unset"
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= 120 else text[:117] + "..."


def _files(items: Sequence[str]) -> str:
    shown = ", ".join(items[:SHOW_FILES])
    return shown + (f" (+{len(items) - SHOW_FILES} more)" if len(items) > SHOW_FILES else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# ---- generic ----------------------------------------------------------------------------------


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(obj, dict) and obj:
        out: dict[str, Any] = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: obj}


def generic(
    area: str, a: Any, b: Any, *, severity: str | None = None, base: str = "", label: str = ""
) -> list[Finding]:
    """``label: key: old -> new`` for every differing leaf (keys relative to ``base``)."""
    fa, fb = flatten(a, base), flatten(b, base)
    sev = severity or severity_of(area)
    out = []
    for key in sorted(fa.keys() | fb.keys()):
        if fa.get(key) == fb.get(key):
            continue
        rel = key.removeprefix(base).lstrip(".") or key
        out.append(
            _finding(
                area=area,
                severity=sev,
                key=f"{area}.{key}" if key else area,
                message=f"{label or area}: {rel}: {show(fa.get(key))} -> {show(fb.get(key))}",
            )
        )
    return out


# ---- python -----------------------------------------------------------------------------------


def _source(dist: Mapping[str, Any]) -> str:
    url = dist.get("direct_url")
    if not url:
        return "an index"
    vcs = url.get("vcs_info") or {}
    if vcs.get("commit_id"):
        return f"{url.get('url', '')}@{vcs['commit_id']}"
    if (url.get("dir_info") or {}).get("editable"):
        return f"editable {url.get('url', '')}"
    return str(url.get("url", "?"))


def _source_kind(dist: Mapping[str, Any]) -> str:
    url = dist.get("direct_url") or {}
    if not url:
        return "index"
    return "vcs" if "vcs_info" in url else "dir" if "dir_info" in url else "url"


def _integrity(name: str, key: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Finding]:
    out = []
    ia, ib = a.get("integrity") or {}, b.get("integrity") or {}
    for kind, phrase in (
        ("modified", "modified since install"),
        ("removed", "removed since install"),
        ("added", "added to the package since install"),
    ):
        new = [f for f in ib.get(kind, []) if f not in set(ia.get(kind, []))]
        gone = [f for f in ia.get(kind, []) if f not in set(ib.get(kind, []))]
        if new:
            out.append(
                _error(
                    "python",
                    f"python.distributions.{key}.{kind}",
                    f"{name}: {_plural(len(new), 'file')} {phrase}: {_files(new)}",
                )
            )
        if gone:
            out.append(
                _warning(
                    "python",
                    f"python.distributions.{key}.{kind}",
                    f"{name}: {_plural(len(gone), 'file')} no longer {kind}: {_files(gone)}",
                )
            )
    return out


def _dist(key: str, a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[Finding]:
    k = f"python.distributions.{key}"
    if a is None or b is None:
        d = b or a or {}
        verb = "installed" if a is None else "no longer installed"
        return [_error("python", k, f"{d.get('name', key)} {d.get('version', '')}: {verb}")]
    name = f"{b.get('name', key)} {b.get('version', '')}"
    out: list[Finding] = []
    if a.get("version") != b.get("version"):
        out.append(_error("python", f"{k}.version", f"{b.get('name', key)} {a.get('version')} -> {b.get('version')}"))
    elif a.get("record_sha256") != b.get("record_sha256"):
        out.append(_error("python", f"{k}.record_sha256", f"{name}: reinstalled with different files (RECORD differs)"))
    new_version = a.get("version") != b.get("version")
    if _source(a) != _source(b) and not (new_version and _source_kind(a) == _source_kind(b) == "url"):
        out.append(_error("python", f"{k}.direct_url", f"{name}: installed from {_source(a)} -> {_source(b)}"))
    out += _integrity(name, key, a, b)
    rest = {"version", "record_sha256", "direct_url", "integrity", "name"} | (
        {"metadata_dir"} if new_version else set()
    )
    ra, rb = _without(a, b, *rest)
    out += generic("python", ra, rb, severity="warning", base=f"distributions.{key}", label=name)
    return out


def _without(a: Mapping[str, Any], b: Mapping[str, Any], *keys: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``a`` and ``b`` less ``keys``: what is left to compare generically once those are compared."""
    return {k: v for k, v in a.items() if k not in keys}, {k: v for k, v in b.items() if k not in keys}


def diff_python(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Finding]:
    da, db = a.get("distributions") or {}, b.get("distributions") or {}
    out: list[Finding] = []
    for key in sorted(da.keys() | db.keys()):
        if da.get(key) != db.get(key):
            out += _dist(key, da.get(key), db.get(key))
    ia, ib = a.get("interpreter") or {}, b.get("interpreter") or {}
    if ia.get("version") != ib.get("version"):
        out.append(_error("python", "python.interpreter.version", f"python {ia.get('version')} -> {ib.get('version')}"))
    rest_a, rest_b = _without(a, b, "distributions")
    rest_a["interpreter"], rest_b["interpreter"] = _without(ia, ib, "version")
    return out + generic("python", rest_a, rest_b, severity="warning")


# ---- checkouts and env ------------------------------------------------------------------------


def _checkout(name: str, a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[Finding]:
    k = f"checkouts.{name}"
    if b is not None and b.get("has_git") is False and (a is None or a.get("has_git") is not False):
        return [_error("checkouts", f"{k}.has_git", f"{name}: checkout has no .git")]
    if a is None or b is None:
        verb = "appeared" if a is None else "is gone"
        where = (b or a or {}).get("path", "")
        return [_warning("checkouts", k, f"{name}: checkout {verb} ({where})")]
    out: list[Finding] = []
    if a.get("head") != b.get("head"):
        pin = "" if b.get("matches_pin") is not False else f" (pin {str(b.get('expected'))[:12]})"
        out.append(
            _error(
                "checkouts", f"{k}.head", f"{name}: HEAD {str(a.get('head'))[:12]} -> {str(b.get('head'))[:12]}{pin}"
            )
        )
    if (a.get("dirty"), a.get("diff_hash")) != (b.get("dirty"), b.get("diff_hash")) and b.get("dirty"):
        what = "local changes differ" if a.get("dirty") else "local changes"
        out.append(_error("checkouts", f"{k}.dirty", f"{name}: {what} (diff {str(b.get('diff_hash'))[:19]})"))
    skip = {"head", "matches_pin"} | ({"dirty", "diff_hash"} if out and b.get("dirty") else set())
    ra, rb = _without(a, b, *skip)
    return out + generic("checkouts", ra, rb, severity="error", base=name, label=name)


def diff_checkouts(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    for name, ca, cb in _changed(a, b):
        out += _checkout(name, ca, cb)
    return out


def _changed(a: Mapping[str, Any], b: Mapping[str, Any], key: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(name, A's entry, B's entry) for each name (under ``key`` when given) whose entry differs, in
    name order; a missing entry is None."""
    da, db = (a.get(key) or {}, b.get(key) or {}) if key else (a, b)
    for name in sorted(da.keys() | db.keys()):
        if da.get(name) != db.get(name):
            yield name, da.get(name), db.get(name)


def _warning(area: str, key: str, message: str) -> Finding:
    return _finding(area=area, severity="warning", key=key, message=message)


def _error(area: str, key: str, message: str) -> Finding:
    return _finding(area=area, severity="error", key=key, message=message)


def _note(area: str, key: str, message: str) -> Finding:
    return _finding(area=area, severity="note", key=key, message=message)


def _info(area: str, key: str, message: str) -> Finding:
    return _finding(area=area, severity="info", key=key, message=message)


def diff_env(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Finding]:
    out = [
        _warning("env", f"env.{name}", f"env {name}: {show(va)} -> {show(vb)}")
        for name, va, vb in _changed(a, b, "variables")
    ]
    rest_a, rest_b = _without(a, b, "variables")
    return out + generic("env", rest_a, rest_b)


def diff_runtime(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Finding]:
    out: list[Finding] = []
    for name, gate_a, gate_b in _changed(a, b, "patch_gates"):
        xa, xb = gate_a or {}, gate_b or {}
        if xa.get("value") != xb.get("value"):
            env = xb.get("env") or xa.get("env")
            message = f"runtime patch {name} ({env}): {show(xa.get('value'))} -> {show(xb.get('value'))}"
            out.append(_warning("runtime", f"runtime.patch_gates.{name}", message))
    for name, xa, xb in _changed(a, b, "patches"):
        sa, sb = (xa or {}).get("state"), (xb or {}).get("state")
        if sa != sb:
            out.append(
                _warning("runtime", f"runtime.patches.{name}", f"runtime patch {name}: {show(sa)} -> {show(sb)}")
            )
    ha, hb = a.get("hook_files") or {}, b.get("hook_files") or {}
    for path, _ea, _eb in _changed(ha, hb):
        state = "installed" if path not in ha else "removed" if path not in hb else "changed"
        out.append(_warning("runtime", "runtime.hook_files", f"runtime hook {path}: {state}"))
    return out


def diff_torch(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Finding]:
    """One note, not one finding per fact, when only one snapshot imported torch (``--torch``)."""
    ia, ib = a.get("imported"), b.get("imported")
    if isinstance(ia, dict) == isinstance(ib, dict):
        return generic("torch", a, b)
    side = "B" if isinstance(ib, dict) else "A"
    out = [
        _note(
            "torch",
            "torch.imported",
            f"torch: only {side} imported torch (taken with --torch); its import facts are not compared",
        )
    ]
    rest_a, rest_b = _without(a, b, "imported")
    return out + generic("torch", rest_a, rest_b)


def _by_index(devices: Any) -> dict[str, Any]:
    items = devices if isinstance(devices, list) else []
    return {str(d.get("index", i)): d for i, d in enumerate(items) if isinstance(d, dict)}


def diff_gpu(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Finding]:
    """GPU by GPU (``gpu.devices.0.power_limit_w: 700.0 -> 500.0``), not one line for the list."""
    da, db = _by_index(a.get("devices")), _by_index(b.get("devices"))
    out: list[Finding] = []
    for index in sorted(da.keys() | db.keys(), key=int):
        xa, xb = da.get(index), db.get(index)
        if xa is None or xb is None:
            d = xb or xa or {}
            verb = "appeared" if xa is None else "is gone"
            msg = f"gpu {index}: {d.get('name', '?')} {verb}"
            out.append(_warning("gpu", f"gpu.devices.{index}", msg))
        elif xa != xb:
            out += generic("gpu", xa, xb, base=f"devices.{index}", label=f"gpu {index} ({xb.get('name', '?')})")
    rest_a, rest_b = _without(a, b, "devices")
    return out + generic("gpu", rest_a, rest_b)


def diff_system(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Finding]:
    """CPU flags as what was added and removed, not the whole list."""
    fa, fb = set(a.get("cpu_flags") or ()), set(b.get("cpu_flags") or ())
    out = []
    if fa != fb:
        change = [*(f"+{f}" for f in sorted(fb - fa)), *(f"-{f}" for f in sorted(fa - fb))]
        out.append(_info("system", "system.cpu_flags", f"cpu flags: {' '.join(change)}"))
    rest_a, rest_b = _without(a, b, "cpu_flags")
    return out + generic("system", rest_a, rest_b)


def explainer(name: str) -> Explainer | None:
    """The explainer a registration names (``Collector.explain``/``explain_live``): a function of this
    module; "" names none."""
    if not name:
        return None
    found = globals().get(name)
    if not callable(found):
        raise ValueError(f"no explainer {name!r} in megacpp_env/snapshot/diff.py (a collector registration names it)")
    return cast("Explainer", found)


# ---- live: notes only ---------------------------------------------------------------------------


def live_repo(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Finding]:
    """Which commit (and local changes) of the training repository each snapshot was taken at."""

    def state(r: Mapping[str, Any]) -> str:
        if not r.get("git"):
            return "no git repository"
        dirty = f" + local changes ({str(r.get('diff_digest'))[7:19]})" if r.get("dirty") else ""
        return f"{str(r.get('commit'))[:12]}{dirty}"

    if (state(a), a.get("path")) == (state(b), b.get("path")):
        return []
    where = f" ({b.get('path')})" if a.get("path") != b.get("path") else ""
    msg = f"training repository{where}: {state(a)} -> {state(b)}"
    return [_note("repo", "live.repo", msg)]


def live_container(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Finding]:
    """The runtime or image changed (a new container of the same image is not worth a line)."""
    keys = ("runtime", "image", "image_id")
    if all(a.get(k) == b.get(k) for k in keys):
        return []
    old, new = ("/".join(str(x.get(k) or "-") for k in keys) for x in (a, b))
    return [_note("container", "live.container", f"container: {old} -> {new}")]


def _predates(area: str, a: Any, b: Any, a_label: str, b_label: str) -> list[Finding] | None:
    """One note when only one side has ``area`` and its registration reads a document without it as
    older (``older="note"``): that document predates the area, nothing was compared; else None."""
    found = registry.by_area(area)
    if found is None or found.older != "note" or (a is None) == (b is None):
        return None
    older = a_label if a is None else b_label
    msg = f"{area}: {older} predates this area (taken by an older megacpp-env): not compared"
    return [_note(area, area, msg)]


def _versions(a: Snapshot, b: Snapshot) -> Finding:
    """Documents of two schema versions: what the newer one added differs, and the remedy."""
    newer = max(a.schema_version, b.schema_version)
    msg = (
        f"snapshot schema_version {a.schema_version} -> {b.schema_version}: the facts version {newer} added "
        "show as differences; take the older snapshot again with this megacpp-env "
        "(a golden: megacpp-env snapshot --golden NAME)"
    )
    return _note("host", "host.schema_version", msg)


def _ignored(finding: Finding, patterns: Iterable[str]) -> bool:
    parts = finding.key.split(".")
    prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatchcase(p, pat) for pat in patterns for p in prefixes)


def _rank(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), rank(f.area), f.key, f.message)))


def incomplete(snap: Snapshot, label: str) -> list[Finding]:
    """One error finding per part of ``snap`` that could not be read (``document.errors``): however
    equal two snapshots look there, nothing was compared, so they are never "the same"."""
    why = "could not be read, so not compared"
    return [
        _error(line.partition(".")[0].partition(":")[0], f"{line.partition(':')[0]}.error",
               f"{label}: {why}: {line} (remedy: fix the cause, take it again)")
        for line in errors(snap.facts)
    ]  # fmt: skip


def diff_snapshots(
    a: Snapshot, b: Snapshot, *, ignore: Sequence[str] = (), a_label: str = "A", b_label: str = "B"
) -> DiffReport:
    findings: list[Finding] = []
    for area in sorted(a.facts.keys() | b.facts.keys()):
        fa, fb = a.facts.get(area), b.facts.get(area)
        if fa == fb:
            continue
        found = registry.by_area(area)
        explain = explainer(found.explain) if found else None
        predates = _predates(area, fa, fb, a_label, b_label)
        if predates is not None:
            findings += predates
        elif explain and isinstance(fa, dict) and isinstance(fb, dict):
            findings += explain(fa, fb)
        else:
            findings += generic(area, fa, fb)
    # parts of ``live`` worth a note in a diff; the rest (temperatures, clocks now, job ids) never are
    for c in registry.collectors():
        explain_live, la, lb = explainer(c.explain_live), a.live.get(c.area), b.live.get(c.area)
        if explain_live and isinstance(la, dict) and isinstance(lb, dict):
            findings += explain_live(la, lb)
    findings += incomplete(a, a_label) + incomplete(b, b_label)
    if a.schema_version != b.schema_version:
        findings.append(_versions(a, b))
    for key in ("hostname", "memory_total_gib", "tool", "inspected_python"):
        if a.host.get(key) != b.host.get(key):
            findings.append(_note("host", f"host.{key}", f"{key}: {show(a.host.get(key))} -> {show(b.host.get(key))}"))
    kept = [f for f in findings if not _ignored(f, ignore)]
    dropped = [f for f in findings if _ignored(f, ignore)]
    return DiffReport(
        a_label=a_label,
        b_label=b_label,
        a_digest=a.digest,
        b_digest=b.digest,
        findings=_rank(kept),
        ignored=_rank(dropped),
    )
