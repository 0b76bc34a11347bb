"""Classify every change between two locks (PEP 751 or pip-compile requirements with hashes) and
render the result as text, GitHub-flavoured markdown (one table per lock, direct deps first, a verdict
line last) or JSON.

Kinds: added, removed, upgraded (level major/minor/patch/pre-release/post/local), downgraded,
hashes-changed (same version, different artifact hashes), index-changed, commit-moved (VCS), marker-changed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from packaging.version import InvalidVersion, Version

from megacpp_env.lock.escape import code, plain, scrub
from megacpp_env.lock.pylock import Lock, LockedPackage, LockFormatError, lock_from_data, read_pylock_text
from megacpp_env.lock.reqtxt import read_requirements_text
from megacpp_env.records import Record, parse_toml, read_text

ADDED, REMOVED, UPGRADED, DOWNGRADED = "added", "removed", "upgraded", "downgraded"
HASHES, INDEX, COMMIT, MARKER = "hashes-changed", "index-changed", "commit-moved", "marker-changed"
KINDS = (ADDED, REMOVED, UPGRADED, DOWNGRADED, HASHES, INDEX, COMMIT, MARKER)


@dataclass(frozen=True, kw_only=True, slots=True)
class PackageChange(Record):
    name: str
    kinds: tuple[str, ...]
    marker: str = ""  # set when the lock has several entries of this name (one per marker)
    old: str = ""  # version (or commit for VCS)
    new: str = ""
    level: str = ""  # for upgraded/downgraded
    direct: bool = False
    details: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.name} ; {self.marker}" if self.marker else self.name


@dataclass(frozen=True, kw_only=True, slots=True)
class LockDiff:
    title: str  # "smoke linux/arm64" or "OLD -> NEW"
    changes: tuple[PackageChange, ...]
    unchanged: int = 0
    old_path: str = ""
    new_path: str = ""
    notes: tuple[str, ...] = field(default=())

    def count(self, kind: str) -> int:
        return sum(kind in c.kinds for c in self.changes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "old": self.old_path,
            "new": self.new_path,
            "unchanged": self.unchanged,
            "changes": [c.to_dict() for c in self.changes],
            "notes": list(self.notes),
            "counts": {k: self.count(k) for k in KINDS if self.count(k)},
        }

    def render(self, fmt: str) -> str:
        """This diff alone in ``fmt`` (text, markdown or json), with its verdict line."""
        return render([self], fmt)


def read_any_text(text: str, path: str) -> Lock:
    """PEP 751 when the file is named ``*.toml`` (a broken one is then a TOML or PEP 751 error,
    never misread as requirements) or the text is TOML with ``lock-version`` (or ``[[packages]]``);
    else pip-compile requirements (a requirements file is rarely valid TOML, never one with those keys)."""
    if path.endswith(".toml"):
        return read_pylock_text(text, path=path)
    try:
        data = parse_toml(text, path, LockFormatError)
    except LockFormatError:
        data = {}
    if "lock-version" in data or "packages" in data:
        return lock_from_data(data, path)  # parsed once: the TOML above is the lock's
    return read_requirements_text(text, path=path)


def read_any(path: str | Path) -> Lock:
    try:
        text = read_text(Path(path), LockFormatError)
    except FileNotFoundError:
        raise LockFormatError("no such file", file=str(path)) from None
    return read_any_text(text, str(path))


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def upgrade_level(old: Version, new: Version) -> str:
    o, n = (*old.release, 0, 0, 0)[:3], (*new.release, 0, 0, 0)[:3]
    for lvl, a, b in (("major", o[0], n[0]), ("minor", o[1], n[1]), ("patch", o[2], n[2])):
        if a != b:
            return lvl
    if old.release != new.release:
        return "patch"
    if old.is_prerelease or new.is_prerelease or old.pre != new.pre or old.dev != new.dev:
        return "pre-release"
    return "post" if old.post != new.post else "local"


def _version_change(old: LockedPackage, new: LockedPackage) -> tuple[str, str]:
    if old.shown_version == new.shown_version:
        return "", ""
    ov, nv = _version(old.shown_version), _version(new.shown_version)
    if ov is None or nv is None:
        return UPGRADED, ""
    if ov == nv:  # 1.0 vs 1.0.0: the same version
        return "", ""
    return (UPGRADED if nv > ov else DOWNGRADED), upgrade_level(ov, nv)


def _hash_detail(old: LockedPackage, new: LockedPackage) -> str:
    if not old.hashes or not new.hashes or old.hashes == new.hashes:
        return ""
    old_files = {a.filename: a.sha256 for a in old.artifacts if a.url}
    new_files = {a.filename: a.sha256 for a in new.artifacts if a.url}
    moved = [f for f in sorted(old_files.keys() & new_files.keys()) if old_files[f] != new_files[f]]
    if moved:
        return "; ".join(f"re-uploaded {f}: sha256 {old_files[f][:12]}.. -> {new_files[f][:12]}.." for f in moved)
    added, removed = len(new.hashes - old.hashes), len(old.hashes - new.hashes)
    return f"artifact hashes changed: {added} added, {removed} removed"


def _same_name_changes(old: LockedPackage, new: LockedPackage) -> PackageChange | None:
    kinds: list[str] = []
    details: list[str] = []
    kind, level = _version_change(old, new)
    if kind:
        kinds.append(kind)
    elif detail := _hash_detail(old, new):
        kinds.append(HASHES)
        details.append(detail)
    if not (old.vcs or new.vcs) and (moved := _origin_change(old, new)):
        kinds.append(INDEX)
        details.append(moved)
    if old.vcs and new.vcs and old.vcs.commit != new.vcs.commit:
        kinds.append(COMMIT)
        details.append(f"{new.vcs.url}: {old.vcs.commit[:12]} -> {new.vcs.commit[:12]}")
    if old.marker != new.marker:
        kinds.append(MARKER)
        details.append(f"marker {old.marker or '(none)'!r} -> {new.marker or '(none)'!r}")
    if not kinds:
        return None
    return PackageChange(
        name=new.name,
        kinds=tuple(kinds),
        old=_label(old),
        new=_label(new),
        level=level,
        direct=old.direct or new.direct,
        details=tuple(details),
    )


def _hosts(p: LockedPackage) -> frozenset[str]:
    """``scheme://host[:port]`` of each artifact URL: never the userinfo (credentials are no origin,
    and must not reach a report)."""
    out = set()
    for a in p.artifacts:
        parts = urlsplit(a.url)
        host = parts.netloc.rpartition("@")[2]
        if host:
            out.add(f"{parts.scheme}://{host}")
    return frozenset(out)


def _origin_change(old: LockedPackage, new: LockedPackage) -> str:
    """Where the files come from: the recorded index when both sides record one, and always the
    hosts of the artifact URLs (a file served from a host the old lock did not use is a change; an
    index recorded on one side only is not)."""
    if old.index and new.index and old.index.rstrip("/") != new.index.rstrip("/"):
        return f"index {old.index.rstrip('/')} -> {new.index.rstrip('/')}"
    fresh = _hosts(new) - _hosts(old)
    if fresh and _hosts(old):
        return f"artifacts from {', '.join(sorted(fresh))} (before: {', '.join(sorted(_hosts(old)))})"
    return ""


# ---- what a platform would install ------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Effective:
    """What one lock lets a platform install of one name: every entry whose marker holds there."""

    versions: frozenset[str]
    hashes: frozenset[str]
    hosts: frozenset[str]


def _environment(lock: Lock) -> dict[str, str] | None:
    """Marker environment of the lock's own platform and Python ([tool.megacpp-env]); None if unknown."""
    meta = lock.meta
    if meta is None or not meta.platform or not meta.python:
        return None
    arch = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}.get(meta.platform, meta.platform.rpartition("/")[2])
    return {
        "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix", "platform_machine": arch,
        "python_version": meta.python, "python_full_version": f"{meta.python}.0",
        "implementation_name": "cpython", "platform_python_implementation": "CPython",
    }  # fmt: skip


def effective(lock: Lock, name: str, env: dict[str, str] | None) -> Effective:
    from packaging.markers import InvalidMarker, Marker, UndefinedEnvironmentName

    chosen = []
    for p in lock.packages:
        if p.name != name:
            continue
        try:
            holds = env is None or not p.marker or Marker(p.marker).evaluate(env)
        except (InvalidMarker, UndefinedEnvironmentName):
            holds = True  # unknown: count it (a change to it must show)
        if holds:
            chosen.append(p)
    return Effective(
        versions=frozenset(str(_version(p.shown_version) or p.shown_version) for p in chosen),
        hashes=frozenset(h for p in chosen for h in p.hashes),
        hosts=frozenset(h for p in chosen for h in _hosts(p)),
    )


def _platform_change(name: str, old: Lock, new: Lock) -> PackageChange | None:
    """The change a platform would see for ``name``, however the entries are split or merged."""
    env = _environment(new) or _environment(old)
    a, b = effective(old, name, env), effective(new, name, env)
    kinds, details = [], []
    if a.versions != b.versions:
        ov = max((v for v in map(_version, a.versions) if v), default=None)
        nv = max((v for v in map(_version, b.versions) if v), default=None)
        kinds.append(DOWNGRADED if ov and nv and nv < ov else UPGRADED)
    elif a.hashes != b.hashes:
        kinds.append(HASHES)
        details.append(
            f"hashes this platform accepts: {len(b.hashes - a.hashes)} added, {len(a.hashes - b.hashes)} removed"
        )
    if b.hosts - a.hosts and a.hosts:
        kinds.append(INDEX)
        details.append(f"artifacts from {', '.join(sorted(b.hosts - a.hosts))}")
    if not kinds:
        return None
    return PackageChange(
        name=name, kinds=tuple(kinds), old=", ".join(sorted(a.versions)), new=", ".join(sorted(b.versions)),
        direct=any(p.direct for p in (*old.packages, *new.packages) if p.name == name), details=tuple(details),
    )  # fmt: skip


def _label(p: LockedPackage) -> str:
    return p.shown_version or (p.vcs.commit[:12] if p.vcs else "")


def _one_side(key: tuple[str, str], pkg: LockedPackage, kind: str) -> PackageChange:
    old, new = (_label(pkg), "") if kind == REMOVED else ("", _label(pkg))
    return PackageChange(name=key[0], marker=key[1], kinds=(kind,), old=old, new=new, direct=pkg.direct)


def diff_locks(old: Lock, new: Lock, *, title: str = "") -> LockDiff:
    o, n = old.by_key(), new.by_key()
    changes: list[PackageChange] = []
    for key in sorted(o.keys() | n.keys()):
        if key not in n:
            changes.append(_one_side(key, o[key], REMOVED))
        elif key not in o:
            changes.append(_one_side(key, n[key], ADDED))
        elif change := _same_name_changes(o[key], n[key]):
            changes.append(replace(change, marker=key[1]))
    reported = {(c.name, k) for c in changes for k in c.kinds}
    for name in sorted({p.name for p in old.packages} & {p.name for p in new.packages}):
        platform = _platform_change(name, old, new)
        if platform and any((name, k) not in reported for k in platform.kinds):
            changes.append(platform)  # e.g. an entry split by marker that hides a hash swap
    changes.sort(key=lambda c: (not c.direct, c.name, c.marker))
    both = o.keys() & n.keys()
    unchanged = len(both - {(c.name, c.marker) for c in changes})  # a name two changes explain counts once
    return LockDiff(title=title, changes=tuple(changes), unchanged=unchanged, old_path=old.path, new_path=new.path)


# ---- rendering --------------------------------------------------------------------------------


def change_text(c: PackageChange) -> str:
    kinds = [f"{k} ({c.level})" if k in (UPGRADED, DOWNGRADED) and c.level else k for k in c.kinds]
    return ", ".join(kinds)


def summary(d: LockDiff) -> str:
    counts = [f"{d.count(k)} {k}" for k in KINDS if d.count(k)]
    return ", ".join(counts) if counts else "no changes"


def render_text(diffs: Sequence[LockDiff], verdict: str = "", extra: Sequence[str] = ()) -> str:
    out: list[str] = []
    for d in diffs:
        out.append(f"{d.title}: {summary(d)} ({d.unchanged} unchanged)")
        for c in d.changes:
            versions = f"{c.old or '-'} -> {c.new or '-'}"
            tail = f"  [{'; '.join(c.details)}]" if c.details else ""
            out.append(f"  {'*' if c.direct else ' '} {c.label:<32} {change_text(c):<28} {versions}{tail}")
        out += [f"  note: {note}" for note in d.notes]
    out += [line for line in extra if line or out]
    lines = [plain(line) for line in out]  # every line holding a value from a lock or an ack file
    if verdict:  # the tool's own words and counts: no value of an input, so not scanned for credentials
        lines.append(verdict)
    return "".join(f"{line}\n" for line in lines) if lines else "\n"


def render_markdown(diffs: Sequence[LockDiff], verdict: str = "") -> str:
    """GitHub-flavoured markdown: every value from a lock a code span (``lock.escape.code``)."""
    out: list[str] = []
    for d in diffs:
        out += [f"### {code(d.title)}", "", f"{summary(d)}; {d.unchanged} unchanged.", ""]
        if d.changes:
            out += ["| package | direct | change | old | new | details |", "|---|---|---|---|---|---|"]
            for c in d.changes:
                cells = [code(c.label, cell=True), "yes" if c.direct else "", change_text(c),
                         code(c.old or "-", cell=True), code(c.new or "-", cell=True),
                         code("; ".join(c.details), cell=True) if c.details else ""]  # fmt: skip
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
        out += [f"- note: {code(note)}" for note in d.notes]
    if verdict:
        out += ["", verdict] if out and out[-1] else [verdict]
    return "\n".join(out).strip("\n") + "\n"


def render(
    diffs: Sequence[LockDiff],
    fmt: str,
    *,
    verdict: str = "",
    extra: Sequence[str] = (),
    payload: dict[str, Any] | None = None,
) -> str:
    if fmt == "json":
        body = {"locks": [d.to_dict() for d in diffs], **(payload or {})}
        return json.dumps(scrub(body), indent=2, sort_keys=True) + "\n"
    if fmt == "markdown":
        return render_markdown(diffs, verdict or _default_verdict(diffs))
    return render_text(diffs, verdict or _default_verdict(diffs), extra)


def _default_verdict(diffs: Sequence[LockDiff]) -> str:
    n = sum(len(d.changes) for d in diffs)
    return f"Verdict: {n} package change(s)" if n else "Verdict: no changes"


def diff_files(old: str, new: str) -> LockDiff:
    """``lock diff OLD NEW``: read both locks (PEP 751 or requirements with hashes) and diff them."""
    old_lock, new_lock = read_any(old), read_any(new)
    return diff_locks(old_lock, new_lock, title=f"{old} -> {new}")
