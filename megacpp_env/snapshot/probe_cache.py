"""The probe of the inspected interpreter, skipped while nothing it reads has changed.

The probe (``python_env.PROBE``) starts the inspected interpreter, which runs ``site`` (every
``.pth`` file) and lists the distributions ``importlib.metadata`` finds on ``sys.path``: on a warm
box the most expensive step every other collector waits for. Its answer depends only on the
interpreter, the environment variables it reads, the directories on its ``sys.path`` (a
distribution or ``.pth`` file added, removed or renamed changes the directory's mtime), the
``.pth`` files' contents, each distribution's ``METADATA`` and ``pyvenv.cfg``. A *stat signature*
of all of them (one ``stat`` each, no file read) is kept with the answer in the hash cache; while it
matches, the answer is reused. Any change (even a touch) probes again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from megacpp_env.fsutil import atomic_write_text
from megacpp_env.snapshot import python_env
from megacpp_env.snapshot.probe import Probe

# Variables that do not change what the probe sees (the shell's bookkeeping).
VOLATILE = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "TERM", "COLUMNS", "LINES", "SSH_TTY", "SSH_CONNECTION"})
FORMAT = 1
RACY_NS = 2_000_000_000  # a stat changed within 2 s of the probe: too recent to trust


def _stat(path: str) -> list[int] | None:
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino]


def _pth_files(directories: Iterable[str]) -> list[str]:
    out: list[str] = []
    for directory in directories:
        try:
            out += sorted(e.path for e in os.scandir(directory) if e.name.endswith(".pth"))
        except OSError:
            continue
    return out


def _user_site(data: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    version = str((data.get("markers") or {}).get("python_version", ""))
    base = environ.get("PYTHONUSERBASE") or str(Path(environ.get("HOME", "~")).expanduser() / ".local")
    return f"{base}/lib/python{version}/site-packages"


def signature(python: str, environ: Mapping[str, str], data: Mapping[str, Any]) -> tuple[str, int]:
    """What the probe's answer ``data`` depends on, as one digest of stats, and the newest mtime
    among them (a change in the same second as the probe may not show in its mtime: not cached)."""
    sys_path = [str(p) for p in data.get("sys_path", [])]
    dists = [str(d.get("path", "")) for d in data.get("distributions", [])]
    prefix = str(data.get("prefix", ""))
    parts: dict[str, Any] = {
        "format": FORMAT,
        "python": [python, _stat(python), _stat(os.path.realpath(python))],
        "env": sorted((k, v) for k, v in environ.items() if k not in VOLATILE),
        "dirs": [(p, _stat(p)) for p in sys_path],
        "pth": [(p, _stat(p)) for p in _pth_files(sys_path)],
        "metadata": [(d, _stat(f"{d}/METADATA") or _stat(f"{d}/PKG-INFO")) for d in dists],
        "cfg": _stat(f"{prefix}/pyvenv.cfg"),
        "user_site": _stat(_user_site(data, environ)),
    }
    text = json.dumps(parts, sort_keys=True)
    newest = max((n[0] for n in _stats(parts) if n), default=0)
    return hashlib.sha256(text.encode()).hexdigest(), newest


def _stats(parts: Mapping[str, Any]) -> Iterable[list[int] | None]:
    yield from parts["python"][1:]
    yield from (s for _p, s in parts["dirs"] + parts["pth"] + parts["metadata"])
    yield parts["cfg"]
    yield parts["user_site"]


def _cache_file(cache_dir: Path, python: str) -> Path:
    tag = hashlib.sha256(str(Path(python).absolute()).encode()).hexdigest()[:16]
    return cache_dir / f"probe-{tag}.json"


def _load(path: Path) -> tuple[str, dict[str, Any]] | None:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), dict) or not isinstance(raw.get("signature"), str):
        return None
    return raw["signature"], raw["data"]


def run_probe(python: str, environ: Mapping[str, str], cache_dir: Path | None) -> Probe:
    """The probe's answer: reused from the cache while its stat signature matches, else run."""
    if cache_dir is None:
        return python_env.run_probe(python, environ)
    path = _cache_file(cache_dir, python)
    cached = _load(path)
    if cached is not None and cached[0] == signature(python, environ, cached[1])[0]:
        return Probe(data=cached[1], seconds=0.0)
    started = time.time_ns()
    probe = python_env.run_probe(python, environ)
    digest, newest = signature(python, environ, probe.data)
    if newest < started - RACY_NS:
        with contextlib.suppress(OSError):  # an unwritable cache only costs the next snapshot a probe
            atomic_write_text(path, json.dumps({"signature": digest, "data": probe.data}, sort_keys=True))
    return probe
