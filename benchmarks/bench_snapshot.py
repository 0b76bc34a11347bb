"""Benchmark `megacpp-env snapshot` against `python -m torch.utils.collect_env`, `pip inspect` and
the physical floors, all measured in the same run.

Per round (``--rounds``, default 5; the table shows medians), each command a subprocess end to end:

- ``snapshot_full``: an empty hash cache (every RECORD entry of every distribution hashed);
- ``snapshot_repeat``: the same again with the warm cache;
- ``baseline_full`` / ``baseline_repeat`` with ``--baseline DIR`` (another megacpp_env tree, the
  "before" of a change, timed in the same rounds on the same files);
- ``collect_env`` (when torch is importable in the inspected interpreter), ``pip_inspect``;
- the floors: ``bare_start`` (``python -c pass`` with the tool's interpreter), ``stat_floor`` (one
  ``os.stat`` of every RECORD file, one thread, warm), ``hash_floor`` (sha256 of the same files on
  every usable core, 16 MiB reads, largest files first, worker start included) and ``hash_floor_256k``
  (the same in 256 KiB reads, as the tool reads: each read hashed while in the core's L2 cache).

The tool trees are byte-compiled first (as ``pip install`` leaves an installed tool).
``--cold`` first drops the page cache (``sync; echo 3 > /proc/sys/vm/drop_caches``, root only) before
a full snapshot and again before collect_env, and records their time and the bytes each read from
disk (``ru_inblock`` x 512 of the process and the children it waited for: the kernel's
``read_bytes`` I/O accounting). Where the drop is refused that is said, and the numbers are those
of the first run. After the cold runs every recorded file is read once, untimed, so the rounds
measure a warm page cache (the first round would otherwise re-read what the drops evicted). ``--importtime`` adds the top imports of one repeat (``python -X importtime``).

    python benchmarks/bench_snapshot.py [--python PATH] [--rounds 5] [--cold] [--importtime]
        [--baseline DIR] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CHUNK = 16 << 20
LIST_FILES = r"""
import json, os, sys
from importlib import metadata
seen = set()
for dist in metadata.distributions():
    for f in dist.files or ():
        if not f.hash:  # RECORD rows without a hash (the RECORD itself, .pyc) are not verified
            continue
        p = os.path.realpath(dist.locate_file(f))
        if p not in seen and os.path.isfile(p):
            seen.add(p)
json.dump(sorted(seen), sys.stdout)
"""


def timed(argv: list[str], env: dict[str, str], cwd: Path = REPO) -> dict[str, Any]:
    """Wall seconds and exit status of one command."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
    wall = time.perf_counter() - start
    return {
        "s": round(wall, 3),
        "rc": proc.returncode,
        "tail": (proc.stderr or proc.stdout).decode(errors="replace")[-300:],
    }


def run_measured(argv: list[str], env: dict[str, str], cwd: Path = REPO) -> dict[str, Any]:
    """Like ``timed``, with the bytes the command (and its waited-for children) read from disk."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = timed(argv, env, cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result["read_bytes"] = (after.ru_inblock - before.ru_inblock) * 512
    result["cpu_s"] = round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 3)
    return result


def has_module(python: str, module: str) -> bool:
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", code], check=False, capture_output=True).returncode == 0


def record_files(python: str) -> list[tuple[str, int]]:
    paths = json.loads(subprocess.run([python, "-I", "-c", LIST_FILES], check=True, capture_output=True).stdout)
    out = []
    for p in paths:
        try:
            out.append((p, os.stat(p).st_size))
        except OSError:
            continue
    return out


def _hash_shard(paths: list[str], chunk: int = CHUNK) -> int:
    buf = bytearray(chunk)
    view = memoryview(buf)
    total = 0
    for p in paths:
        h = hashlib.sha256()
        with open(p, "rb", buffering=0) as fh:
            while n := fh.readinto(buf):
                h.update(view[:n])
                total += n
        h.hexdigest()
    return total


def hash_floor(files: list[tuple[str, int]], cpus: int, chunk: int = CHUNK) -> float:
    """sha256 of every file on ``cpus`` processes, largest first, dealt to the least loaded shard,
    in reads of ``chunk`` bytes."""
    shards: list[list[str]] = [[] for _ in range(cpus)]
    load = [0] * cpus
    for path, size in sorted(files, key=lambda f: -f[1]):
        i = load.index(min(load))
        shards[i].append(path)
        load[i] += size + 4096
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=cpus) as pool:
        sum(pool.map(_hash_shard, shards, [chunk] * len(shards)))
    return round(time.perf_counter() - start, 3)


def stat_floor(files: list[tuple[str, int]]) -> float:
    start = time.perf_counter()
    for path, _size in files:
        os.stat(path)
    return round(time.perf_counter() - start, 3)


def drop_caches() -> str:
    """'' when the page cache was dropped, else why not."""
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as exc:
        return f"page cache not dropped: {exc}"
    return ""


class Bench:
    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args, self.tmp = args, tmp
        self.env = {**os.environ}
        self.env.pop("PYTHONPATH", None)
        self.torch = has_module(args.python, "torch")
        self.pip = has_module(args.python, "pip")
        self.files = record_files(args.python)
        self.cpus = len(os.sched_getaffinity(0))
        # bytecode as an installed tool has it (pip compiles on install; PYTHONDONTWRITEBYTECODE
        # would otherwise make every run compile the package from source)
        for tool in (REPO, *([args.baseline] if args.baseline else [])):
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(tool / "megacpp_env")], check=True)

    def snap_argv(self, out: Path, *extra: str) -> list[str]:
        return [sys.executable, *extra, "-m", "megacpp_env", "snapshot", "--python", self.args.python, "-o", str(out)]

    def tool_env(self, tool: Path, cache: Path) -> dict[str, str]:
        path = os.pathsep.join([str(tool), str(REPO / "vendor")])  # vendor: carried dependencies, if any
        return {**self.env, "PYTHONPATH": path, "MEGACPP_ENV_CACHE_DIR": str(cache)}

    def snapshot_pair(self, name: str, tool: Path, i: int) -> dict[str, Any]:
        cache, out = self.tmp / f"cache-{name}-{i}", self.tmp / f"{name}.json"
        env = self.tool_env(tool, cache)
        full = run_measured(self.snap_argv(out), env, self.tmp)
        full_doc = json.loads(out.read_text()) if out.is_file() else {}
        repeat = run_measured(self.snap_argv(out), env, self.tmp)
        repeat_doc = json.loads(out.read_text()) if out.is_file() else {}
        return {
            f"{name}_full": full,
            f"{name}_repeat": repeat,
            "_docs": {f"{name}_full": full_doc.get("timing", {}), f"{name}_repeat": repeat_doc.get("timing", {})},
            "_doc": repeat_doc,
        }

    def round(self, i: int) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        res: dict[str, Any] = {}
        docs: dict[str, Any] = {}
        doc: dict[str, Any] = {}
        tools = [("snapshot", REPO)] + ([("baseline", self.args.baseline)] if self.args.baseline else [])
        for name, tool in tools:
            pair = self.snapshot_pair(name, tool, i)
            docs.update(pair.pop("_docs"))
            latest = pair.pop("_doc")
            doc = latest if name == "snapshot" else doc
            res.update(pair)
        if self.torch:
            res["collect_env"] = run_measured([self.args.python, "-m", "torch.utils.collect_env"], self.env, self.tmp)
        if self.pip:
            argv = [self.args.python, "-m", "pip", "inspect", "--disable-pip-version-check"]
            res["pip_inspect"] = run_measured(argv, self.env, self.tmp)
        res["bare_start"] = run_measured([sys.executable, "-c", "pass"], self.env, self.tmp)
        res["stat_floor"] = {"s": stat_floor(self.files)}
        res["hash_floor"] = {"s": hash_floor(self.files, self.cpus)}
        # the same in 256 KiB reads, the tool's own (each read hashed while in the core's L2)
        res["hash_floor_256k"] = {"s": hash_floor(self.files, self.cpus, 256 << 10)}
        for name, r in res.items():
            if r.get("rc", 0) != 0:
                print(f"warning: round {i}: {name} exited {r['rc']}: {r.get('tail')}", file=sys.stderr)
        return res, docs, doc

    def cold(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        why = drop_caches()
        out["dropped"] = not why
        if why:
            out["note"] = why + " (numbers are the first run's)"
        env = self.tool_env(REPO, self.tmp / "cache-cold")
        out["snapshot_full"] = run_measured(self.snap_argv(self.tmp / "cold.json"), env, self.tmp)
        doc = json.loads((self.tmp / "cold.json").read_text()) if (self.tmp / "cold.json").is_file() else {}
        out["snapshot_full_timing"] = doc.get("timing", {})
        if self.torch:
            drop_caches()
            out["collect_env"] = run_measured([self.args.python, "-m", "torch.utils.collect_env"], self.env, self.tmp)
        out["record_bytes"] = sum(size for _p, size in self.files)
        return out

    def importtime(self) -> list[tuple[str, int]]:
        env = self.tool_env(REPO, self.tmp / "cache-snapshot-0")
        proc = subprocess.run(
            self.snap_argv(self.tmp / "imp.json", "-X", "importtime"),
            env=env,
            cwd=self.tmp,
            capture_output=True,
            text=True,
            check=False,
        )
        tops: dict[str, int] = {}
        for line in proc.stderr.splitlines():
            if line.startswith("import time:") and "|" in line:
                _self, cumulative, name = line[len("import time:") :].split("|")
                if cumulative.strip().isdigit() and not name.startswith("  "):  # top-level imports only
                    tops[name.strip()] = int(cumulative)
        return sorted(tops.items(), key=lambda t: -t[1])[:15]


def nvml_check(tmp: Path) -> dict[str, Any]:
    """NVML read in a child interpreter (the collector's way), then in this process without the
    fixed-facts cache and twice with it (miss, hit): the facts must agree all four ways."""
    sys.path[:0] = [str(REPO), str(REPO / "vendor")]
    from megacpp_env.snapshot.collectors import gpu

    out: dict[str, Any] = {}
    facts = []
    reads: list[tuple[str, Any]] = [("apart", lambda: gpu.read_apart(None))]
    from megacpp_env.snapshot.options import Cache

    sealed = Cache(root=tmp / "nvml", key=os.urandom(32), records=tmp / "nvml" / "records")
    reads += [
        (name, lambda c=cache: gpu.read_nvml(c))
        for name, cache in (("uncached", None), ("miss", sealed), ("hit", sealed))
    ]
    for name, read in reads:
        start = time.perf_counter()
        try:
            if name == "uncached":
                import pynvml  # noqa: F401  # in-process from here on (read_nvml reads here once imported)
            parts = gpu.finish(read())
        except Exception as exc:
            return {**out, "error": f"{name}: {type(exc).__name__}: {exc}"}
        out[f"{name}_s"] = round(time.perf_counter() - start, 3)
        facts.append(parts.facts)
    out["facts_equal"] = all(f == facts[0] for f in facts)
    out["gpus"] = len(facts[0].get("devices", []))
    return out


def median_of(rounds: list[dict[str, Any]], name: str) -> float:
    return round(statistics.median(r[name]["s"] for r in rounds), 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_python = (
        str(Path(os.environ["VIRTUAL_ENV"]) / "bin" / "python") if os.environ.get("VIRTUAL_ENV") else sys.executable
    )
    parser.add_argument("--python", default=default_python, help="the interpreter to inspect")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cold", action="store_true", help="drop the page cache first (root) and time a cold run")
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--nvml-check", action="store_true", help="compare NVML facts with and without the cache")
    parser.add_argument("--baseline", type=Path, help="another megacpp_env tree to time in the same rounds")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-snapshot-") as tmp:
        bench = Bench(args, Path(tmp))
        cold = bench.cold() if args.cold else None
        if cold is not None:  # the rounds are warm: read every file once (untimed) after the drops
            hash_floor(bench.files, bench.cpus)
        rounds, docs, doc = [], [], {}
        for i in range(args.rounds):
            res, d, doc = bench.round(i)
            rounds.append(res)
            docs.append(d)
        imports = bench.importtime() if args.importtime else None
        nvml = nvml_check(Path(tmp)) if args.nvml_check else None
    names = list(rounds[0])
    median = {n: median_of(rounds, n) for n in names}
    integrity = doc.get("timing", {}).get("integrity", {})
    result: dict[str, Any] = {
        "machine": {
            "cpus": bench.cpus,
            "platform": platform.platform(),
            "python": args.python,
            "tool_python": sys.version.split()[0],
            "cpu_model": doc.get("facts", {}).get("system", {}).get("cpu_model"),
            "gpus": [g.get("name") for g in doc.get("facts", {}).get("gpu", {}).get("devices", [])],
        },
        "environment": {
            "distributions": len(doc.get("facts", {}).get("python", {}).get("distributions", [])),
            "record_files": len(bench.files),
            "record_bytes": sum(size for _p, size in bench.files),
            "cache_hits_last_repeat": integrity.get("cache_hits"),
        },
        "median_s": median,
        "rounds": [{n: r[n]["s"] for n in names} for r in rounds],
        "read_bytes_last_round": {n: r.get("read_bytes") for n, r in rounds[-1].items() if "read_bytes" in r},
        "timing_last_round": docs[-1],
        "cold": cold,
        "imports": imports,
        "nvml_check": nvml,
    }
    floor_repeat = median["stat_floor"] + median["bare_start"]
    ratios = {
        "full/hash_floor": median["snapshot_full"] / median["hash_floor"],
        "full/hash_floor_256k": median["snapshot_full"] / median["hash_floor_256k"],
        "repeat/(stat_floor+bare_start)": median["snapshot_repeat"] / floor_repeat,
    }
    if "collect_env" in median:
        ratios["full/collect_env"] = median["snapshot_full"] / median["collect_env"]
        ratios["repeat/collect_env"] = median["snapshot_repeat"] / median["collect_env"]
    if "pip_inspect" in median:
        ratios["repeat/pip_inspect"] = median["snapshot_repeat"] / median["pip_inspect"]
    if args.baseline:
        ratios["full/baseline_full"] = median["snapshot_full"] / median["baseline_full"]
        ratios["repeat/baseline_repeat"] = median["snapshot_repeat"] / median["baseline_repeat"]
    result["ratios"] = {k: round(v, 3) for k, v in ratios.items()}
    print(f"{'command':<18}{'median s':>10}   rounds")
    for n in names:
        each = ", ".join(f"{r[n]['s']:.3f}" for r in rounds)
        print(f"{n:<18}{median[n]:>10.3f}   {each}")
    print(json.dumps(result, indent=2))
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
