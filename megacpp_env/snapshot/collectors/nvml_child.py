"""The NVML reader in a child interpreter, started when the snapshot's plan is launched.

Importing pynvml is most of an NVML read (~0.1 s of Python on the H200) and would hold the
snapshot's GIL, so it runs in a process of its own (``python -I -S``). The child imports pynvml
and the reader and initialises NVML at once, then waits for one stdin line naming the cache file
and its key (``{"cache_file": path or "", "key": hex or ""}``) and prints its reading: so
``plan.launch`` can start it before the verb imports its collectors, and the gpu collector hands it
the cache file it resolved. A child nobody took is killed and reaped (``reap``); one whose parent
dies sees EOF and exits without reading.

The child's ``sys.path`` is the directory megacpp-env itself was imported from, then this
process's ``sys.path``: an editable install is found through an import hook that ``-S`` never
runs, and the child must load this very megacpp-env. If it still cannot, it says so as the tool's
own failure (``tool_error``), never as a missing nvidia-ml-py.

Standard library only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# Prints {"raw": reading} or what the import or the read raised.
CHILD = r"""
import json, sys
from pathlib import Path
sys.path[:0] = json.loads(sys.argv[1])
failed = tool = None
try:
    import pynvml
except Exception as exc:
    failed = exc
try:
    from megacpp_env.snapshot.collectors import nvml
except Exception as exc:
    tool = exc
if failed is None and tool is None:
    try:
        pynvml.nvmlInit()  # early; nvml.read initialises again (counted) and raises what this raised
    except Exception:
        pass
line = sys.stdin.readline()
if not line:
    sys.exit(0)
if tool is not None:
    out = {"tool_error": "%s: %s" % (type(tool).__name__, tool)}
elif failed is not None:
    out = {"error_type": type(failed).__name__, "error": str(failed), "import_error": isinstance(failed, ImportError)}
else:
    try:
        ask = json.loads(line)
        cache = ask["cache_file"]
        key = bytes.fromhex(ask["key"]) if ask.get("key") else None
        out = {"raw": nvml.read(pynvml, Path(cache) if cache else None, key=key)}
    except Exception as exc:
        out = {"error_type": type(exc).__name__, "error": str(exc), "import_error": isinstance(exc, ImportError)}
sys.stdout.write(json.dumps(out))
"""


def child_path() -> list[str]:
    """The child's ``sys.path``: where this megacpp-env was imported from, then this process's."""
    import megacpp_env

    home = str(Path(megacpp_env.__file__).resolve().parent.parent)
    return [home, *(p for p in sys.path if p != home)]


def spawn() -> subprocess.Popen[str]:
    """A child waiting for its cache file; OSError if it cannot start."""
    return subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", CHILD, json.dumps(child_path())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    )


def spawn_quietly() -> subprocess.Popen[str] | None:
    """``spawn``, or None when it cannot start (the collector starts its own, and says why if that fails too)."""
    try:
        return spawn()
    except OSError:
        return None


def reap(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc`` if it still runs, and wait for it."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate()
