"""Lock speed: `lock check` and `gate` (offline, whole CLI), and `lock` of every locally resolvable
target against the equivalent raw `uv pip compile` runs.

    python benchmarks/bench_lock.py [--repeat 10] [--lock-repeat 5]

* `lock check` / `gate --base HEAD`: wall time of `python -m megacpp_env ...` on this repository
  (interpreter start-up included; `python -c pass` is reported for reference). Bound: < 0.5 s.
* `lock`: `megacpp-env lock resolve` of every target whose indexes are reachable here, on a copy of
  stack.yaml in a temp dir, versus the very same uv command lines (same generated pyproject.toml,
  same flags) run directly, also in parallel (one process per lock, as `lock` does). Both with uv's
  cache warm; runs alternate so network drift hits both. Measured twice: against PyPI (uv revalidates
  its cache over the network) and with UV_OFFLINE=1 (cache only: the tool's own overhead, without
  network jitter). Bound: lock <= 1.2 x raw.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def wall(argv: list[str], *, cwd: Path = ROOT, env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, capture_output=True, check=False, env=env)
    return time.perf_counter() - start


def stats(samples: list[float]) -> dict[str, float]:
    return {"min": min(samples), "median": statistics.median(samples), "max": max(samples), "n": len(samples)}


def bench_cli(argv: list[str], repeat: int) -> dict[str, float]:
    wall(argv)  # warm the page cache
    return stats([wall(argv) for _ in range(repeat)])


def raw_jobs(spec_path: Path, work: Path) -> list[tuple[Path, list[str]]]:
    """(workdir, uv argv) for every resolvable lock: what `lock` would run, minus megacpp-env."""
    from megacpp_env import uv
    from megacpp_env.lock.resolve import FRESH, _request, input_project
    from megacpp_env.lock.state import jobs_for
    from megacpp_env.spec import load_spec

    jobs = []
    for job in jobs_for(load_spec(spec_path)):
        if job.unreachable:
            continue
        d = work / f"{job.inputs.target}-{job.inputs.platform.replace('/', '-')}"
        d.mkdir(parents=True)
        (d / "pyproject.toml").write_text(input_project(job.inputs))
        jobs.append((d, [uv.uv_executable(), *uv.compile_args(_request(job.inputs, d, None, FRESH))]))
    return jobs


def raw_parallel(jobs: list[tuple[Path, list[str]]], extra_env: dict[str, str]) -> float:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", **extra_env}
    start = time.perf_counter()
    procs = [
        subprocess.Popen(argv, cwd=d, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for d, argv in jobs
    ]
    for p in procs:
        p.wait()
    return time.perf_counter() - start


def bench_lock(repeat: int, extra_env: dict[str, str]) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="bench-lock-") as tmp:
        work = Path(tmp)
        shutil.copy(ROOT / "stack.yaml", work / "stack.yaml")
        jobs = raw_jobs(work / "stack.yaml", work / "raw")
        tool_argv = [sys.executable, "-m", "megacpp_env", "lock", "resolve", "--spec", str(work / "stack.yaml")]
        env = {**os.environ, "PYTHONPATH": str(ROOT), **extra_env}
        raw_parallel(jobs, {})
        wall(tool_argv, env={**env, "UV_OFFLINE": ""})  # warm uv's cache for both
        tool, raw = [], []
        for i in range(repeat):
            order = (0, 1) if i % 2 == 0 else (1, 0)
            for which in order:
                if which == 0:
                    tool.append(wall(tool_argv, env=env))
                else:
                    raw.append(raw_parallel(jobs, extra_env))
        ratio = statistics.median(tool) / statistics.median(raw)
        return {"locks": len(jobs), "tool": stats(tool), "raw": stats(raw), "ratio_median": ratio}


def bench_gate_changed(repeat: int) -> dict[str, float]:
    """gate on a repository whose base commit has the locks and whose working tree changes one."""
    with tempfile.TemporaryDirectory(prefix="bench-gate-") as tmp:
        repo = Path(tmp)
        shutil.copy(ROOT / "stack.yaml", repo / "stack.yaml")
        shutil.copytree(ROOT / "locks", repo / "locks")
        git = ["git", "-c", "user.name=b", "-c", "user.email=b@example.invalid", "-c", "commit.gpgsign=false"]
        for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "base"]):
            subprocess.run([*git, *args], cwd=repo, check=True, capture_output=True)
        lock = repo / "locks" / "pylock.smoke-linux-amd64.toml"
        lock.write_text(lock.read_text().replace('version = "1.17.0"', 'version = "1.16.0"'))
        argv = [sys.executable, "-m", "megacpp_env", "gate", "--base", "main", "--spec", str(repo / "stack.yaml")]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        wall(argv, env=env)
        return stats([wall(argv, env=env) for _ in range(repeat)])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--lock-repeat", type=int, default=5)
    ns = ap.parse_args()
    py = [sys.executable, "-m", "megacpp_env"]
    result = {
        "python -c pass": bench_cli([sys.executable, "-c", "pass"], ns.repeat),
        "lock check": bench_cli([*py, "lock", "check"], ns.repeat),
        "lock check smoke": bench_cli([*py, "lock", "check", "smoke"], ns.repeat),
        "gate --base HEAD": bench_cli([*py, "gate", "--base", "HEAD"], ns.repeat),
        "gate --base main (one lock changed)": bench_gate_changed(ns.repeat),
        "lock (resolvable targets) vs raw uv, PyPI": bench_lock(ns.lock_repeat, {}),
        # UV_OFFLINE=1: both resolve from uv's warm cache, so the network's jitter does not hide the overhead
        "lock (resolvable targets) vs raw uv, UV_OFFLINE=1": bench_lock(ns.lock_repeat, {"UV_OFFLINE": "1"}),
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
