"""Location-independent comparison of two snapshots of the same environment made in two places.

A re-created environment necessarily differs from the golden in where it is: the venv's prefix, the
checkouts' directories (and, between machines, the base interpreter's prefix). ``Roots`` maps each
such path to a token (``{venv}``, ``{checkout:NAME}``, ``{base}``); ``comparable`` rewrites a
snapshot's facts with them and keeps, per checkout, only what the tree *is* (HEAD, diff, untracked
files, submodules, remotes), not where it is nor how a spec judged it. A distribution's RECORD
names files whose bytes hold absolute paths (console-script shebangs, ``direct_url.json``, editable
``.pth`` files); ``record_digest`` hashes those after relocation, every other row by its RECORD
hash, so "the same files" is decided without the location.

Everything else compares as it is: an environment variable or a compiler that differs is drift.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megacpp_env.fsutil import sha256_bytes
from megacpp_env.snapshot.diff import DiffReport, diff_snapshots, flatten
from megacpp_env.snapshot.document import Snapshot, digest_of
from megacpp_env.snapshot.scrub import map_strings

VENV = "{venv}"
BASE = "{base}"
# What a checkout *is*: compared after relocation. Not its path, nor a spec's judgement of it.
TREE_FIELDS = (
    "has_git", "head", "dirty", "diff_hash", "untracked", "untracked_hash", "changed", "submodules", "remotes",
    "overlay", "error",
)  # fmt: skip
_EDGE = r"[A-Za-z0-9._-]"
# bin/python, bin/python3 and bin/python3.X of a venv are one interpreter: a script's shebang names
# whichever the installer ran as, which says nothing about the environment.
VENV_PYTHON = re.compile(re.escape(VENV) + r"/bin/python[0-9.]*(?![A-Za-z0-9_-])")


def checkout_token(name: str) -> str:
    return "{checkout:" + name + "}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Roots:
    """Paths that differ between two places of one environment, each with its token."""

    pairs: tuple[tuple[str, str], ...]  # (absolute path, token)

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str]]) -> Roots:
        seen = {p.rstrip("/"): t for p, t in pairs if p and p.rstrip("/")}
        return cls(pairs=tuple(sorted(seen.items(), key=lambda kv: (-len(kv[0]), kv[0]))))

    def _pattern(self) -> re.Pattern[str] | None:
        if not self.pairs:
            return None
        alternatives = "|".join(re.escape(p) for p, _ in self.pairs)
        return re.compile(rf"(?<!{_EDGE})(?:{alternatives})(?!{_EDGE})")

    def text(self, value: str) -> str:
        """``value`` with every root path replaced by its token."""
        pattern = self._pattern()
        if pattern is None or "/" not in value:
            return value
        lookup = dict(self.pairs)
        return pattern.sub(lambda m: lookup[m[0]], value)

    def tree(self, obj: Any) -> Any:
        """A copy of a JSON tree with every string (keys too) relocated."""
        return map_strings(obj, self.text)

    def resolve(self, value: str) -> str:
        """The inverse: tokens replaced by this place's paths."""
        for path, token in self.pairs:
            value = value.replace(token, path)
        return value


def interpreter(snapshot: Snapshot) -> Mapping[str, Any]:
    found = snapshot.area("python").get("interpreter")
    return found if isinstance(found, Mapping) else {}


def checkout_paths(snapshot: Snapshot) -> dict[str, str]:
    """Checkout key -> its directory, for every checkout the snapshot found."""
    out: dict[str, str] = {}
    for key, entry in snapshot.area("checkouts").items():
        if isinstance(entry, Mapping) and isinstance(entry.get("path"), str):
            out[key] = entry["path"]
    return out


def roots_of(snapshot: Snapshot, checkouts: Mapping[str, str] | None = None) -> tuple[Roots, Roots]:
    """(roots of every area, roots of the python area) for ``snapshot``: its venv prefix and its
    checkouts (``checkouts``: key -> path overrides the snapshot's), plus, for the interpreter
    facts only, the base interpreter's prefix."""
    interp = interpreter(snapshot)
    paths = checkout_paths(snapshot) if checkouts is None else dict(checkouts)
    pairs = [(str(p), checkout_token(Path(p).name)) for p in paths.values()]
    prefix, base = str(interp.get("prefix") or ""), str(interp.get("base_prefix") or "")
    if prefix and prefix != base:
        pairs.append((prefix, VENV))
    everywhere = Roots.of(pairs + [(os.path.realpath(p), t) for p, t in pairs if Path(p).exists()])
    python = Roots.of([*everywhere.pairs, (base, BASE)] if base and base != prefix else everywhere.pairs)
    return everywhere, python


# ---- RECORD -------------------------------------------------------------------------------------


def _location_bearing(rel: str, dist_info: str) -> bool:
    """RECORD rows whose bytes may hold an absolute path of the environment or of a checkout."""
    name = rel.rsplit("/", 1)[-1]
    return (
        rel.startswith("../")
        or name.endswith(".pth")
        or name.startswith("__editable__")
        or name.endswith(".egg-link")
        or rel == f"{dist_info}/direct_url.json"
    )


def direct_url_form(data: Mapping[str, Any] | None, roots: Roots) -> Any:
    """A ``direct_url.json`` as compared: relocated; a ``file:`` URL outside every root keeps only
    its file name (a wheel built into a scratch directory), its hashes still compared."""
    if not data:
        return data
    out: dict[str, Any] = roots.tree(data)
    url = str(out.get("url", ""))
    if url.startswith("file:") and "{" not in url:
        out["url"] = "file:" + url.rstrip("/").rsplit("/", 1)[-1]
    return out


def _row_hash(site: Path, rel: str, recorded: str, dist_info: str, roots: Roots) -> str:
    if not _location_bearing(rel, dist_info):
        return recorded
    try:
        data = (site / rel).read_bytes()
    except OSError:
        return recorded
    if rel.endswith("direct_url.json"):
        try:
            return "portable:" + sha256_bytes(
                json.dumps(direct_url_form(json.loads(data), roots), sort_keys=True).encode()
            )
        except ValueError:
            return recorded
    try:
        text = roots.text(data.decode("utf-8"))
    except UnicodeDecodeError:
        return recorded
    return "portable:" + sha256_bytes(VENV_PYTHON.sub(VENV + "/bin/python", text).encode())


def _installer_files(dist_info: str) -> tuple[str, ...]:
    """Rows that are the installer's bookkeeping, not the environment: RECORD itself and the cache
    key uv writes for a wheel installed from a local file (``uv_cache.json``: timestamps)."""
    return (f"{dist_info}/RECORD", f"{dist_info}/uv_cache.json")


def record_digest(dist_info: Path, roots: Roots) -> str:
    """sha256 over a distribution's RECORD rows (path and hash) with location-bearing files hashed
    after relocation; '' when it has no readable RECORD."""
    dist_info = Path(dist_info)
    try:
        text = (dist_info / "RECORD").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    rows = []
    for row in csv.reader(text.splitlines()):
        if not row or not row[0] or row[0] in _installer_files(dist_info.name):
            continue
        recorded = row[1] if len(row) > 1 else ""
        rows.append(f"{row[0]},{_row_hash(dist_info.parent, row[0], recorded, dist_info.name, roots)}")
    return sha256_bytes("\n".join(sorted(rows)).encode())


def live_record_digests(snapshot: Snapshot, roots: Roots) -> dict[str, str]:
    """``record_digest`` of every distribution the (local) ``snapshot`` lists."""
    out: dict[str, str] = {}
    for key, dist in (snapshot.area("python").get("distributions") or {}).items():
        location, meta = dist.get("location"), dist.get("metadata_dir")
        if isinstance(location, str) and isinstance(meta, str) and meta.endswith(".dist-info"):
            out[key] = record_digest(Path(location) / meta, roots)
    return out


# ---- the comparable facts -----------------------------------------------------------------------


def _python(area: Mapping[str, Any], roots: Roots, records: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = roots.tree(area)
    for key, dist in (out.get("distributions") or {}).items():
        if not isinstance(dist, dict):
            continue
        if records.get(key):
            dist["record_sha256"] = records[key]
            if isinstance(dist.get("integrity"), dict):  # the count includes installer bookkeeping
                dist["integrity"].pop("files", None)
        dist["direct_url"] = direct_url_form(area["distributions"][key].get("direct_url"), roots)
    return out


def _checkouts(area: Mapping[str, Any], roots: Roots) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, entry in area.items():
        if not isinstance(entry, Mapping):
            out[key] = entry
            continue
        name = Path(str(entry.get("path") or key)).name
        out[checkout_token(name)] = roots.tree({k: entry[k] for k in TREE_FIELDS if k in entry})
    return dict(sorted(out.items()))


def comparable(snapshot: Snapshot, roots: tuple[Roots, Roots], records: Mapping[str, str]) -> dict[str, Any]:
    """The facts of ``snapshot`` as compared across places (see the module docstring)."""
    everywhere, python = roots
    facts: dict[str, Any] = {}
    for area, value in snapshot.facts.items():
        if area == "python" and isinstance(value, Mapping) and "distributions" in value:
            facts[area] = _python(value, python, records)
        elif area == "checkouts" and isinstance(value, Mapping):
            facts[area] = _checkouts(value, everywhere)
        else:
            facts[area] = everywhere.tree(copy.deepcopy(value))
    return facts


@dataclass(frozen=True, kw_only=True, slots=True)
class Comparison:
    report: DiffReport
    golden_digest: str  # digest of the golden's comparable facts
    live_digest: str
    differing: tuple[str, ...] = ()  # every fact (dotted key) that differs, for what no finding explains

    @property
    def identical(self) -> bool:
        return self.golden_digest == self.live_digest


def compare(golden: Snapshot, golden_facts: dict[str, Any], live: Snapshot, live_facts: dict[str, Any]) -> Comparison:
    a = Snapshot(facts=golden_facts, host=golden.host)
    b = Snapshot(facts=live_facts, host=live.host)
    report = diff_snapshots(a, b, a_label="golden (relocated)", b_label="reproduced (relocated)")
    fa, fb = flatten(golden_facts), flatten(live_facts)
    differing = tuple(sorted(k for k in fa.keys() | fb.keys() if fa.get(k) != fb.get(k)))
    return Comparison(
        report=report, golden_digest=digest_of(golden_facts), live_digest=digest_of(live_facts), differing=differing
    )
