"""RECORD verification of what one worker claims of the distribution groups, run as its own process.

Stdlib only, and runnable as a script (``python -I -S integrity_worker.py``): the parent
(``integrity.py``) starts one per core so that RECORD parsing, stat-ing and hashing run without
sharing a GIL. A *group* is a set of distributions of one site directory that share a top-level
name (every ``nvidia-*`` wheel shares ``nvidia/``), so a worker holds every RECORD that could own
a file it finds there.

argv:   the read end of the shared work queue (``crew.py``), last: 4-byte little-endian indices.
stdin:  JSON lines: first the setup,
         {"hash": [[path, algo, size], ...]  (the big files to hash: indices 0 .. len - 1),
          "cache_dir": str or null, "key": hex of the cache key or null (``cachefile``),
          "mapped": bool (hash them from memory maps),
          "nice": int (lower this worker's priority by, unless its first claim is index 0)}
        then the units (claimed as indices len(hash) and up), each group once,
         {"groups": [{"location", "dists": [[key, dist_info_dir, record_sha256], ...], "tops": [...],
                      "big": [...]}, ...],
          "units": [{"id", "group": index into groups, "only": [...], "exclude": [...]}, ...]}
stdout: {"groups": {id: {"reports": {key: {...}}, "stats": {...}}}, "digests": [[index, "algo=digest" or null], ...],
         "seconds": float, "hash_seconds": float, "nice": its niceness}, for what this worker claimed.

The cache is one ``marshal`` file per unit of work (``<id>.bin``), loaded in milliseconds:

- ``hashes``: path -> (size, mtime_ns, inode, ctime_ns, "algo=digest"). ctime is in the key because
  no user-level tool can set it back, so an in-place edit that restores mtime still misses it. An
  entry of any other shape is a miss (``check``), never an answer.
- ``warm``: what a cold run worked out once, valid while the unit's signature (its RECORDs' sha256,
  tops, split) is unchanged and every directory it walked has the same (mtime_ns, ctime_ns, inode):
  the RECORD rows to check and the stray files found. A file added, removed or renamed anywhere
  changes its directory's mtime, so the walk and the RECORD parsing are skipped only when they would
  find what they found last time. Every recorded file is still stat-ed against its hash key.
  Directories modified less than ``RACY_NS`` before the walk are not trusted (a change in the same
  timestamp tick would go unseen); a unit holding one stays on the cold path.

Every cache file is sealed and checked before use (``cachefile``: a regular file of this user's,
not writable by others, within ``CACHE_LIMIT``, whose keyed checksum matches); a bad one is
discarded with a note in the result (``notes``) and the work done again. A file is hashed, then
stat-ed again: one replaced or changed while it was read is hashed again (``RETRIES``), then
reported as modified. A RECORD row that cannot be read (a size of too many digits, a NUL in its
path, a quoted row the csv module refuses) is a ``malformed`` finding of its distribution, a row
whose path leaves the environment (``bound``) an ``outside`` one; neither is opened.
"""

# This file runs before site-packages exist (python -I -S) and handles ~50,000 paths: stdlib,
# os.path and plain containers on purpose.
# ruff: noqa: PTH100, PTH112, PTH114, PTH116, PTH118, PTH119, PTH120

from __future__ import annotations

import json
import marshal
import os
import sys
import time

if __name__ == "__main__":  # run as a script (-I -S): the sealed-cache module beside this file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import cachefile  # type: ignore[import-not-found,unused-ignore]
else:
    from megacpp_env.snapshot.verify import cachefile

# Imported lazily below (a worker with a warm cache needs none of them): csv, io, hashlib, base64,
# tempfile. typing only for the type checker.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

IGNORED_SUFFIXES = (".pyc", ".pyo")
SMALL_FILE = 1 << 20
# Reads that fit a core's L2 cache: each is hashed while still there. Measured on the H200
# (benchmarks/bench_hash_reads.py, docs/BENCHMARKS.md): its largest library, 542 MB, in 0.56 s in
# 256 KiB reads, 0.61 s in 16 MiB reads (which go out to memory and back); all 7.2 GB on 16
# processes in 0.66 s vs 0.82 s.
CHUNK = 256 << 10
CACHE_VERSION = 5  # 5: sealed (cachefile); 4: the big files are the parent's (``big`` in the job)
CACHE_LIMIT = 512 << 20  # bytes: a unit of torch's ~20,000 rows is ~3 MB
RACY_NS = 2_000_000_000
RETRIES = 3  # hashings of a file that keeps changing while it is read, before it is reported
SIZE_DIGITS = 20  # a RECORD size longer than this is malformed (int() of 4,300+ digits raises)

Entry = tuple[str, str, str, int]  # rel, absolute path, "algo=digest" ("" when unhashed), size (-1: none)
Key = tuple[int, int, int, int]
DirKey = tuple[str, int, int, int]  # path, mtime_ns, ctime_ns, inode


def _rows(text: str) -> Any:
    if '"' in text:
        import csv
        import io

        return csv.reader(io.StringIO(text))
    return (line.rsplit(",", 2) for line in text.splitlines())


def bound(location: str) -> str:
    """The environment a site directory belongs to: its prefix for ``lib/python3*/site-packages`` or
    ``dist-packages`` (scripts in ``bin/``, headers and data files stay inside it), else itself.
    A RECORD row whose path leaves it is an ``outside`` finding, never read."""
    lib = os.path.dirname(os.path.dirname(location))
    if os.path.basename(location) in ("site-packages", "dist-packages") and os.path.basename(lib) == "lib":
        return os.path.dirname(lib)
    return location


class Parsed:
    """A RECORD's rows: the readable ones, and the findings of the others (row numbers from 1)."""

    __slots__ = ("entries", "malformed", "outside")

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.malformed: list[str] = []
        self.outside: list[str] = []


def _shown(rel: str) -> str:
    """A hostile row's path as a finding may name it: printable, bounded."""
    text = rel.encode("unicode_escape", "replace").decode("ascii", "replace")
    return text if len(text) <= 200 else text[:200] + "..."


def parse_rows(location: str, text: str) -> Parsed:
    """Every row of a RECORD: (rel, absolute path, "algo=digest" or "", size or -1), and findings."""
    prefix = location + os.sep
    root = bound(location)
    out = Parsed()
    try:
        rows = list(_rows(text))
    except Exception as exc:  # csv.Error (NUL before 3.11, a broken quote): rows read unquoted
        out.malformed.append(f"RECORD: {type(exc).__name__}: {exc}"[:200])
        rows = [line.rsplit(",", 2) for line in text.splitlines()]
    for number, row in enumerate(rows, 1):
        rel = row[0] if row else ""
        if not rel:
            continue
        size_text = row[2] if len(row) > 2 else ""
        if "\0" in rel or len(size_text) > SIZE_DIGITS:
            why = "a NUL in its path" if "\0" in rel else f"a size of {len(size_text)} digits"
            out.malformed.append(f"row {number}: {why}: {_shown(rel)}")
            continue
        if rel[0] in "./" or "/." in rel or "//" in rel or "\\" in rel:
            rel = os.path.normpath(rel).replace(os.sep, "/")
            path = os.path.normpath(os.path.join(location, rel))
            if not (path + os.sep).startswith(root.rstrip(os.sep) + os.sep):
                out.outside.append(_shown(rel))
                continue
        else:
            path = prefix + rel
        digest = row[1] if len(row) > 1 and "=" in row[1] else ""
        size = int(size_text) if size_text.isdigit() else -1
        out.entries.append((rel, path, digest, size))
    return out


def parse_record(location: str, text: str) -> list[Entry]:
    """(rel, absolute path, "algo=digest" or "", size or -1) for every readable row."""
    return parse_rows(location, text).entries


def open_regular(path: str) -> int:
    """A descriptor of ``path`` if it is a regular file; OSError otherwise. O_NONBLOCK: a FIFO planted
    where a file should be is refused, never waited on."""
    import stat as stat_mod

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat_mod.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path}: not a regular file")
    return fd


def read_record(location: str, dist_info: str) -> list[Entry]:
    """The RECORD's rows; none when it is no regular file (a FIFO there is never waited on)."""
    return parse_record(location, record_text(dist_info))


def record_text(dist_info: str) -> str:
    """The RECORD's text; empty when it is no regular file (a FIFO there is never waited on)."""
    try:
        fd = open_regular(os.path.join(dist_info, "RECORD"))
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as fh:
        return fh.read().decode("utf-8", errors="replace")


def _plain(line: str) -> bool:
    """A row ``parse_record`` takes as written: no leading ``.``/``/``, no ``/.``, ``//`` or ``\\``."""
    return not line.startswith((".", "/")) and "/." not in line and "//" not in line and "\\" not in line


def unit_rows(text: str, only: list[str], exclude: list[str]) -> str:
    """The rows of ``text`` that can belong to the unit: under ``only`` (when given) and not under
    ``exclude``, decided on the row as written; a row that parsing would rewrite (``./``, ``..``)
    is kept for ``in_unit`` to decide once normalised, and a RECORD with quoted rows is kept whole.
    So a unit of torch parses its own rows, not torch's ~20,000."""
    if (not only and not exclude) or '"' in text:  # quoted rows (a comma, a newline in a name): parsed whole
        return text
    lines = text.splitlines()
    if only:
        inside = tuple(p + "/" for p in only)
        lines = [line for line in lines if line.startswith(inside) or not _plain(line)]
    if exclude:
        outside = tuple(p + "/" for p in exclude)
        lines = [line for line in lines if not line.startswith(outside) or not _plain(line)]
    return "\n".join(lines)


def _key(st: os.stat_result) -> Key:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


def top_kinds(location: str, tops: list[str], only: list[str], exclude: list[str]) -> list[list[str]]:
    """[top, kind] for the unit's starting points: "d" directory, "f" other entry, "-" absent."""
    out = []
    for top in only or tops:
        path = os.path.join(location, top)
        if top in exclude:
            continue
        kind = "d" if os.path.isdir(path) and not os.path.islink(path) else "f" if os.path.lexists(path) else "-"
        out.append([top, kind])
    return out


def scan(location: str, kinds: list[list[str]], exclude: list[str], dirs: list[DirKey]) -> set[str]:
    """Every file under the unit's part of the group (``__pycache__``/byte-code skipped); names
    only, from the directory entries: the files RECORD lists are stat-ed once, by ``check``.
    Each directory walked is appended to ``dirs`` with its stat key, taken before it is listed."""
    out: set[str] = set()
    stack: list[str] = []
    skip = {os.path.join(location, p) for p in exclude}
    for top, kind in kinds:
        path = os.path.join(location, top)
        if kind == "d":
            stack.append(path)
        elif kind == "f" and not top.endswith(IGNORED_SUFFIXES):
            out.add(path)
    while stack:
        path = stack.pop()
        try:
            st = os.lstat(path)
            it = os.scandir(path)
        except OSError:
            continue
        dirs.append((path, st.st_mtime_ns, st.st_ctime_ns, st.st_ino))
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


def unchanged(dirs: list[DirKey]) -> bool:
    """Every directory still has the stat key it had when it was walked."""
    lstat = os.lstat
    for path, mtime, ctime, ino in dirs:
        try:
            st = lstat(path)
        except OSError:
            return False
        if st.st_mtime_ns != mtime or st.st_ctime_ns != ctime or st.st_ino != ino:
            return False
    return True


def in_unit(entries: list[Entry], only: list[str], exclude: list[str]) -> list[Entry]:
    if only:
        inside = tuple(p + "/" for p in only)
        entries = [e for e in entries if e[0].startswith(inside)]
    if exclude:  # with ``only``: its big subdirectories, other units' work
        outside = tuple(p + "/" for p in exclude)
        entries = [e for e in entries if not e[0].startswith(outside)]
    return entries


CHANGING = "changing"  # hash_file's answer for a file that changed while it was hashed, every time


def hash_file(path: str, algo: str, size: int, *, mapped: bool = False) -> str | None:
    """ "algo=digest" of the file (None: unreadable; ``CHANGING``: it changed under every one of
    ``RETRIES`` readings). After each reading the path is stat-ed again: a file renamed over, or
    written, while it was read is not the file hashed, so it is hashed again."""
    for _ in range(RETRIES):
        got = _hash_once(path, algo, size, mapped=mapped)
        if got is not None and got[1] is not None:
            return got[0]
        if got is None:
            return None
    return CHANGING


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_ino, a.st_dev, a.st_size, a.st_mtime_ns, a.st_ctime_ns) == (
        b.st_ino, b.st_dev, b.st_size, b.st_mtime_ns, b.st_ctime_ns)  # fmt: skip


def _hash_once(path: str, algo: str, size: int, *, mapped: bool) -> tuple[str, os.stat_result | None] | None:
    """(digest, the stat it is valid for; None when the file changed while it was read), or None
    when it cannot be read. ``mapped``: hashed from a memory map, no copy into a buffer (the
    parent's big files: the 542 MB library in 0.47 s instead of 0.56 s on the H200). A mapped file
    truncated while it is hashed kills this process with SIGBUS; the parent then does the run
    again without maps (``integrity.verify``)."""
    import base64
    import hashlib

    try:
        h = hashlib.new(algo)
        with os.fdopen(open_regular(path), "rb", buffering=0) as fh:
            before = os.fstat(fh.fileno())
            if size < SMALL_FILE:
                h.update(fh.read())
            elif mapped and os.fstat(fh.fileno()).st_size > 0:
                import mmap

                with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as whole:
                    if hasattr(whole, "madvise") and hasattr(mmap, "MADV_SEQUENTIAL"):
                        whole.madvise(mmap.MADV_SEQUENTIAL)  # read ahead from a cold cache
                    h.update(whole)
            else:
                buf = bytearray(min(CHUNK, max(size, 1)))
                view = memoryview(buf)
                while n := fh.readinto(buf):
                    h.update(view[:n])
            after = os.fstat(fh.fileno())
        now = os.stat(path)
    except (OSError, ValueError):
        return None
    digest = f"{algo}={base64.urlsafe_b64encode(h.digest()).rstrip(b'=').decode()}"
    return digest, (now if _same(before, after) and _same(after, now) else None)


def load_cache(path: str | None, key: bytes | None, notes: list[str]) -> dict[str, Any]:
    """The cache file at ``path`` (sealed: ``cachefile``), or {} (a note when it was discarded)."""
    if not path:
        return {}
    entry = cachefile.read(path, key, CACHE_LIMIT)
    if entry.note:
        notes.append(entry.note)
    if entry.payload is None:
        return {}
    try:
        data = marshal.loads(entry.payload)  # noqa: S302 (sealed by this user's key: cachefile)
    except (EOFError, ValueError, TypeError):
        data = None
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or not _valid(data):
        notes.append(f"{os.path.basename(path)}: not a cache of this version: discarded")
        return {}
    return data


def _valid(data: dict[str, Any]) -> bool:
    """The cache's shape (its ``hashes`` entries are checked where used: any other shape is a miss)."""
    if not isinstance(data.get("hashes", {}), dict):
        return False
    warm = data.get("warm")
    if warm is None:
        return True
    try:
        return (
            isinstance(data.get("sig"), str)
            and all(
                type(k) is list and len(k) == 2 and type(k[0]) is str and k[1] in ("d", "f", "-") for k in warm["kinds"]
            )
            and all(type(d) in (list, tuple) and len(d) == 4 and type(d[0]) is str for d in warm["dirs"])
            and all(type(k) is str and _entries(e) for k, e in warm["checks"])
            and all(type(k) is str and all(type(p) is str for p in v) for k, v in warm["added"].items())
            and all(
                type(k) is str and len(v) == 2 and all(type(p) is str for part in v for p in part)
                for k, v in warm["findings"].items()
            )
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return False


def _entries(entries: Any) -> bool:
    return type(entries) is list and all(
        type(e) in (list, tuple) and len(e) == 4 and type(e[0]) is str and type(e[1]) is str
        and type(e[2]) is str and type(e[3]) is int for e in entries
    )  # fmt: skip


def save_cache(path: str, data: dict[str, Any], key: bytes | None, notes: list[str]) -> None:
    note = cachefile.write(path, marshal.dumps({**data, "version": CACHE_VERSION}), key)
    if note:
        notes.append(note)


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


def check(
    entries: list[Entry],
    cache: dict[str, list[Any]],
    report: dict[str, Any],
    pending: list[tuple[str, Entry, Key]],
    key: str,
) -> int:
    """Stat every hashed RECORD row once; a cache hit needs the same (size, mtime, inode, ctime)
    and a digest of the same algorithm. The hot loop of a warm snapshot: keep it lean."""
    hits = files = 0
    get, stat = cache.get, os.stat
    removed, modified = report["removed"], report["modified"]
    for entry in entries:
        rel, path, digest, size = entry
        if not digest:
            continue
        files += 1
        try:
            st = stat(path)
        except (OSError, ValueError):
            removed.append(rel)
            continue
        if size >= 0 and st.st_size != size:
            modified.append(rel)
            continue
        hit = get(path)
        if (
            type(hit) is not list
            or len(hit) != 5
            or type(hit[4]) is not str
            or hit[1] != st.st_mtime_ns
            or hit[3] != st.st_ctime_ns
            or hit[2] != st.st_ino
            or hit[0] != st.st_size
        ):
            pending.append((key, entry, _key(st)))
        elif hit[4] == digest:
            hits += 1
        elif hit[4].partition("=")[0] != digest.partition("=")[0]:
            pending.append((key, entry, _key(st)))  # cached under another algorithm
        else:
            hits += 1
            modified.append(rel)
    report["files"] += files
    return hits


def _hash_pending(
    pending: list[tuple[str, Entry, Key]], reports: dict[str, dict[str, Any]], stats: dict[str, int]
) -> dict[str, list[Any]]:
    pending.sort(key=lambda job: job[2][0], reverse=True)
    # one after another, largest first: one hashing thread per worker, one worker per core
    digests = [hash_file(path, digest.partition("=")[0], k[0]) for _key, (_r, path, digest, _s), k in pending]
    fresh: dict[str, list[Any]] = {}
    for (key, (rel, path, digest, _size), k), got in zip(pending, digests, strict=True):
        stats["hashed"] += 1
        stats["bytes_hashed"] += k[0]
        if got is None:
            reports[key]["removed"].append(rel)
            continue
        if got == CHANGING:  # it changed under every reading: not the file RECORD names, and not cached
            reports[key]["modified"].append(rel)
            continue
        fresh[path] = [*k, got]
        if got != digest:
            reports[key]["modified"].append(rel)
    return fresh


def _attribute(strays: set[str], location: str, dists: list[tuple[str, list[Entry]]]) -> dict[str, list[str]]:
    owners = _owners(dists)
    prefix = location + os.sep
    added: dict[str, list[str]] = {}
    for path in strays:
        rel = path[len(prefix) :].replace(os.sep, "/") if path.startswith(prefix) else path
        owner = _owner_of(rel, owners)
        if owner is not None:
            added.setdefault(owner, []).append(rel)
    return added


def signature(group: dict[str, Any]) -> str:
    parts = [
        group["location"],
        sorted(group["tops"]),
        group["dists"],
        group.get("only"),
        group.get("exclude"),
        group.get("big"),
        bool(group.get("findings")),
    ]
    return json.dumps(parts, separators=(",", ":"))


def cold(group: dict[str, Any], only: list[str], exclude: list[str]) -> tuple[dict[str, Any], set[str], bool]:
    """Walk the unit and parse its rows of the group's RECORDs: (warm state, every recorded path in
    the unit, whether the state may be trusted next time, i.e. no directory was modified within
    ``RACY_NS``). The unit that holds a group's findings (``findings``: the whole group, or the rest
    of a split one) parses every row once for the malformed and outside ones."""
    location = group["location"]
    dirs: list[DirKey] = []
    kinds = top_kinds(location, group["tops"], only, exclude)
    started = time.time_ns()
    seen = scan(location, kinds, exclude, dirs)
    texts = [(key, record_text(info)) for key, info, *_ in group["dists"]]
    mine = [(key, in_unit(parse_record(location, unit_rows(t, only, exclude)), only, exclude)) for key, t in texts]
    recorded = {path for _key, entries in mine for _r, path, _d, _s in entries}  # every one inside the unit
    strays = seen - recorded  # ``seen`` is inside the unit too
    whole = [(k, parse_rows(location, t)) for k, t in texts] if strays or group.get("findings") else []
    # a stray's owner is looked up among every row of the group (its nearest recorded directory)
    added = _attribute(strays, location, [(k, p.entries) for k, p in whole]) if strays else {}
    whole = whole if group.get("findings") else []
    findings = (
        {k: [p.malformed, p.outside] for k, p in whole if p.malformed or p.outside} if group.get("findings") else {}
    )
    big = set(group.get("big") or ())  # hashed by the parent
    checks = [(key, [e for e in entries if e[2] and e[1] not in big]) for key, entries in mine]
    trusted = all(mtime < started - RACY_NS for _p, mtime, _c, _i in dirs)
    state = {"kinds": kinds, "dirs": dirs, "checks": checks, "added": added, "findings": findings}
    return state, recorded, trusted


def warm_state(cache: dict[str, Any], group: dict[str, Any], only: list[str], exclude: list[str]) -> Any:
    warm = cache.get("warm")
    if not isinstance(warm, dict) or cache.get("sig") != signature(group):
        return None
    if warm["kinds"] != top_kinds(group["location"], group["tops"], only, exclude) or not unchanged(warm["dirs"]):
        return None
    return warm


def verify_group(group: dict[str, Any], cache_dir: str | None, key: bytes | None, notes: list[str]) -> dict[str, Any]:
    only, exclude = list(group.get("only") or []), list(group.get("exclude") or [])
    cache_path = os.path.join(cache_dir, f"{group['id']}.bin") if cache_dir else None
    cache = load_cache(cache_path, key, notes)
    hashes = cache.get("hashes")
    hashes = hashes if isinstance(hashes, dict) else {}
    state = warm_state(cache, group, only, exclude)
    recorded: set[str] | None = None
    trusted = True
    if state is None:
        state, recorded, trusted = cold(group, only, exclude)
    reports: dict[str, dict[str, Any]] = {
        k: {"files": 0, "modified": [], "removed": [], "added": list(state["added"].get(k, []))}
        for k, *_ in group["dists"]
    }
    for k, (malformed, outside) in state["findings"].items():
        reports[k].update(malformed=list(malformed), outside=list(outside))
    stats = {"files": 0, "hashed": 0, "cache_hits": 0, "bytes_hashed": 0, "walked": int(recorded is not None)}
    pending: list[tuple[str, Entry, Key]] = []
    for dist, mine in state["checks"]:
        stats["cache_hits"] += check(mine, hashes, reports[dist], pending, dist)
        stats["files"] += reports[dist]["files"]
    fresh = _hash_pending(pending, reports, stats) if pending else {}
    if cache_path and (fresh or recorded is not None):
        keep = hashes if recorded is None else {p: v for p, v in hashes.items() if p in recorded}
        keep.update(fresh)
        warm = state if trusted else None
        save_cache(cache_path, {"sig": signature(group), "hashes": keep, "warm": warm}, key, notes)
    return {"reports": reports, "stats": stats}


def _lower_priority(by: int) -> None:
    """``nice`` this process by ``by`` (lowering a priority needs no privilege; where it fails, nothing is lost)."""
    try:
        os.nice(max(0, by))
    except (OSError, AttributeError):
        return


def claims(queue: int) -> Any:
    """The indices this worker claims from the shared queue (``crew.py``), until it is empty and closed."""
    while True:
        data = os.read(queue, 4)
        if not data:
            return
        if len(data) != 4:
            raise SystemExit(f"integrity worker: a short read from the work queue ({len(data)} bytes)")
        yield int.from_bytes(data, "little")


def next_part(stream: Any, key: str) -> dict[str, Any] | None:
    """The next stdin line that holds ``key`` (blank lines skipped); None at EOF."""
    for line in stream:
        if line.strip():
            part = json.loads(line)
            if key in part:
                return part  # type: ignore[no-any-return]
    return None


def claimed(units: dict[str, Any], n: int) -> dict[str, Any]:
    """Unit ``n`` of the units line, with its group's fields: what ``verify_group`` verifies."""
    unit = units["units"][n]
    return {
        **units["groups"][unit["group"]], "id": unit["id"], "only": unit["only"], "exclude": unit["exclude"],
        "findings": bool(unit.get("findings")),
    }  # fmt: skip


def main() -> int:
    """The setup line first (the big files, the cache directory, how to hash, how much to yield),
    then claims from the queue (the last argument) until it is empty: an index below the number
    of big files hashes that file, any other verifies a unit of the units line, read from stdin
    when the first is claimed."""
    start = time.perf_counter()
    setup = next_part(sys.stdin, "hash")
    if setup is None:  # the parent stopped before it had work for this worker
        return 0
    big: list[list[Any]] = setup["hash"]  # [path, algo, size]: the parent's big files (integrity.BigFiles)
    mapped, nice = bool(setup.get("mapped")), int(setup.get("nice") or 0)
    key = bytes.fromhex(setup["key"]) if setup.get("key") else None
    notes: list[str] = []
    units: dict[str, Any] | None = None
    out: dict[str, Any] = {}
    digests: list[list[Any]] = []
    hashed = 0.0
    for n, index in enumerate(claims(int(sys.argv[-1]))):
        if n == 0 and nice and index != 0:  # the largest file's worker (index 0) keeps its priority
            _lower_priority(nice)
        if index < len(big):
            began = time.perf_counter()
            path, algo, size = big[index]
            digests.append([index, hash_file(path, algo, int(size), mapped=mapped)])
            hashed += time.perf_counter() - began
            continue
        if units is None:
            units = next_part(sys.stdin, "units") or {"groups": [], "units": []}
        if index - len(big) >= len(units["units"]):
            raise SystemExit(f"integrity worker: no item {index} ({len(big)} big files, {len(units['units'])} units)")
        group = claimed(units, index - len(big))
        out[group["id"]] = verify_group(group, setup.get("cache_dir"), key, notes)
    done = {
        "groups": out,
        "digests": digests,
        "seconds": round(time.perf_counter() - start, 3),
        "hash_seconds": round(hashed, 3),
        "nice": os.nice(0),
        "notes": notes,
    }
    sys.stdout.write(json.dumps(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
