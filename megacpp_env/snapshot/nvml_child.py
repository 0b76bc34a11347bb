"""The NVML reader in a child interpreter, started as early as the CLI knows it runs a snapshot.

Importing pynvml is most of an NVML read (~0.1 s of Python on the H200) and would hold the
snapshot's GIL, so it runs in a process of its own (``python -I -S`` with this ``sys.path``). The
child imports pynvml and the reader and initialises NVML at once, then waits for one stdin line
naming the cache file (``{"cache_file": path or ""}``) and prints its reading: so ``cli.main``
can start it before it parses arguments or imports the verb (``prestart``), and the gpu collector
hands it the cache file it resolved (``take``). A child nobody took is killed and reaped
(``discard``); one whose parent dies sees EOF and exits without reading.

Standard library only: ``cli.main`` imports this before anything else of the snapshot.
"""

from __future__ import annotations

import json
import subprocess
import sys

# Prints {"raw": reading} or what the import or the read raised.
CHILD = r"""
import json, sys
from pathlib import Path
sys.path[:0] = json.loads(sys.argv[1])
try:
    import pynvml
    from megacpp_env.snapshot import nvml
except Exception as exc:
    failed = exc
else:
    failed = None
    try:
        pynvml.nvmlInit()  # early; nvml.read initialises again (counted) and raises what this raised
    except Exception:
        pass
line = sys.stdin.readline()
if not line:
    sys.exit(0)
if failed is not None:
    out = {"error_type": type(failed).__name__, "error": str(failed), "import_error": isinstance(failed, ImportError)}
else:
    try:
        cache = json.loads(line)["cache_file"]
        out = {"raw": nvml.read(pynvml, Path(cache) if cache else None)}
    except Exception as exc:
        out = {"error_type": type(exc).__name__, "error": str(exc), "import_error": isinstance(exc, ImportError)}
sys.stdout.write(json.dumps(out))
"""

_early: list[tuple[subprocess.Popen[str], list[str]]] = []  # the child cli.main started, and its sys.path


def spawn() -> subprocess.Popen[str]:
    """A child for this process's ``sys.path``, waiting for its cache file; OSError if it cannot start."""
    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", CHILD, json.dumps(sys.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    )


def prestart() -> None:
    """Start the child now (``cli.main``, for a snapshot), unless pynvml is already imported here
    (a caller's or a test's stand-in is then used in this process)."""
    if _early or "pynvml" in sys.modules:
        return
    try:
        _early.append((spawn(), list(sys.path)))
    except OSError:
        return  # the collector starts its own, and says why if that fails too


def take() -> subprocess.Popen[str] | None:
    """The early child, once, if it is still running and was started for this ``sys.path``."""
    if not _early:
        return None
    proc, path = _early.pop()
    if proc.poll() is None and path == sys.path:
        return proc
    reap(proc)
    return None


def discard() -> None:
    """Kill and reap an early child that nobody took."""
    while _early:
        reap(_early.pop()[0])


def reap(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc`` if it still runs, and wait for it."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate()
