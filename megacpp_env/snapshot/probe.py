"""The probe of the inspected interpreter (``PROBE``, run in it by ``run_probe``) and ``Probe``, what
it printed, parsed. Its own module: ``snapshot.context`` (which every collector sees),
``collectors.python_env`` and the probe cache (``verify.probe_cache``) all need it.

A small stdlib-only program runs *in the inspected interpreter* (the active venv or ``--python``):
it says what the interpreter is (``sys.path``, the install scheme, the finders), then, when asked,
lists the distributions ``importlib.metadata`` sees there, in import order."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megacpp_env.errors import ToolError
from megacpp_env.snapshot.proc import dialogue


@dataclass(frozen=True, kw_only=True, slots=True)
class Probe:
    """What the probe printed, parsed."""

    data: Mapping[str, Any]
    seconds: float = 0.0
    reused: bool = False  # the distribution listing came from the probe cache (the interpreter still ran)
    notes: tuple[str, ...] = ()  # what the probe cache discarded

    @property
    def site_dirs(self) -> list[str]:
        seen: list[str] = []
        for p in (self.data.get("purelib"), self.data.get("platlib"), *self.data.get("sys_path", [])):
            if p and p not in seen and Path(p).is_dir():
                seen.append(str(p))
        return seen

    @property
    def scripts(self) -> str:
        return str(self.data.get("scripts") or "")


PROBE = r"""
import json, os, platform, sys, sysconfig
del sys.path[0]  # '' (the current directory) that -c puts first: not part of the environment
from importlib.machinery import PathFinder
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
    # finders that list distributions by code of their own (not sys.path's directories)
    "finders": sorted(
        "%s.%s" % (type(f).__module__, type(f).__qualname__)
        for f in sys.meta_path
        if getattr(f, "find_distributions", None) is not None and f is not PathFinder and type(f) is not PathFinder
        and not (isinstance(f, type) and issubclass(f, PathFinder))
    ),
}
rt = sys.modules.get("megacpp_env.runtime")
if rt is not None and "megacpp_env.runtime.hook" in sys.modules:  # the .pth hook ran at start-up
    try:
        out["runtime"] = rt.status()
    except Exception as exc:
        out["runtime"] = {"error": "%s: %s" % (type(exc).__name__, exc)}
sys.stdout.write(json.dumps(out) + "\n")
sys.stdout.flush()
if sys.stdin.readline().strip() != "list":  # the parent has the listing (unchanged since): done
    sys.exit(0)
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
listing = {"distributions": []}
try:
    from importlib import metadata
    for d in metadata.distributions():
        p = getattr(d, "_path", None)
        if p is not None:
            name, version = head(d)
            listing["distributions"].append({"name": name, "version": version, "path": os.path.abspath(str(p))})
except Exception as exc:
    listing["error"] = "importlib.metadata: %s" % exc
sys.stdout.write(json.dumps(listing))
"""
PROBE_TIMEOUT = 60.0


def run_probe(
    python: str, environ: Mapping[str, str], reuse: Callable[[Mapping[str, Any]], Any] | None = None
) -> Probe:
    """Start ``python`` (its ``site`` runs: every ``.pth`` file and what it imports, every time) and
    read what it says of itself; then its distribution listing, unless ``reuse(what it said)``
    returns one (the probe cache: ``verify.probe_cache``, which then says so in ``Probe.reused``)."""
    env = {k: v for k, v in environ.items() if k not in ("PYTHONHOME", "PYTHONSTARTUP")}
    start = time.perf_counter()
    box: list[Any] = []

    def reply(line: str) -> str:
        try:
            said = json.loads(line)
        except ValueError:
            return "list\n"
        box.append(said)
        found = reuse(said) if reuse is not None and isinstance(said, dict) else None
        box.append(found)
        return "list\n" if found is None else "skip\n"

    first, rest = dialogue([python, "-c", PROBE], reply, timeout=PROBE_TIMEOUT, env=env)
    if not box or not isinstance(box[0], dict):
        raise ToolError(f"{python}: the probe printed no JSON: {first.strip()[:200]}")
    data: dict[str, Any] = dict(box[0])
    reused = len(box) > 1 and box[1] is not None
    if reused:
        listing = box[1]
    else:
        try:
            listing = json.loads(rest)
        except ValueError:
            raise ToolError(f"{python}: the probe printed no listing: {rest.strip()[:200]}") from None
    data["distributions"] = list(listing.get("distributions") or []) if isinstance(listing, dict) else []
    if isinstance(listing, dict) and listing.get("error"):
        data["error"] = listing["error"]
    return Probe(data=data, seconds=round(time.perf_counter() - start, 3), reused=reused)
