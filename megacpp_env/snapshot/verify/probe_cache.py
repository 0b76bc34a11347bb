"""The distribution listing of the inspected interpreter, reused while nothing it reads has changed.

The probe (``python_env.PROBE``) always starts the inspected interpreter: ``site`` runs every
``.pth`` file and whatever module it imports, and those can put any directory on ``sys.path``
(a stat of the ``.pth`` file cannot see an edit of the module it imports, nor what that module
reads). So what the interpreter says of itself, ``sys.path`` first, is always live. Only the
listing that follows (``importlib.metadata``: every directory on ``sys.path`` listed, each
distribution's ``METADATA`` read) is cached: its answer depends only on the directories on the live
``sys.path`` (a distribution added, removed or renamed changes its directory's mtime), each listed
distribution's directory and ``METADATA``/``PKG-INFO`` (an edit changes its mtime and ctime), and on
no finder of its own (a ``sys.meta_path`` finder with ``find_distributions`` other than the path
finder: then it is never cached). A *stat signature* of all of them is kept with the listing in a
sealed cache file (``cachefile``); while it matches, the probe is told to skip the listing. A stat
within ``RACY_NS`` of the probe is too recent to trust: not cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.snapshot.probe import Probe
from megacpp_env.snapshot.probe import run_probe as probe_now
from megacpp_env.snapshot.verify import cachefile

if TYPE_CHECKING:
    from megacpp_env.snapshot.options import Cache

FORMAT = 2
RACY_NS = 2_000_000_000  # a stat changed within 2 s of the probe: too recent to trust
LIMIT = 64 << 20


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)  # noqa: PTH116 (os.stat on ~500 paths a snapshot)
    except (OSError, ValueError):
        return None
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode]


def signature(said: Mapping[str, Any], dists: Sequence[Mapping[str, Any]]) -> tuple[str, int]:
    """What the listing ``dists`` depends on, as one digest of stats, and the newest mtime among them."""
    sys_path = [str(p) for p in said.get("sys_path") or []]
    paths = [str(d.get("path", "")) for d in dists]
    parts: dict[str, Any] = {
        "format": FORMAT,
        "executable": str(said.get("executable", "")),
        "dirs": [(p, _stat(p)) for p in sys_path],
        "dists": [(p, _stat(p), _stat(f"{p}/METADATA"), _stat(f"{p}/PKG-INFO")) for p in paths],
    }
    newest = max((s[0] for s in _stats(parts) if s), default=0)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest(), newest


def _stats(parts: Mapping[str, Any]) -> Iterable[list[int] | None]:
    yield from (s for _p, s in parts["dirs"])
    for _p, *stats in parts["dists"]:
        yield from stats


def cache_file(cache: Cache, python: str) -> Path:
    tag = hashlib.sha256(str(Path(python).absolute()).encode()).hexdigest()[:16]
    return cache.file(f"probe-{tag}.json")


def _load(path: Path, key: bytes, notes: list[str]) -> tuple[str, dict[str, Any]] | None:
    found, raw = cachefile.read_json(str(path), key, LIMIT, notes)
    listing = raw.get("listing") if isinstance(raw, dict) else None
    if not isinstance(listing, dict) or not isinstance(raw.get("signature"), str):
        if found:
            notes.append(f"{path.name}: not a probe cache of this version: discarded")
        return None
    dists = listing.get("distributions")
    fields = ("name", "version", "path")
    if not isinstance(dists, list) or not all(
        isinstance(d, dict) and all(isinstance(d.get(f), str) for f in fields) for d in dists
    ):
        notes.append(f"{path.name}: a listing of another shape: discarded")
        return None
    return raw["signature"], listing


def run_probe(python: str, environ: Mapping[str, str], cache: Cache | None) -> Probe:
    """The probe's answer; its distribution listing reused while its stat signature matches."""
    if cache is None:
        return probe_now(python, environ)
    path = cache_file(cache, python)
    notes: list[str] = []
    stored = _load(path, cache.key, notes)

    def reuse(said: Mapping[str, Any]) -> dict[str, Any] | None:
        if stored is None or said.get("finders"):
            return None
        digest, listing = stored
        return listing if signature(said, listing["distributions"])[0] == digest else None

    started = time.time_ns()
    probe = probe_now(python, environ, reuse)
    if not probe.reused and not probe.data.get("finders") and "error" not in probe.data:
        digest, newest = signature(probe.data, probe.data.get("distributions") or [])
        if newest < started - RACY_NS:  # an unwritable cache only costs the next snapshot a listing
            listing = {"distributions": probe.data.get("distributions") or []}
            payload = json.dumps({"signature": digest, "listing": listing}, sort_keys=True).encode()
            note = cachefile.write(str(path), payload, cache.key)
            notes += [note] if note else []
    return Probe(data=probe.data, seconds=probe.seconds, reused=probe.reused, notes=tuple(notes))
