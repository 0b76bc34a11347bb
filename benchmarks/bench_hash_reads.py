"""How fast sha256 runs over the inspected environment's RECORD files, by read size and by mmap:
the largest file alone (one core: the critical path of a full snapshot) and all of them on every
core (the hash floor's way: processes, largest first to the least loaded), plus what starting
interpreters and forks costs. The numbers behind ``integrity_worker.CHUNK`` (docs/BENCHMARKS.md,
"Issue 20, round 4").

    python benchmarks/bench_hash_reads.py      # from the repository root; prints JSON

Inspects the interpreter that runs it (its importlib.metadata distributions). A floor entry is
[wall s, slowest process s], the median of three. The pynvml rows time nvidia-ml-py's import and
init in a fresh interpreter (they fail, and say so, where it is not installed).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import resource
import ssl
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

_BUFFERS: dict[int, bytearray] = {}


def record_files() -> list[tuple[str, int]]:
    """Every hashed RECORD file of this interpreter's distributions, largest first."""
    seen: dict[str, int] = {}
    for dist in metadata.distributions():
        for f in dist.files or ():
            if not f.hash:
                continue
            path = os.path.realpath(dist.locate_file(f))
            if path not in seen and os.path.isfile(path):
                seen[path] = os.stat(path).st_size
    return sorted(seen.items(), key=lambda t: -t[1])


def hash_read(path: str, chunk: int) -> bytes:
    """sha256 in reads of ``chunk`` bytes into one buffer per process and size."""
    h = hashlib.sha256()
    if chunk not in _BUFFERS:  # once: a fresh 16 MiB buffer per file would be zero-filled each time
        _BUFFERS[chunk] = bytearray(chunk)
    buf = _BUFFERS[chunk]
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as fh:
        while n := fh.readinto(buf):
            h.update(view[:n])
    return h.digest()


def hash_mmap(path: str, chunk: int = 0) -> bytes:
    """sha256 of a mapping of the file (whole, or ``chunk`` bytes per update); files under 1 MiB read."""
    h = hashlib.sha256()
    with open(path, "rb", buffering=0) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < (1 << 20):
            h.update(fh.read())
            return h.digest()
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
            if chunk:
                view = memoryview(m)
                for i in range(0, size, chunk):
                    h.update(view[i : i + chunk])
                view.release()
            else:
                h.update(m)
    return h.digest()


def _shard(args: tuple[str, int, list[str]]) -> float:
    method, chunk, paths = args
    start = time.perf_counter()
    for path in paths:
        if method == "mmap":
            hash_mmap(path, chunk)
        else:
            hash_read(path, chunk)
    return time.perf_counter() - start


def floor(files: list[tuple[str, int]], procs: int, method: str, chunk: int) -> tuple[float, float]:
    """Every file hashed on ``procs`` processes: (wall, slowest process), pool start included."""
    shards: list[list[str]] = [[] for _ in range(procs)]
    load = [0] * procs
    for path, size in files:
        i = load.index(min(load))
        shards[i].append(path)
        load[i] += size + 4096
    start = time.perf_counter()
    with ProcessPoolExecutor(procs) as pool:
        each = list(pool.map(_shard, [(method, chunk, s) for s in shards]))
    return round(time.perf_counter() - start, 3), round(max(each), 3)


def _median_run(argv: list[str], times: int = 5) -> float:
    runs = []
    for _ in range(times):
        start = time.perf_counter()
        subprocess.run(argv, check=False, capture_output=True)
        runs.append(time.perf_counter() - start)
    return round(sorted(runs)[times // 2], 4)


def main() -> int:
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines()
    flags = next((line for line in cpuinfo if line.startswith("flags")), "")
    files = record_files()
    out: dict[str, Any] = {
        "cpu": next((line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")), ""),
        "sha_ni": " sha_ni " in flags,
        "openssl": ssl.OPENSSL_VERSION,
        "cpus": len(os.sched_getaffinity(0)),
        "files": len(files),
        "bytes": sum(s for _p, s in files),
        "largest_bytes": [s for _p, s in files[:3]],
    }
    for path, _size in files:  # warm: every file in the page cache
        hash_mmap(path)
    buf = os.urandom(256 << 20)
    start = time.perf_counter()
    hashlib.sha256(buf).digest()
    out["sha256_in_memory_GBps"] = round(0.256 * 1.048576 / (time.perf_counter() - start), 2)
    del buf
    largest = files[0][0]
    ways = {
        "read16M": lambda: hash_read(largest, 16 << 20),
        "read1M": lambda: hash_read(largest, 1 << 20),
        "read256K": lambda: hash_read(largest, 256 << 10),
        "mmap": lambda: hash_mmap(largest),
        "mmap1M": lambda: hash_mmap(largest, 1 << 20),
    }
    for name, way in ways.items():
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            way()
            runs.append(time.perf_counter() - start)
        out[f"largest_{name}"] = round(min(runs), 3)
    cpus = out["cpus"]
    for procs in (cpus, max(1, cpus * 3 // 4), cpus * 3 // 2):
        for method, chunk in (
            ("read", 16 << 20),
            ("read", 1 << 20),
            ("read", 256 << 10),
            ("mmap", 0),
            ("mmap", 1 << 20),
        ):
            if procs != cpus and (method, chunk) not in (("read", 16 << 20), ("mmap", 0)):
                continue
            runs = sorted(floor(files, procs, method, chunk) for _ in range(3))
            out[f"floor_{procs}_{method}_{chunk >> 10}K"] = runs[1]
    for argv in (
        [sys.executable, "-c", "pass"],
        [sys.executable, "-I", "-S", "-c", "pass"],
        [sys.executable, "-I", "-S", "-c", "import json,marshal,hashlib,concurrent.futures"],
    ):
        out["start " + " ".join(argv[1:])] = _median_run(argv)
    start = time.perf_counter()
    children = [subprocess.Popen([sys.executable, "-I", "-S", "-c", "pass"]) for _ in range(cpus)]
    out["spawn_launched"] = round(time.perf_counter() - start, 4)
    for child in children:
        child.wait()
    out["spawn_done"] = round(time.perf_counter() - start, 4)
    sys.path.insert(0, str(Path.cwd()))
    import megacpp_env.cli  # noqa: F401  # a parent the size of the tool's

    out["rss_MB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    start = time.perf_counter()
    pids = []
    for _ in range(cpus):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        pids.append(pid)
    out["fork_launched"] = round(time.perf_counter() - start, 4)
    for pid in pids:
        os.waitpid(pid, 0)
    out["fork_done"] = round(time.perf_counter() - start, 4)
    for code in (
        "import pynvml",
        "import pynvml; pynvml.nvmlInit()",
        "import pynvml; pynvml.nvmlInit(); h=pynvml.nvmlDeviceGetHandleByIndex(0); "
        "pynvml.nvmlDeviceGetPowerManagementLimit(h); pynvml.nvmlDeviceGetMemoryInfo(h)",
    ):
        out["python -c " + code[:40]] = _median_run([sys.executable, "-c", code])
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
