"""Integrity of installed distributions against their ``RECORD``: modified, removed, added files.

The parent plans: it reads every RECORD once (bytes, for the RECORD hash and the top-level names
each distribution owns), joins distributions that share a top-level name into *groups*, and splits
the costly ones into *units*. Worker processes (``integrity_worker.py``, one per core, started
before the RECORDs are read) parse, stat, consult their hash cache and hash what the cache cannot
vouch for, with no GIL shared between them. They claim their work from one shared queue
(``crew.py``), each item as a worker becomes free: first the big files (a RECORD size of
``BIG_FILE`` or more: the CUDA and torch libraries, about a hundred holding most of the bytes),
which the parent finds in a first, cheap pass over the RECORDs and checks against their own cache
(``BigFiles``), largest first, so the largest starts at once; then the units, costliest first
(``unit_order``). One hashing thread per worker: one per core. Where the last run left a plan
(a repeat, most likely) half the workers start, the rest once big files turn out to need hashing.
Files directly in a site directory that no RECORD names are reported as unowned here.

Every cache (the plan, the big files' hashes, the workers' unit caches) is sealed and validated
before use (``cachefile``); what was discarded is noted (``Verified.notes``), never trusted. A
RECORD row that cannot be read is a finding of its distribution (``malformed``, ``outside``), not a
failure of the run.
"""

# os.path on purpose: ~50,000 paths per snapshot.
# ruff: noqa: PTH113, PTH118, PTH120

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megacpp_env.errors import ToolError
from megacpp_env.snapshot.proc import ProcResult, ProgramFailedError, Programs
from megacpp_env.snapshot.verify import cachefile
from megacpp_env.snapshot.verify import integrity_worker as one
from megacpp_env.snapshot.verify.crew import Crew

WORKER = Path(__file__).with_name("integrity_worker.py")
WORKER_TIMEOUT = 900.0
LIST_CAP = 500
SKIP_SUFFIXES = (".dist-info", ".egg-info", ".data", ".pyc", ".pyo")


@dataclass(frozen=True, kw_only=True, slots=True)
class DistRecord:
    """What the parent needs of one RECORD to plan the work: its hash, the top-level names it
    owns, its size in lines and per top-level subdirectory (to split big groups)."""

    key: str
    dist_info: str
    location: str
    sha256: str
    tops: frozenset[str]  # top-level names under the site directory
    lines: int
    subdirs: dict[str, int]  # "top/a", "top/a/b", "top/a/b/c" -> lines under it
    heavy: dict[str, int]  # "top/sub" ("" for all) -> bytes recorded under it / BYTES_PER_ROW (big files not)
    big: list[list[Any]]  # [rel, "algo=digest", size] of the rows the parent hashes (``big_rows``)

    @property
    def text(self) -> str:
        return Path(self.dist_info, "RECORD").read_bytes().decode("utf-8", errors="replace")

    def to_plan(self, stat: list[int]) -> PlanEntry:
        return PlanEntry(
            stat=tuple(stat), sha256=self.sha256, tops=tuple(sorted(self.tops)), lines=self.lines,
            subdirs=self.subdirs, heavy=self.heavy, big=tuple((r, d, n) for r, d, n in self.big),
        )  # fmt: skip

    @classmethod
    def from_plan(cls, key: str, dist_info: str, entry: PlanEntry) -> DistRecord:
        return cls(
            key=key, dist_info=dist_info, location=os.path.dirname(dist_info), sha256=entry.sha256,
            tops=frozenset(entry.tops), lines=entry.lines, subdirs=dict(entry.subdirs), heavy=dict(entry.heavy),
            big=[list(row) for row in entry.big],
        )  # fmt: skip

    def big_paths(self) -> list[str]:
        return [os.path.join(self.location, rel) for rel, _d, _s in self.big]

    @classmethod
    def from_text(cls, key: str, dist_info: str, data: bytes, big: list[list[Any]] | None = None) -> DistRecord:
        text = data.decode("utf-8", errors="replace")
        big = big_rows(text) if big is None else big
        lined = "\n" + text  # every row starts after a newline: the patterns start with a literal (fast)
        subdirs: dict[str, int] = {}  # "top/a", "top/a/b", "top/a/b/c" -> rows under it
        for chain, rows in Counter(CHAIN_RE.findall(lined)).items():  # one directory chain per row, counted in C
            for level in _levels(chain):
                subdirs[level] = subdirs.get(level, 0) + rows
        heavy = {"": 0}  # hashing time goes with bytes, not rows: the big files' weight, by subdirectory
        for found in BIG_RE.finditer(text):  # a search for ",<5+ digits>" at a line's end: no per-line parse
            n = int(found.group(1)) // BYTES_PER_ROW
            if n and n < BIG_FILE // BYTES_PER_ROW:  # the parent's, not a worker's
                heavy[""] += n
                chain = CHAIN_RE.match(lined, text.rfind("\n", 0, found.start()) + 1, found.start() + 1)
                for level in _levels(chain.group(1) if chain else ""):
                    heavy[level] = heavy.get(level, 0) + n
        # only what a split can choose (the plan is kept: torch has thousands of small directories)
        kept = {p: n for p, n in subdirs.items() if n + heavy.get(p, 0) >= SPLIT_MIN}
        heavy = {p: n for p, n in heavy.items() if not p or p in kept}
        return cls(
            key=key,
            dist_info=dist_info,
            location=os.path.dirname(dist_info),
            sha256=hashlib.sha256(data).hexdigest(),
            tops=_tops(text),
            lines=text.count("\n"),
            subdirs=kept,
            heavy=heavy,
            big=big,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanEntry:
    """What the plan keeps of one RECORD while its stat is unchanged (``read_records``): the RECORD's
    sha256 (the units' cache signature), its top-level names, rows, subdirectories and weights, and
    its big rows (path, "algo=digest", size), the expected digests of the big files."""

    stat: tuple[int, ...]  # size, mtime_ns, inode, ctime_ns of the RECORD
    sha256: str
    tops: tuple[str, ...]
    lines: int
    subdirs: dict[str, int]
    heavy: dict[str, int]
    big: tuple[tuple[str, str, int], ...]

    def to_json(self) -> list[Any]:
        return [list(self.stat), self.sha256, list(self.tops), self.lines, self.subdirs, self.heavy,
                [list(b) for b in self.big]]  # fmt: skip

    @classmethod
    def from_json(cls, raw: Any) -> PlanEntry | None:
        """The entry, or None when ``raw`` has any other shape (a plan file from another version)."""
        try:
            stat, sha, tops, lines, subdirs, heavy, big = raw
            ints = all(type(n) is int for n in (*stat, lines, *subdirs.values(), *heavy.values()))
            strs = all(type(t) is str for t in (sha, *tops, *subdirs, *heavy))
            rows = tuple((r, d, n) for r, d, n in big)
            ok = all(type(r) is str and type(d) is str and type(n) is int and n >= BIG_FILE for r, d, n in rows)
            if not (ints and strs and ok and len(stat) == 4 and SHA256_RE.fullmatch(sha)):
                return None
            return cls(stat=tuple(stat), sha256=sha, tops=tuple(tops), lines=lines, subdirs=dict(subdirs),
                       heavy=dict(heavy), big=rows)  # fmt: skip
        except (TypeError, ValueError, AttributeError):
            return None


SHA256_RE = re.compile(r"[0-9a-f]{64}")


@dataclass(kw_only=True, slots=True, eq=False)  # by identity: ``group_records`` removes merged ones from a list
class Group:
    id: str
    location: str
    dists: list[DistRecord] = field(default_factory=list)
    tops: set[str] = field(default_factory=set)

    @property
    def weight(self) -> int:
        return sum(d.lines for d in self.dists)

    def to_job(self) -> dict[str, Any]:
        """What a worker needs of the group (once per units line, however many units it has)."""
        return {
            "location": self.location,
            "tops": sorted(self.tops),
            "dists": [[d.key, d.dist_info, d.sha256] for d in self.dists],
            "big": sorted(p for d in self.dists for p in d.big_paths()),
        }

    @property
    def cost(self) -> int:
        """Rows plus bytes (in rows): what hashing the group from an empty cache costs."""
        return self.weight + sum(d.heavy.get("", 0) for d in self.dists)

    def units(self, target: int) -> list[Unit]:
        """The group as one unit of work, or, when costlier than ``target`` (torch: ~15,000 files),
        one unit per big second-level directory plus the rest; a directory costlier than ``target``
        itself (torch/include: ~9,000 headers, 7,800 of them in ATen) is split the same way one
        level down, to the fourth. So no worker is the long pole, with a cold cache or a warm one (a stat per row).
        The whole group, or its rest, holds the group's RECORD findings (``findings``)."""
        if self.cost <= target:
            return [Unit(id=self.id, group=self, weight=self.weight, heavy=self.cost - self.weight, findings=True)]
        counts: dict[str, list[int]] = {}
        for d in self.dists:
            for prefix, n in d.subdirs.items():
                counts.setdefault(prefix, [0, 0])[0] += n
            for prefix, n in d.heavy.items():
                if prefix:
                    counts.setdefault(prefix, [0, 0])[1] += n
        chosen = sorted(p for p, (rows, heavy) in counts.items() if p.count("/") == 1 and rows + heavy >= SPLIT_MIN)
        units = [u for p in chosen for u in self._split(p, counts, target)]
        rest, rest_heavy = (
            self.weight - sum(u.weight for u in units),
            self.cost - self.weight - sum(u.heavy for u in units),
        )
        rest_unit = Unit(
            id=f"{self.id}-rest", group=self, exclude=tuple(chosen), weight=rest, heavy=rest_heavy, findings=True
        )
        return [*units, rest_unit]

    def _split(self, prefix: str, counts: dict[str, list[int]], target: int) -> list[Unit]:
        """``prefix`` as one unit, or its big subdirectories (split again, the same way) and the
        rest of it when costlier than ``target``."""
        rows, heavy = counts[prefix]
        depth = prefix.count("/") + 1
        kids = (
            sorted(
                c
                for c, (r, h) in counts.items()
                if c.count("/") == depth and c.startswith(prefix + "/") and r + h >= SPLIT_MIN
            )
            if rows + heavy > target and depth <= MAX_DEPTH
            else []
        )
        units = [u for c in kids for u in self._split(c, counts, target)]
        units_rows = sum(counts[c][0] for c in kids)
        units_heavy = sum(counts[c][1] for c in kids)
        tag = _tag(prefix + "/*") if kids else _tag(prefix)
        rest = Unit(
            id=f"{self.id}-{tag}",
            group=self,
            only=(prefix,),
            exclude=tuple(kids),
            weight=rows - units_rows,
            heavy=heavy - units_heavy,
        )
        return [*units, rest]


def _tag(prefix: str) -> str:
    return hashlib.sha256(prefix.encode()).hexdigest()[:8]


def _levels(chain: str) -> list[str]:
    """The second- to fourth-level directories of a row whose directory chain is ``chain`` ("t/a/b/c/d/")."""
    parts = chain.split("/")[:-1][: MAX_DEPTH + 1]
    return ["/".join(parts[:i]) for i in range(2, len(parts) + 1)]


@dataclass(frozen=True, kw_only=True, slots=True)
class Unit:
    """Work for one worker: a group, or the part of it under ``only`` / outside ``exclude``."""

    id: str
    group: Group
    weight: int  # rows: the cost with a warm cache (a stat each)
    heavy: int = 0  # bytes recorded / BYTES_PER_ROW: the extra cost of hashing them
    only: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    findings: bool = False  # reads every row of the group's RECORDs once, for the malformed and outside ones

    def to_job(self, group: int) -> dict[str, Any]:
        """The unit as the units line carries it: ``group`` indexes the line's groups."""
        out = {"id": self.id, "group": group, "only": list(self.only), "exclude": list(self.exclude)}
        return {**out, "findings": True} if self.findings else out


FINDINGS = ("malformed", "outside")  # RECORD rows that cannot be verified: reported only where there are some


def report_dict(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"files": raw["files"]}
    for name in ("modified", "removed", "added", *FINDINGS):
        items = sorted(raw.get(name) or [])
        if name in FINDINGS and not items:
            continue
        out[name] = items[:LIST_CAP]
        if len(items) > LIST_CAP:
            out[f"{name}_count"] = len(items)
    out["status"] = "drifted" if any(raw.get(n) for n in ("modified", "removed", "added", *FINDINGS)) else "ok"
    return out


MAX_DEPTH = 3  # slashes in the deepest prefix split: "top/a/b/c"
# a row's directory chain, the plain names up to its last "/" ("t/a/b/" of "t/a/b/f.py", after a
# leading newline and quote; a name with a comma or quote ends it): rows are counted per chain
CHAIN_RE = re.compile(r'\n"?((?:[^/,\n"]+/)+)')
BIG_RE = re.compile(r",(\d{5,19})\r?$", re.MULTILINE)  # a row's size, 5 to 19 digits (more: malformed, the worker's)
# A row's cost is about that of hashing 32 KiB (open, fstat, stat against the cache): the planner
# deals work by cost, so a worker holding the big CUDA libraries gets fewer of them.
BYTES_PER_ROW = 32 << 10
SPLIT_MIN = 400
PLAN_FILE = "plan-3.json"  # plan.json held row counts only, plan-2.json no big files nor third levels
BIG_FILE = 4 << 20  # rows of this size or more are hashed by the parent (``BigFiles``)
BIG_CACHE = "big-files"  # their hash cache: <cache dir>/big-files.bin
SIMPLE_REL = re.compile(r"[^\\\"\n,/.\0][^\\\"\n,\0]*")  # a path joined as is (no quotes, no normalizing, no NUL)


def big_rows(text: str) -> list[list[Any]]:
    """[rel, "algo=digest", size] of every row of ``text`` recording ``BIG_FILE`` bytes or more
    under a plain relative path (one the worker would not normalize; any other row stays a
    worker's): a search for ",<7+ digits>" at a line's end, no per-line parse."""
    out: list[list[Any]] = []
    for found in BIG_RE.finditer(text):
        size = int(found.group(1))
        if size < BIG_FILE:
            continue
        rel, _, digest = text[text.rfind("\n", 0, found.start()) + 1 : found.start()].rpartition(",")
        if "=" in digest and SIMPLE_REL.fullmatch(rel) and "/." not in rel and "//" not in rel:
            out.append([rel, digest, size])
    return out


TOP_RE = re.compile(r'\n"?([^/,\n"]+)')  # after a newline: a literal start is found fast


def _tops(text: str) -> frozenset[str]:
    names = set(TOP_RE.findall("\n" + text))
    return frozenset(
        n.strip('"')
        for n in names
        if n and n not in ("..", ".") and not n.endswith(SKIP_SUFFIXES) and n != "__pycache__"
    )


def _stat(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


class _BigOnly:
    """What ``on_big`` needs of a RECORD not yet fully read: its key, location and big rows."""

    def __init__(self, key: str, dist_info: str, big: list[list[Any]]) -> None:
        self.key, self.location, self.big = key, os.path.dirname(dist_info), big


def read_records(
    dists: Sequence[tuple[str, str]],
    plan: Plan | None = None,
    on_big: Callable[[Sequence[DistRecord | _BigOnly]], None] | None = None,
) -> list[DistRecord]:
    """(key, dist-info dir) -> DistRecord, for those that have a RECORD (a regular file: a FIFO is
    never waited on). With ``plan``, a RECORD whose stat is unchanged since the last run is not read
    again. ``on_big`` gets every RECORD's big rows after a first, cheap pass (before the rest is parsed)."""
    known = plan.entries if plan is not None else {}
    fresh: dict[str, PlanEntry] = {}
    out = []
    read: list[tuple[str, str, list[int], bytes, list[list[Any]]]] = []
    for key, dist_info in dists:  # first pass: the big files, handed to ``on_big`` before the rest
        path = Path(dist_info, "RECORD")
        stat = _stat(path)
        hit = known.get(dist_info)
        if stat is None:
            continue
        if hit is not None and list(hit.stat) == stat:
            rec = DistRecord.from_plan(key, dist_info, hit)
            fresh[dist_info] = hit
            out.append(rec)
        else:
            data = _read_regular(path)
            if data is None:
                continue
            read.append((key, dist_info, stat, data, big_rows(data.decode("utf-8", errors="replace"))))
    if on_big is not None:
        on_big([*out, *(_BigOnly(key, dist_info, big) for key, dist_info, _s, _d, big in read)])
    for key, dist_info, stat, data, big in read:
        rec = DistRecord.from_text(key, dist_info, data, big)
        fresh[dist_info] = rec.to_plan(stat)
        out.append(rec)
    if plan is not None and any(known.get(k) != v for k, v in fresh.items()):
        kept = {k: v for k, v in known.items() if k not in fresh and Path(k).is_dir()}
        plan.save({**kept, **fresh})
    return out


def _read_regular(path: Path) -> bytes | None:
    """A RECORD's bytes; None when it is no regular file or cannot be read."""
    try:
        fd = one.open_regular(str(path))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


PLAN_LIMIT = 256 << 20  # bytes of the plan file: ~1 KB per distribution


class Plan:
    """The plan file (``PLAN_FILE``): a sealed JSON map dist-info dir -> ``PlanEntry``, read once.
    An entry of another shape is dropped; a file that fails its seal is discarded (``notes``)."""

    def __init__(self, path: Path, key: bytes | None, notes: list[str]) -> None:
        self.path, self.key, self.notes = path, key, notes
        held, raw = cachefile.read_json(str(path), key, PLAN_LIMIT, notes)
        self.entries: dict[str, PlanEntry] = {}
        if not held:
            return
        if not isinstance(raw, dict):
            notes.append(f"{path.name}: not a plan: discarded")
            return
        for dist_info, value in raw.items():
            found = PlanEntry.from_json(value)
            if found is not None and isinstance(dist_info, str):
                self.entries[dist_info] = found

    @property
    def exists(self) -> bool:
        """A plan was left by an earlier run (a repeat, most likely)."""
        return bool(self.entries)

    def save(self, entries: dict[str, PlanEntry]) -> None:
        text = json.dumps({k: v.to_json() for k, v in entries.items()}, sort_keys=True)
        note = cachefile.write(str(self.path), text.encode(), self.key)
        if note:
            self.notes.append(note)


def group_records(records: Sequence[DistRecord]) -> list[Group]:
    """Union distributions of one location that share a top-level name."""
    by_top: dict[tuple[str, str], Group] = {}
    groups: list[Group] = []
    for rec in records:
        merged = {id(g): g for t in rec.tops if (g := by_top.get((rec.location, t))) is not None}
        group = Group(id="", location=rec.location)
        for other in merged.values():
            group.dists += other.dists
            group.tops |= other.tops
            groups.remove(other)
        group.dists.append(rec)
        group.tops |= rec.tops
        groups.append(group)
        for top in group.tops:
            by_top[(rec.location, top)] = group
    for group in groups:
        keys = "\0".join(sorted(d.key for d in group.dists))
        group.id = hashlib.sha256(f"{group.location}\0{keys}".encode()).hexdigest()[:20]
    return sorted(groups, key=lambda g: g.id)


def unit_order(groups: Sequence[Group], workers: int, warm: Callable[[str], bool] | None = None) -> list[Unit]:
    """The units, costliest first, as the workers claim them (``crew.py``): the costly groups split
    by their cost from an empty cache (so a unit's id, its cache file's name, does not depend on the
    cache). A unit ``warm`` says is cached costs its rows (a stat each), any other its rows and its
    bytes."""
    target = max(SPLIT_MIN, sum(g.cost for g in groups) // max(1, workers))
    units = [u for g in groups for u in g.units(target)]
    cost = {u.id: u.weight + (0 if warm is not None and warm(u.id) else u.heavy) for u in units}
    return sorted(units, key=lambda u: (-cost[u.id], u.id))


class BigFiles:
    """The big files, checked here before the workers start: a stat each against ``big-files.bin``
    (the workers' cache format and key); what the cache cannot vouch for (``pending``, largest
    first) is what the workers claim first, each file hashed whole by one worker, and comes back
    here by its index (``finish``). Hashed by the workers, not by threads of one process: on the
    H200 16 hashing threads beside 16 workers of 2 threads each shared the cores with them and the
    largest file (a third of a second alone) took a second."""

    def __init__(self, cache_dir: Path | None, key: bytes | None, notes: list[str]) -> None:
        self.path = str(cache_dir / f"{BIG_CACHE}.bin") if cache_dir else None
        self.key, self.notes = key, notes
        self.hashes: dict[str, list[Any]] = {}
        self.reports: dict[str, dict[str, Any]] = {}
        self.pending: list[tuple[str, one.Entry, one.Key]] = []
        self.seen: set[str] = set()
        self.hits = 0

    def add(self, records: Sequence[DistRecord | _BigOnly]) -> None:
        if not any(r.big for r in records):
            return
        hashes = one.load_cache(self.path, self.key, self.notes).get("hashes")
        self.hashes = hashes if isinstance(hashes, dict) else {}
        for rec in records:
            entries = [(rel, os.path.join(rec.location, rel), digest, size) for rel, digest, size in rec.big]
            report = self.reports.setdefault(rec.key, {"files": 0, "modified": [], "removed": [], "added": []})
            self.hits += one.check(entries, self.hashes, report, self.pending, rec.key)
            self.seen.update(e[1] for e in entries)
        self.pending.sort(key=lambda job: -job[2][0])

    @property
    def sizes(self) -> list[int]:
        return [k[0] for _key, _entry, k in self.pending]

    def jobs(self) -> list[list[Any]]:
        """[path, algo, size] of each pending file: what a worker hashes when it claims its index."""
        return [[path, digest.partition("=")[0], k[0]] for _key, (_rel, path, digest, _size), k in self.pending]

    def finish(self, digests: dict[int, str | None], stats: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The reports by key (files, modified, removed) from the workers' ``digests`` by index; the cache saved."""
        fresh: dict[str, list[Any]] = {}
        for index, (key, (rel, path, digest, _size), k) in enumerate(self.pending):
            if index not in digests:
                raise ToolError(f"integrity: no worker hashed {path}")
            got = digests[index]
            stats["hashed"] += 1
            stats["bytes_hashed"] += k[0]
            if got is None:
                self.reports[key]["removed"].append(rel)
                continue
            if got == one.CHANGING:  # changed under every reading: not the file RECORD names; not cached
                self.reports[key]["modified"].append(rel)
                continue
            fresh[path] = [*k, got]
            if got != digest:
                self.reports[key]["modified"].append(rel)
        stats["cache_hits"] += self.hits
        stats["files"] += sum(r["files"] for r in self.reports.values())
        stats["big_files"] = len(self.seen)
        if self.path and self.seen:
            # another call's entries are kept while their files exist (speculative run, then the rest)
            kept = {p: v for p, v in self.hashes.items() if p in self.seen or (p not in fresh and os.path.lexists(p))}
            if fresh or kept != self.hashes:
                one.save_cache(self.path, {"hashes": {**kept, **fresh}}, self.key, self.notes)
        return self.reports


@dataclass(frozen=True, kw_only=True, slots=True)
class Verified:
    """Reports keyed like the ``dists`` given to ``verify``."""

    attempted: frozenset[str]
    reports: dict[str, dict[str, Any]]
    stats: dict[str, Any]
    records: tuple[DistRecord, ...]
    group_ids: frozenset[str]
    notes: tuple[str, ...] = ()  # cache files discarded (never trusted), for the snapshot's live section

    @property
    def record_sha256(self) -> dict[str, str]:
        return {r.key: r.sha256 for r in self.records}

    def owner_of(self, path: str) -> str | None:
        """The distribution whose RECORD lists ``path`` (for torch's loaded libraries)."""
        for rec in self.records:
            if path.startswith(rec.location + os.sep):
                rel = path[len(rec.location) + 1 :]
                if f"\n{rel}," in f"\n{rec.text}":
                    return rec.key
        return None

    def merged(self, other: Verified) -> Verified:
        stats = {k: v + other.stats.get(k, 0) for k, v in self.stats.items() if isinstance(v, int)}
        return Verified(
            attempted=self.attempted | other.attempted,
            reports={**self.reports, **other.reports},
            stats={**self.stats, **stats},
            records=self.records + other.records,
            group_ids=self.group_ids | other.group_ids,
            notes=self.notes + other.notes,
        )

    def restricted(self, keys: set[str]) -> Verified:
        return Verified(
            attempted=self.attempted & keys,
            reports={k: v for k, v in self.reports.items() if k in keys},
            stats=self.stats,
            records=tuple(r for r in self.records if r.key in keys),
            group_ids=self.group_ids,
            notes=self.notes,
        )


def unowned(records: Sequence[DistRecord]) -> dict[str, list[str]]:
    """Per site directory, the top-level entries no RECORD names (``name`` or ``name/``)."""
    owned: dict[str, set[str]] = {}
    for rec in records:
        owned.setdefault(rec.location, set()).update(rec.tops)
    out: dict[str, list[str]] = {}
    for location, tops in sorted(owned.items()):
        try:
            entries = list(os.scandir(location))
        except OSError:
            continue
        out[location] = sorted(
            e.name + ("/" if e.is_dir() else "")
            for e in entries
            if e.name not in tops and not e.name.endswith(SKIP_SUFFIXES) and e.name != "__pycache__"
        )
    return out


WORKER_ARGV = (sys.executable, "-I", "-S", str(WORKER))
# A full run: the worker hashing the largest file (a third of the run alone) runs at this process's
# priority, the others this much lower, so the parent's planning and that file are never queued
# behind the rest (the workers only yield when the cores are all busy).
YIELD_NICE = 5


def warm_workers(workers: int) -> int:
    """Workers to start where the last run left a plan (a repeat, most likely: a stat per file, no
    hashing): half, four at least. Each costs the parent a process start (~1 ms on the H200, on the
    critical path of a 0.3 s repeat); the rest start once big files turn out to need hashing."""
    return max(WARM_WORKERS, workers // 2)


WARM_WORKERS = 4


def _setup_line(big: BigFiles, cache_dir: Path | None, *, mapped: bool = True) -> str:
    """What every worker starts with: the big files to claim (one hashing thread per worker: as
    many as cores, so the largest file has a core to itself; the kernel's readahead keeps a cold
    read going while it hashes), the cache directory and its key."""
    part: dict[str, Any] = {
        "hash": big.jobs(), "cache_dir": str(cache_dir) if cache_dir and big.key else None,
        "key": big.key.hex() if cache_dir and big.key else None, "mapped": mapped,
    }  # fmt: skip
    if big.pending:  # the largest file's worker keeps its core: every other worker yields to it
        part["nice"] = YIELD_NICE
    return json.dumps(part) + "\n"


def _units_line(units: Sequence[Unit]) -> str:
    """Each group once (torch's is split into dozens of units), then the units in claiming order."""
    index: dict[int, int] = {}
    groups: list[dict[str, Any]] = []
    for unit in units:
        if id(unit.group) not in index:
            index[id(unit.group)] = len(groups)
            groups.append(unit.group.to_job())
    return json.dumps({"groups": groups, "units": [u.to_job(index[id(u.group)]) for u in units]}) + "\n"


def _cached_units(cache_dir: Path | None) -> Callable[[str], bool]:
    """Whether a unit has a hash cache file (then its files are mostly stat-ed, not hashed)."""
    names: frozenset[str] = frozenset()
    if cache_dir is not None:
        with contextlib.suppress(OSError):
            names = frozenset(p.stem for p in cache_dir.iterdir() if p.suffix == ".bin")
    return names.__contains__


@dataclass(frozen=True, kw_only=True, slots=True)
class _Events:
    """What ``verify`` tells its caller as it goes."""

    launched: threading.Event | None = None
    begun: threading.Event | None = None
    track: Callable[[Programs], None] | None = None


def verify(
    dists: Sequence[tuple[str, str]],
    *,
    cache_dir: Path | None,
    workers: int,
    key: bytes | None = None,
    launched: threading.Event | None = None,
    begun: threading.Event | None = None,
    track: Callable[[Programs], None] | None = None,
) -> Verified:
    """Verify ``(key, dist-info dir)`` pairs in worker processes; the caller prunes the cache.
    The workers start at once, get the big files after a first, cheap pass over the RECORDs and
    their units once planned; ``begun`` is set once they have the big files, ``launched`` once they
    have all their work (the GIL-bound planning is done); ``track`` is told of every set of workers
    started (so a caller can kill them). The big files are hashed from memory maps; a worker
    killed by SIGBUS (a mapped file truncated under it) makes the whole run start again without them.
    ``key`` seals the caches in ``cache_dir`` (``cachefile``); without one nothing is cached."""
    events = _Events(launched=launched, begun=begun, track=track)
    cache = cache_dir if key is not None else None
    try:
        return _verify(dists, cache_dir=cache, key=key, workers=workers, events=events, mapped=True)
    except ProgramFailedError as exc:
        if exc.returncode != -signal.SIGBUS:
            raise
    return _verify(dists, cache_dir=cache, key=key, workers=workers, events=events, mapped=False)


def _verify(
    dists: Sequence[tuple[str, str]],
    *,
    cache_dir: Path | None,
    key: bytes | None,
    workers: int,
    events: _Events,
    mapped: bool,
) -> Verified:
    start = time.perf_counter()
    notes: list[str] = []
    big = BigFiles(cache_dir, key, notes)
    seconds: dict[str, float] = {}
    # started first, one per RECORD at most: their interpreters start while the RECORDs are read
    count = min(workers, sum(os.path.isfile(os.path.join(d, "RECORD")) for _k, d in dists))
    plan = Plan(cache_dir / PLAN_FILE, key, notes) if cache_dir else None
    planned = plan is not None and plan.exists
    crew = Crew(WORKER_ARGV, min(count, warm_workers(workers)) if planned else count, events.track)

    def big_files(first: Sequence[DistRecord | _BigOnly]) -> None:
        """After the first, cheap pass: the workers start on the big files while the rest is planned;
        the rest of them when there are big files to hash, and one at least (a RECORD that appeared
        since they were counted)."""
        big.add(first)
        crew.grow(max(count if big.pending else 0, 1 if first else 0))
        crew.begin(_setup_line(big, cache_dir, mapped=mapped), len(big.pending))
        seconds["started"] = round(time.perf_counter() - start, 3)
        if events.begun is not None:
            events.begun.set()

    try:
        records = read_records(dists, plan, big_files)
        seconds["read_records"] = round(time.perf_counter() - start, 3)
        # split for ``count``, not for the workers started: the split names the units' cache files
        units = unit_order(group_records(records), count, _cached_units(cache_dir))
    except BaseException:
        crew.kill()
        raise
    seconds["launched"] = round(time.perf_counter() - start, 3)
    if events.launched is not None:
        events.launched.set()
    results = crew.finish(_units_line(units), len(units), timeout=WORKER_TIMEOUT)
    seconds["workers_done"] = round(time.perf_counter() - start, 3)
    gathered = _Gathered(workers=crew.size, notes=notes)
    for result in results:
        gathered.add(result)
    gathered.check(units)
    for dist, part in big.finish(gathered.digests, gathered.stats).items():
        gathered.merge(dist, part, ("modified", "removed"))
    stats = {
        **gathered.stats,
        "seconds": {**seconds, **gathered.seconds(), "total": round(time.perf_counter() - start, 3)},
    }
    return Verified(
        attempted=frozenset(k for k, _ in dists),
        reports={key: report_dict(r) for key, r in gathered.raw.items()},
        stats=stats,
        records=tuple(records),
        group_ids=frozenset(u.id for u in units),
        notes=tuple(dict.fromkeys(notes)),
    )


class _Gathered:
    """The workers' results, merged: reports per distribution key, counts, the big files' digests."""

    def __init__(self, *, workers: int, notes: list[str]) -> None:
        self.notes = notes
        self.raw: dict[str, dict[str, Any]] = {}
        self.stats: dict[str, Any] = {"files": 0, "hashed": 0, "cache_hits": 0, "bytes_hashed": 0, "walked": 0}
        self.stats["workers"] = workers
        self.digests: dict[int, str | None] = {}
        self.units: set[str] = set()
        self.each: list[float] = []
        self.hashing: list[float] = []

    def add(self, result: ProcResult) -> None:
        try:
            data = json.loads(result.stdout)
            groups = data["groups"]
            self.digests.update((int(i), d) for i, d in data["digests"])
            self.each.append(float(data["seconds"]))
            self.hashing.append(float(data["hash_seconds"]))
            self.notes.extend(str(n) for n in data.get("notes") or ())
        except (ValueError, KeyError, TypeError):
            raise ToolError(f"integrity worker printed no result: {result.stderr.strip()[-300:]}") from None
        for unit_id, group in groups.items():
            self.units.add(unit_id)
            for key, part in group["reports"].items():
                self.merge(key, part, ("modified", "removed", "added", *FINDINGS))
            for name in ("files", "hashed", "cache_hits", "bytes_hashed", "walked"):
                self.stats[name] += group["stats"][name]

    def merge(self, key: str, part: dict[str, Any], names: tuple[str, ...]) -> None:
        into = self.raw.setdefault(key, {"files": 0, "modified": [], "removed": [], "added": []})
        into["files"] += part["files"]
        for name in names:
            into.setdefault(name, []).extend(part.get(name) or ())

    def check(self, units: Sequence[Unit]) -> None:
        """Every unit was verified by some worker (a worker that lost one would leave files unchecked)."""
        missing = sorted(u.id for u in units if u.id not in self.units)
        if missing:
            raise ToolError(f"integrity: no worker verified unit {missing[0]} ({len(missing)} of {len(units)} missing)")

    def seconds(self) -> dict[str, float]:
        each = sorted(self.each)
        return {
            "worker_max": each[-1] if each else 0.0,
            "worker_median": each[len(each) // 2] if each else 0.0,
            "big_max": max(self.hashing, default=0.0),
        }


def prune_cache(cache_dir: Path | None, keep: frozenset[str]) -> None:
    """Drop the cache files of units that no longer exist (and those of older formats), and the
    temporary files of a worker killed while it wrote its cache (a stopped run), once older than
    ``TEMP_AGE`` (a younger one may be another snapshot's, being written). Only regular files are
    removed: anything else named like an entry (a directory, a FIFO) is left alone, and never read."""
    if cache_dir is None:
        return
    try:
        entries = list(os.scandir(cache_dir))
    except OSError:
        return
    for entry in entries:
        name = entry.name
        stale = (
            (name.endswith(".bin") and name[:-4] not in keep and name[:-4] != BIG_CACHE)
            or (name.endswith(".json") and name != PLAN_FILE)
            or (name.startswith(".cache-") and _age(entry) > TEMP_AGE)
        )
        try:
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)  # noqa: PTH108 (a DirEntry's path)
        except OSError:
            continue


TEMP_AGE = 60.0  # seconds


def _age(entry: os.DirEntry[str]) -> float:
    try:
        return time.time() - entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return 0.0
