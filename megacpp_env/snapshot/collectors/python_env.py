"""The inspected Python environment: interpreter facts and every installed distribution.

A small stdlib-only probe runs *in the inspected interpreter* (the active venv or ``--python``) and
lists ``sys.path``, the install scheme and the distributions importlib.metadata sees there, in
import order. Everything else (INSTALLER, REQUESTED, ``direct_url.json``, RECORD integrity) is read
from the tool's own process, in parallel.
"""

# os.path on purpose in dist_facts: ~200 distributions, three files each, every snapshot.
# ruff: noqa: PTH110, PTH118, PTH119, PTH120

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.snapshot.probe import Probe  # kept importable from here
from megacpp_env.snapshot.scrub import Scrubber
from megacpp_env.snapshot.verify import early, integrity

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context
    from megacpp_env.snapshot.options import Cache

NAME_SEPARATORS = re.compile(r"[-_.]+")


def dist_key(name: str) -> str:
    """The PEP 503 normalized name: what ``packaging.utils.canonicalize_name`` returns (a test
    keeps them equal), without importing ``packaging.tags`` and ``sysconfig`` (~13 ms) on the
    critical path of every snapshot."""
    return NAME_SEPARATORS.sub("-", name).lower()


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _direct_url(dist_info: str, scrubber: Scrubber) -> dict[str, Any] | None:
    text = _read_text(os.path.join(dist_info, "direct_url.json"))
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return {"error": "direct_url.json is not JSON"}
    return scrubber.clean_tree(data) if isinstance(data, dict) else {"error": "direct_url.json is not an object"}


def dist_facts(entry: Mapping[str, Any], scrubber: Scrubber) -> dict[str, Any]:
    """What a distribution's dist-info says beside its METADATA (os.path: ~200 of them per snapshot)."""
    dist_info = str(entry["path"])
    installer = _read_text(os.path.join(dist_info, "INSTALLER"))
    return {
        "name": entry["name"],
        "version": entry["version"],
        "location": os.path.dirname(dist_info),
        "metadata_dir": os.path.basename(dist_info),
        "installer": installer.strip() if installer else "",
        "requested": os.path.exists(os.path.join(dist_info, "REQUESTED")),
        "direct_url": _direct_url(dist_info, scrubber),
    }


@dataclass(frozen=True, kw_only=True, slots=True)
class PythonResult:
    facts: dict[str, Any]
    stats: dict[str, int]
    owner_of: Callable[[str], str | None]  # installed path -> dist key (for torch's loaded libraries)
    probe_seconds: float
    notes: tuple[str, ...] = ()  # the integrity caches discarded (``live.cache``)


def _split_shadowed(probe: Probe) -> tuple[dict[str, Mapping[str, Any]], dict[str, list[dict[str, str]]]]:
    active: dict[str, Mapping[str, Any]] = {}
    shadowed: dict[str, list[dict[str, str]]] = {}
    for entry in probe.data.get("distributions", []):
        key = dist_key(entry["name"]) if entry["name"] else Path(entry["path"]).name
        if key in active:
            where = str(Path(entry["path"]).parent)
            shadowed.setdefault(key, []).append({"version": entry["version"], "location": where})
        else:
            active[key] = entry
    return active, shadowed


def _verified(
    paths: dict[str, str], speculative: integrity.Verified | None, cache: Cache | None, workers: int
) -> integrity.Verified:
    """Reuse the speculative run for every active dist it covered; verify the rest now."""
    missing = [(p, p) for p in paths if speculative is None or p not in speculative.attempted]
    verified = speculative
    records, key = (cache.records, cache.key) if cache else (None, None)
    if missing or verified is None:  # an environment with no distribution at all: nothing to verify
        extra = integrity.verify(missing, cache_dir=records, key=key, workers=workers)
        verified = extra if verified is None else verified.merged(extra)
    assert verified is not None
    integrity.prune_cache(records, verified.group_ids)
    return verified.restricted(set(paths))


def collect(
    probe: Probe,
    scrubber: Scrubber,
    *,
    cache: Cache | None,
    workers: int,
    speculative: Callable[[], integrity.Verified | None] = lambda: None,
) -> PythonResult:
    """``speculative`` is asked for only after the cheap facts are read (while its workers run)."""
    active, shadowed = _split_shadowed(probe)
    dists = {k: dist_facts(e, scrubber) for k, e in active.items()}
    paths = {str(e["path"]): k for k, e in active.items()}
    verified = _verified(paths, speculative(), cache, workers)
    sha = verified.record_sha256
    for path, key in paths.items():
        dists[key]["integrity"] = verified.reports.get(path) or {"status": "no RECORD"}
        if path in sha:
            dists[key]["record_sha256"] = sha[path]
    interpreter = {k: v for k, v in probe.data.items() if k not in ("distributions", "runtime", "finders")}
    if probe.data.get("finders"):  # only when some: an ordinary interpreter's facts are unchanged
        interpreter["finders"] = probe.data["finders"]
    facts = {
        "interpreter": scrubber.clean_tree(interpreter),
        "distributions": dict(sorted(dists.items())),
        "shadowed": dict(sorted(shadowed.items())),
        "unowned_site_files": integrity.unowned(verified.records),
    }
    return PythonResult(
        facts=facts,
        stats=verified.stats,
        probe_seconds=probe.seconds,
        owner_of=lambda p: paths.get(verified.owner_of(p) or ""),
        notes=verified.notes,
    )


def start(ctx: Context) -> Callable[[], PythonResult]:
    """Verification started on the venv's own site-packages when the plan was launched
    (``early.Run``), while the probe runs; the collector takes it (or starts one) and checks what
    the probe found against what was verified."""
    plan = ctx.plan
    run = ctx.started.take_run() or early.Run(python=plan.python, cache=plan.cache, workers=plan.workers).start()

    def speculated() -> integrity.Verified | None:
        try:
            return run.result()
        except Exception:  # verified again below, all of it, and any error then is the collector's
            return None

    def job() -> PythonResult:
        result = None
        try:
            run.launched.wait()
            ctx.verifying.set()
            result = collect(ctx.probe.result(), ctx.scrubber, cache=plan.cache, workers=plan.workers,
                             speculative=speculated)  # fmt: skip
            return result
        finally:
            ctx.python_result.put(result)  # for the compilers' cache of a script's answer

    return job
