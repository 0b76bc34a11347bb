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
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.errors import ToolError
from megacpp_env.snapshot import early, integrity
from megacpp_env.snapshot.probe import Probe  # kept importable from here
from megacpp_env.snapshot.proc import run_program
from megacpp_env.snapshot.scrub import Scrubber

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context

PROBE = r"""
import json, os, platform, sys, sysconfig
del sys.path[0]  # '' (the current directory) that -c puts first: not part of the environment
out = {
    "executable": sys.executable,
    "version": platform.python_version(),
    "implementation": platform.python_implementation(),
    "prefix": sys.prefix,
    "base_prefix": getattr(sys, "base_prefix", sys.prefix),
    "sys_path": [p for p in sys.path if p],
    "purelib": sysconfig.get_path("purelib"),
    "platlib": sysconfig.get_path("platlib"),
    "scripts": sysconfig.get_path("scripts"),
    "markers": {
        "implementation_name": sys.implementation.name,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_python_implementation": platform.python_implementation(),
        "platform_system": platform.system(),
        "python_full_version": platform.python_version(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    },
    "distributions": [],
}
def head(d):
    text = d.read_text("METADATA") or d.read_text("PKG-INFO") or ""
    name = version = ""
    for line in text.splitlines():
        if not line.strip():
            break
        if line.startswith("Name:") and not name:
            name = line[5:].strip()
        elif line.startswith("Version:") and not version:
            version = line[8:].strip()
    return name, version
try:
    from importlib import metadata
    for d in metadata.distributions():
        p = getattr(d, "_path", None)
        if p is not None:
            name, version = head(d)
            out["distributions"].append({"name": name, "version": version, "path": os.path.abspath(str(p))})
except Exception as exc:
    out["error"] = "importlib.metadata: %s" % exc
rt = sys.modules.get("megacpp_env.runtime")
if rt is not None and "megacpp_env.runtime.hook" in sys.modules:  # the .pth hook ran at start-up
    try:
        out["runtime"] = rt.status()
    except Exception as exc:
        out["runtime"] = {"error": "%s: %s" % (type(exc).__name__, exc)}
sys.stdout.write(json.dumps(out))
"""
PROBE_TIMEOUT = 60.0


def run_probe(python: str, environ: Mapping[str, str]) -> Probe:
    env = {k: v for k, v in environ.items() if k not in ("PYTHONHOME", "PYTHONSTARTUP")}
    start = time.perf_counter()
    result = run_program([python, "-c", PROBE], timeout=PROBE_TIMEOUT, env=env)
    try:
        return Probe(data=json.loads(result.stdout), seconds=round(time.perf_counter() - start, 3))
    except ValueError:
        raise ToolError(f"{python}: the probe printed no JSON: {result.first_line[:200]}") from None


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
    paths: dict[str, str], speculative: integrity.Verified | None, cache_dir: Path | None, workers: int
) -> integrity.Verified:
    """Reuse the speculative run for every active dist it covered; verify the rest now."""
    missing = [(p, p) for p in paths if speculative is None or p not in speculative.attempted]
    verified = speculative
    if missing:
        extra = integrity.verify(missing, cache_dir=cache_dir, workers=workers)
        verified = extra if verified is None else verified.merged(extra)
    assert verified is not None
    integrity.prune_cache(cache_dir, verified.group_ids)
    return verified.restricted(set(paths))


def collect(
    probe: Probe,
    scrubber: Scrubber,
    *,
    python: str,
    cache_dir: Path | None,
    workers: int,
    speculative: Callable[[], integrity.Verified | None] = lambda: None,
) -> PythonResult:
    """``speculative`` is asked for only after the cheap facts are read (while its workers run)."""
    active, shadowed = _split_shadowed(probe)
    dists = {k: dist_facts(e, scrubber) for k, e in active.items()}
    paths = {str(e["path"]): k for k, e in active.items()}
    verified = _verified(paths, speculative(), early.cache_dir_for(cache_dir, python), workers)
    sha = verified.record_sha256
    for path, key in paths.items():
        dists[key]["integrity"] = verified.reports.get(path) or {"status": "no RECORD"}
        if path in sha:
            dists[key]["record_sha256"] = sha[path]
    interpreter = {k: v for k, v in probe.data.items() if k not in ("distributions", "runtime")}
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
    )


def start(ctx: Context) -> Callable[[], PythonResult]:
    """Verification starts at once on the venv's own site-packages (``early.Run``), while the probe
    runs, unless the snapshot verb started it already for the same interpreter (``early.take``);
    the collector then checks what the probe found against what was verified."""
    key = early.Key(python=ctx.python, cache_dir=ctx.cache_dir, workers=ctx.opts.workers or early.default_workers())
    run = early.take(key) or early.Run(key).start()

    def speculated() -> integrity.Verified | None:
        try:
            return run.result()
        except Exception:  # verified again below, all of it, and any error then is the collector's
            return None

    def job() -> PythonResult:
        run.launched.wait()
        ctx.launched.set()
        return collect(
            ctx.probe.result(),
            ctx.scrubber,
            python=ctx.python,
            cache_dir=ctx.cache_dir,
            workers=key.workers,
            speculative=speculated,
        )

    return job
