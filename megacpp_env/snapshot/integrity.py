"""Integrity of installed distributions against their ``RECORD``: modified, removed, added files.

The parent plans: it reads every RECORD once (bytes, for the RECORD hash and the top-level names
each distribution owns), joins distributions that share a top-level name into *groups*, and deals
the groups to one worker process per core (``integrity_worker.py``), which parse, stat, consult
their hash cache and hash what the cache cannot vouch for, with no GIL shared between them.
Files directly in a site directory that no RECORD names are reported as unowned here.
"""

# os.path on purpose: ~50,000 paths per snapshot.
# ruff: noqa: PTH120

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megacpp_env.errors import ToolError
from megacpp_env.fsutil import atomic_write_text
from megacpp_env.snapshot.proc import run_programs

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
    subdirs: dict[str, int]  # "top/sub" -> lines under it
    heavy: dict[str, int]  # "top/sub" ("" for all) -> bytes recorded under it / BYTES_PER_ROW

    @property
    def text(self) -> str:
        return Path(self.dist_info, "RECORD").read_bytes().decode("utf-8", errors="replace")

    def to_plan(self, stat: list[int]) -> list[Any]:
        return [stat, self.sha256, sorted(self.tops), self.lines, self.subdirs, self.heavy]

    @classmethod
    def from_text(cls, key: str, dist_info: str, data: bytes) -> DistRecord:
        text = data.decode("utf-8", errors="replace")
        subdirs: dict[str, int] = {}
        for prefix in SECOND_RE.findall(text):
            subdirs[prefix] = subdirs.get(prefix, 0) + 1
        heavy = {"": 0}  # hashing time goes with bytes, not rows: the big files' weight, by subdirectory
        for big in BIG_RE.finditer(text):  # a search for ",<5+ digits>" at a line's end: no per-line parse
            n = int(big.group(1)) // BYTES_PER_ROW
            if n:
                heavy[""] += n
                sub = SECOND_RE.match(text, text.rfind("\n", 0, big.start()) + 1, big.start())
                if sub is not None:
                    heavy[sub.group(1)] = heavy.get(sub.group(1), 0) + n
        return cls(
            key=key,
            dist_info=dist_info,
            location=os.path.dirname(dist_info),
            sha256=hashlib.sha256(data).hexdigest(),
            tops=_tops(text),
            lines=text.count("\n"),
            subdirs=subdirs,
            heavy=heavy,
        )


@dataclass(kw_only=True, slots=True)
class Group:
    id: str
    location: str
    dists: list[DistRecord] = field(default_factory=list)
    tops: set[str] = field(default_factory=set)

    @property
    def weight(self) -> int:
        return sum(d.lines for d in self.dists)

    @property
    def cost(self) -> int:
        """Rows plus bytes (in rows): what hashing the group from an empty cache costs."""
        return self.weight + sum(d.heavy.get("", 0) for d in self.dists)

    def units(self, target: int) -> list[Unit]:
        """The group as one unit of work, or, when costlier than ``target`` (torch: ~15,000 files,
        the CUDA libraries: gigabytes), one unit per big second-level directory plus the rest, so
        no worker is the long pole."""
        if self.cost <= target:
            return [Unit(id=self.id, group=self, weight=self.weight, heavy=self.cost - self.weight)]
        counts: dict[str, list[int]] = {}
        for d in self.dists:
            for prefix, n in d.subdirs.items():
                counts.setdefault(prefix, [0, 0])[0] += n
            for prefix, n in d.heavy.items():
                if prefix:
                    counts.setdefault(prefix, [0, 0])[1] += n
        chosen = sorted(p for p, (rows, heavy) in counts.items() if rows + heavy >= SPLIT_MIN)
        units = [
            Unit(
                id=f"{self.id}-{hashlib.sha256(p.encode()).hexdigest()[:8]}",
                group=self,
                only=(p,),
                weight=counts[p][0],
                heavy=counts[p][1],
            )
            for p in chosen
        ]
        rest, rest_heavy = (
            self.weight - sum(u.weight for u in units),
            self.cost - self.weight - sum(u.heavy for u in units),
        )
        return [*units, Unit(id=f"{self.id}-rest", group=self, exclude=tuple(chosen), weight=rest, heavy=rest_heavy)]


@dataclass(frozen=True, kw_only=True, slots=True)
class Unit:
    """Work for one worker: a group, or the part of it under ``only`` / outside ``exclude``."""

    id: str
    group: Group
    weight: int  # rows: the cost with a warm cache (a stat each)
    heavy: int = 0  # bytes recorded / BYTES_PER_ROW: the extra cost of hashing them
    only: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def to_job(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "location": self.group.location,
            "tops": sorted(self.group.tops),
            "dists": [[d.key, d.dist_info, d.sha256] for d in self.group.dists],
            "only": list(self.only),
            "exclude": list(self.exclude),
        }


def report_dict(raw: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"files": raw["files"]}
    for name in ("modified", "removed", "added"):
        items = sorted(raw[name])
        out[name] = items[:LIST_CAP]
        if len(items) > LIST_CAP:
            out[f"{name}_count"] = len(items)
    out["status"] = "drifted" if any(raw[n] for n in ("modified", "removed", "added")) else "ok"
    return out


SECOND_RE = re.compile(r'^"?([^/,\n"]+/[^/,\n"]+)/', re.MULTILINE)  # a top-level dir's subdirectory
BIG_RE = re.compile(r",(\d{5,})\r?$", re.MULTILINE)  # a row's size, when it has 5 digits or more
# A row's cost is about that of hashing 32 KiB (open, fstat, stat against the cache): the planner
# deals work by cost, so a worker holding the big CUDA libraries gets fewer of them.
BYTES_PER_ROW = 32 << 10
SPLIT_MIN = 400
PLAN_FILE = "plan-2.json"  # plan.json held row counts only
TOP_RE = re.compile(r'^"?([^/,\n"]+)', re.MULTILINE)


def _tops(text: str) -> frozenset[str]:
    names = set(TOP_RE.findall(text))
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


def read_records(dists: Sequence[tuple[str, str]], plan_file: Path | None = None) -> list[DistRecord]:
    """(key, dist-info dir) -> DistRecord, for those that have a RECORD. With ``plan_file``, a
    RECORD whose stat is unchanged since the last run is not read again (the plan is cached)."""
    plan = load_plan(plan_file)
    fresh: dict[str, list[Any]] = {}
    out = []
    for key, dist_info in dists:
        path = Path(dist_info, "RECORD")
        stat = _stat(path)
        hit = plan.get(dist_info)
        if stat is None:
            continue
        if hit is not None and hit[0] == stat:
            rec = DistRecord(
                key=key,
                dist_info=dist_info,
                location=os.path.dirname(dist_info),
                sha256=hit[1],
                tops=frozenset(hit[2]),
                lines=hit[3],
                subdirs=hit[4],
                heavy=hit[5],
            )
        else:
            try:
                rec = DistRecord.from_text(key, dist_info, path.read_bytes())
            except OSError:
                continue
        fresh[dist_info] = rec.to_plan(stat)
        out.append(rec)
    if plan_file is not None and any(plan.get(k) != v for k, v in fresh.items()):
        kept = {k: v for k, v in plan.items() if k not in fresh and Path(k).is_dir()}
        _save_plan(plan_file, {**kept, **fresh})
    return out


def load_plan(plan_file: Path | None) -> dict[str, list[Any]]:
    if plan_file is None:
        return {}
    try:
        data = json.loads(plan_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_plan(plan_file: Path, plan: dict[str, list[Any]]) -> None:
    try:
        atomic_write_text(plan_file, json.dumps(plan, sort_keys=True))
    except OSError:
        return


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


def deal(groups: Sequence[Group], workers: int, warm: Callable[[str], bool] | None = None) -> list[list[Unit]]:
    """Split costly groups (by their cost from an empty cache, so a unit's id, its cache file's name,
    does not depend on the cache), then longest-processing-time first: costliest unit to the
    lightest shard. A unit ``warm`` says is cached costs its rows (a stat each), any other its
    rows and its bytes."""
    target = max(SPLIT_MIN, sum(g.cost for g in groups) // max(1, workers))
    units = [u for g in groups for u in g.units(target)]
    cost = {u.id: u.weight + (0 if warm is not None and warm(u.id) else u.heavy) for u in units}
    shards: list[list[Unit]] = [[] for _ in range(max(1, min(workers, len(units))))]
    loads = [0] * len(shards)
    for unit in sorted(units, key=lambda u: (-cost[u.id], u.id)):
        i = loads.index(min(loads))
        shards[i].append(unit)
        loads[i] += cost[unit.id]
    return [s for s in shards if s]


@dataclass(frozen=True, kw_only=True, slots=True)
class Verified:
    """Reports keyed like the ``dists`` given to ``verify``."""

    attempted: frozenset[str]
    reports: dict[str, dict[str, Any]]
    stats: dict[str, Any]
    records: tuple[DistRecord, ...]
    group_ids: frozenset[str]

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
        )

    def restricted(self, keys: set[str]) -> Verified:
        return Verified(
            attempted=self.attempted & keys,
            reports={k: v for k, v in self.reports.items() if k in keys},
            stats=self.stats,
            records=tuple(r for r in self.records if r.key in keys),
            group_ids=self.group_ids,
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


def _jobs(shards: list[list[Unit]], cache_dir: Path | None, cpus: int) -> list[tuple[list[str], str]]:
    # more threads than a worker's share of the cores: a worker left with the last big libraries
    # hashes them on the cores the finished workers left idle
    threads = max(4, (2 * cpus) // max(1, len(shards)))
    argv = [sys.executable, "-I", "-S", str(WORKER)]
    cache = str(cache_dir) if cache_dir else None
    return [
        (argv, json.dumps({"groups": [g.to_job() for g in s], "cache_dir": cache, "threads": threads})) for s in shards
    ]


def _cached_units(cache_dir: Path | None) -> Callable[[str], bool]:
    """Whether a unit has a hash cache file (then its files are mostly stat-ed, not hashed)."""
    names: frozenset[str] = frozenset()
    if cache_dir is not None:
        with contextlib.suppress(OSError):
            names = frozenset(p.stem for p in cache_dir.iterdir() if p.suffix == ".bin")
    return names.__contains__


def verify(
    dists: Sequence[tuple[str, str]],
    *,
    cache_dir: Path | None,
    workers: int,
    cpus: int,
    launched: threading.Event | None = None,
) -> Verified:
    """Verify ``(key, dist-info dir)`` pairs in worker processes; the caller prunes the cache.
    ``launched`` is set once the GIL-bound planning is done and the workers are starting."""
    start = time.perf_counter()
    records = read_records(dists, cache_dir / PLAN_FILE if cache_dir else None)
    seconds: dict[str, float] = {"read_records": round(time.perf_counter() - start, 3), "worker_max": 0.0}
    shards = deal(group_records(records), workers, _cached_units(cache_dir))
    raw: dict[str, dict[str, Any]] = {}
    stats: dict[str, Any] = {"files": 0, "hashed": 0, "cache_hits": 0, "bytes_hashed": 0, "walked": 0}
    stats["workers"] = len(shards)
    jobs = _jobs(shards, cache_dir, cpus)
    for result in run_programs(jobs, timeout=WORKER_TIMEOUT, started=launched.set if launched else None):
        try:
            data = json.loads(result.stdout)
            groups = data["groups"]
            seconds["worker_max"] = max(seconds["worker_max"], float(data["seconds"]))
        except (ValueError, KeyError):
            raise ToolError(f"integrity worker printed no result: {result.stderr.strip()[-300:]}") from None
        for group in groups.values():
            for key, part in group["reports"].items():
                into = raw.setdefault(key, {"files": 0, "modified": [], "removed": [], "added": []})
                into["files"] += part["files"]
                for name in ("modified", "removed", "added"):
                    into[name] += part[name]
            for name in ("files", "hashed", "cache_hits", "bytes_hashed", "walked"):
                stats[name] += group["stats"][name]
    stats["seconds"] = {**seconds, "total": round(time.perf_counter() - start, 3)}
    return Verified(
        attempted=frozenset(k for k, _ in dists),
        reports={key: report_dict(r) for key, r in raw.items()},
        stats=stats,
        records=tuple(records),
        group_ids=frozenset(u.id for s in shards for u in s),
    )


def prune_cache(cache_dir: Path | None, keep: frozenset[str]) -> None:
    """Drop the cache files of units that no longer exist (and those of the older JSON format)."""
    if cache_dir is None:
        return
    try:
        stale = [
            p
            for p in cache_dir.iterdir()
            if (p.suffix == ".bin" and p.stem not in keep) or (p.suffix == ".json" and p.name != PLAN_FILE)
        ]
    except OSError:
        return
    for path in stale:
        path.unlink(missing_ok=True)
