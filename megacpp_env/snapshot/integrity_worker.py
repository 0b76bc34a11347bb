"""RECORD verification for one shard of distribution groups, run as its own process.

Stdlib only, and runnable as a script (``python -I -S integrity_worker.py``): the parent
(``integrity.py``) starts one per core so that RECORD parsing, stat-ing and hashing run without
sharing a GIL. A *group* is a set of distributions of one site directory that share a top-level
name (every ``nvidia-*`` wheel shares ``nvidia/``), so a worker holds every RECORD that could own
a file it finds there.

stdin:  {"groups": [{"id", "location", "dists": [[key, dist_info_dir], ...], "tops": [...]}],
         "cache_dir": str or null, "threads": int}
stdout: {"groups": {id: {"reports": {key: {...}}, "stats": {...}}}}

The hash cache is one JSON file per group: path -> [size, mtime_ns, inode, ctime_ns, "algo=digest"].
ctime is in the key because no user-level tool can set it back, so an in-place edit that restores
mtime still misses the cache.
"""

# This file runs before site-packages exist (python -I -S) and handles ~50,000 paths: stdlib,
# os.path and plain containers on purpose.
# ruff: noqa: PTH103, PTH112, PTH114, PTH116, PTH118, PTH120

from __future__ import annotations

import json
import os
import sys
import time

# Imported lazily below (a worker with a warm cache needs none of them): csv, io, hashlib, base64,
# tempfile, concurrent.futures. typing only for the type checker.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

IGNORED_SUFFIXES = (".pyc", ".pyo")
SMALL_FILE = 1 << 20
CHUNK = 16 << 20  # large reads: a thread hashing a 1 GB library rarely waits for the GIL
CACHE_VERSION = 2

Entry = tuple[str, str, str, int]  # rel, absolute path, "algo=digest" ("" when unhashed), size (-1: none)
Key = tuple[int, int, int, int]


def _rows(text: str) -> Any:
    if '"' in text:
        import csv
        import io

        return csv.reader(io.StringIO(text))
    return (line.rsplit(",", 2) for line in text.splitlines())


def parse_record(location: str, text: str) -> list[Entry]:
    """(rel, absolute path, "algo=digest" or "", size or -1) for every row."""
    prefix = location + os.sep
    out: list[Entry] = []
    for row in _rows(text):
        rel = row[0] if row else ""
        if not rel:
            continue
        if rel[0] in "./" or "/." in rel or "//" in rel or "\\" in rel:
            rel = os.path.normpath(rel).replace(os.sep, "/")
            path = os.path.normpath(os.path.join(location, rel))
        else:
            path = prefix + rel
        digest = row[1] if len(row) > 1 and "=" in row[1] else ""
        size = int(row[2]) if len(row) > 2 and row[2].isdigit() else -1
        out.append((rel, path, digest, size))
    return out


def read_record(location: str, dist_info: str) -> list[Entry]:
    with open(os.path.join(dist_info, "RECORD"), "rb") as fh:
        return parse_record(location, fh.read().decode("utf-8", errors="replace"))


def _key(st: os.stat_result) -> Key:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def scan(location: str, tops: list[str], only: list[str], exclude: list[str]) -> set[str]:
    """Every file under the unit's part of the group (``__pycache__``/byte-code skipped); names
    only, from the directory entries: the files RECORD lists are stat-ed once, by ``_check``."""
    out: set[str] = set()
    stack: list[str] = []
    skip = {os.path.join(location, p) for p in exclude}
    for top in only or tops:
        path = os.path.join(location, top)
        if path in skip:
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            stack.append(path)
        elif os.path.lexists(path) and not top.endswith(IGNORED_SUFFIXES):
            out.add(path)
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    if e.is_dir(follow_symlinks=False):
                        if e.name != "__pycache__" and e.path not in skip:
                            stack.append(e.path)
                    elif not e.name.endswith(IGNORED_SUFFIXES):
                        out.add(e.path)
                except OSError:
                    continue
    return out


def in_unit(entries: list[Entry], only: list[str], exclude: list[str]) -> list[Entry]:
    if only:
        inside = tuple(p + "/" for p in only)
        return [e for e in entries if e[0].startswith(inside)]
    if exclude:
        outside = tuple(p + "/" for p in exclude)
        return [e for e in entries if not e[0].startswith(outside)]
    return entries


def hash_file(path: str, algo: str, size: int) -> str | None:
    import base64
    import hashlib

    try:
        h = hashlib.new(algo)
        with open(path, "rb", buffering=0) as fh:
            if size < SMALL_FILE:
                h.update(fh.read())
            else:
                buf = bytearray(min(CHUNK, max(size, 1)))
                view = memoryview(buf)
                while n := fh.readinto(buf):
                    h.update(view[:n])
    except (OSError, ValueError):
        return None
    return f"{algo}={base64.urlsafe_b64encode(h.digest()).rstrip(b'=').decode()}"


def load_cache(path: str | None) -> dict[str, list[Any]]:
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        entries = data.get("entries") if data.get("version") == CACHE_VERSION else None
        return entries if isinstance(entries, dict) else {}
    except (OSError, ValueError, AttributeError):
        return {}


def save_cache(path: str, entries: dict[str, list[Any]]) -> None:
    text = json.dumps({"version": CACHE_VERSION, "entries": entries}, separators=(",", ":"), sort_keys=True)
    import tempfile

    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".cache-", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        return


def _owners(dists: list[tuple[str, list[Entry]]]) -> dict[str, set[str]]:
    owners: dict[str, set[str]] = {}
    for key, entries in dists:
        parents = {rel.rpartition("/")[0] for rel, _p, _d, _s in entries if not rel.startswith("../")}
        for start in parents:
            parent = start
            while parent:
                owners.setdefault(parent, set()).add(key)
                parent = parent.rpartition("/")[0]
    return owners


def _owner_of(rel: str, owners: dict[str, set[str]]) -> str | None:
    parent = rel.rpartition("/")[0]
    while parent:
        if parent in owners:
            return sorted(owners[parent])[0]
        parent = parent.rpartition("/")[0]
    return None


def _check(
    entries: list[Entry],
    cache: dict[str, list[Any]],
    report: dict[str, Any],
    pending: list[tuple[str, Entry, Key]],
    key: str,
) -> int:
    hits = 0
    get = cache.get
    for entry in entries:
        rel, path, digest, size = entry
        if not digest:
            continue
        report["files"] += 1
        try:
            st = os.stat(path)
        except OSError:
            report["removed"].append(rel)
            continue
        if size >= 0 and st.st_size != size:
            report["modified"].append(rel)
            continue
        hit = get(path)
        if (
            hit is None
            or hit[1] != st.st_mtime_ns
            or hit[3] != st.st_ctime_ns
            or hit[2] != st.st_ino
            or hit[0] != st.st_size
            or hit[4].partition("=")[0] != digest.partition("=")[0]
        ):
            pending.append((key, entry, _key(st)))
            continue
        hits += 1
        if hit[4] != digest:
            report["modified"].append(rel)
    return hits


def _hash_pending(
    pending: list[tuple[str, Entry, Key]], reports: dict[str, dict[str, Any]], stats: dict[str, int], threads: int
) -> dict[str, list[Any]]:
    from concurrent.futures import ThreadPoolExecutor

    pending.sort(key=lambda job: job[2][0], reverse=True)
    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        digests = list(pool.map(lambda job: hash_file(job[1][1], job[1][2].partition("=")[0], job[2][0]), pending))
    fresh: dict[str, list[Any]] = {}
    for (key, (rel, path, digest, _size), k), got in zip(pending, digests, strict=True):
        stats["hashed"] += 1
        stats["bytes_hashed"] += k[0]
        if got is None:
            reports[key]["removed"].append(rel)
            continue
        fresh[path] = [*k, got]
        if got != digest:
            reports[key]["modified"].append(rel)
    return fresh


def _attribute(
    strays: set[str], location: str, dists: list[tuple[str, list[Entry]]], reports: dict[str, dict[str, Any]]
) -> None:
    owners = _owners(dists)
    prefix = location + os.sep
    for path in strays:
        rel = path[len(prefix) :].replace(os.sep, "/") if path.startswith(prefix) else path
        owner = _owner_of(rel, owners)
        if owner is not None:
            reports[owner]["added"].append(rel)


def verify_group(group: dict[str, Any], cache_dir: str | None, threads: int) -> dict[str, Any]:
    location = group["location"]
    only, exclude = list(group.get("only") or []), list(group.get("exclude") or [])
    seen = scan(location, group["tops"], only, exclude)
    cache_path = os.path.join(cache_dir, f"{group['id']}.json") if cache_dir else None
    cache = load_cache(cache_path)
    dists = [(key, read_record(location, info)) for key, info in group["dists"]]
    reports: dict[str, dict[str, Any]] = {k: {"files": 0, "modified": [], "removed": [], "added": []} for k, _ in dists}
    stats = {"files": 0, "hashed": 0, "cache_hits": 0, "bytes_hashed": 0}
    pending: list[tuple[str, Entry, Key]] = []
    for key, entries in dists:
        mine = in_unit(entries, only, exclude)
        stats["cache_hits"] += _check(mine, cache, reports[key], pending, key)
        stats["files"] += reports[key]["files"]
    fresh = _hash_pending(pending, reports, stats, threads) if pending else {}
    recorded = {path for _key, entries in dists for _r, path, _d, _s in entries}
    strays = seen - recorded
    if strays:
        _attribute(strays, location, dists, reports)
    if cache_path and (fresh or cache.keys() - recorded):
        keep = {p: v for p, v in cache.items() if p in recorded}
        keep.update(fresh)
        save_cache(cache_path, keep)
    return {"reports": reports, "stats": stats}


def main() -> int:
    start = time.perf_counter()
    job = json.load(sys.stdin)
    threads = int(job.get("threads", 2))
    out = {group["id"]: verify_group(group, job.get("cache_dir"), threads) for group in job["groups"]}
    sys.stdout.write(json.dumps({"groups": out, "seconds": round(time.perf_counter() - start, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
