"""Render speed: every target of stack.yaml, in a fresh interpreter (cold) and in-process (warm).

    python benchmarks/bench_render.py [--repeat 50]

Cold = a new Python process that imports megacpp_env, loads the spec, builds the Jinja environment,
compiles the templates and renders every target (what `megacpp-env render --check` costs in CI,
minus interpreter start-up, which is measured separately). Warm = the same render again in-process
with the cached environment. The acceptance bound is 0.2 s for rendering every target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

COLD = """
import time, json
t0 = time.perf_counter()
from megacpp_env.spec import load_spec
from megacpp_env import render
t1 = time.perf_counter()
spec = load_spec("stack.yaml")
t2 = time.perf_counter()
files = render.render_all(spec)
t3 = time.perf_counter()
stale = render.staleness(spec.root, files)
t4 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "load": t2 - t1, "render": t3 - t2, "check": t4 - t3, "files": len(files),
                  "stale": len(stale)}))
"""


def cold(repeat: int) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-c", COLD], cwd=ROOT, capture_output=True, text=True, check=True)
        runs.append(json.loads(out.stdout))
    return {k: statistics.median(r[k] for r in runs) for k in ("import", "load", "render", "check")}


def warm(repeat: int) -> float:
    sys.path.insert(0, str(ROOT))
    from megacpp_env import render
    from megacpp_env.spec import load_spec

    spec = load_spec(ROOT / "stack.yaml")
    render.render_all(spec)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        render.render_all(spec)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def cli(repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "megacpp_env", "render", "--check"], cwd=ROOT, capture_output=True, check=True
        )
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeat", type=int, default=20)
    args = p.parse_args()
    c = cold(args.repeat)
    w = warm(args.repeat * 5)
    full = cli(max(3, args.repeat // 4))
    print("| measurement | median |")
    print("|---|---|")
    print(f"| cold: import megacpp_env.render + spec | {c['import'] * 1000:.1f} ms |")
    print(f"| cold: load stack.yaml | {c['load'] * 1000:.1f} ms |")
    print(f"| cold: render every target (env + template compile + render) | {c['render'] * 1000:.1f} ms |")
    print(f"| cold: compare with the committed files | {c['check'] * 1000:.1f} ms |")
    print(f"| warm: render every target again (cached environment) | {w * 1000:.2f} ms |")
    print(f"| `python -m megacpp_env render --check` wall time (incl. interpreter start) | {full * 1000:.0f} ms |")


if __name__ == "__main__":
    main()
