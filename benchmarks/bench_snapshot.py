"""Benchmark `megacpp-env snapshot` against `python -m torch.utils.collect_env` and `pip freeze`.

Times, in one run and per round: a full snapshot with an empty hash cache (every RECORD entry of
every distribution hashed), a repeat snapshot (warm cache), `collect_env` (when torch is importable
in the inspected interpreter) and `pip freeze`. Each command runs as a subprocess, end to end.
Prints a table and a JSON document (also written with --json-out).

    python benchmarks/bench_snapshot.py [--python PATH] [--rounds 3] [--json-out FILE]

The page cache is not dropped: round 1 may read files from disk, later rounds from memory; every
round's numbers are kept, the table shows the median.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, cwd=REPO)
    return time.perf_counter() - start, proc.returncode, (proc.stderr or proc.stdout)[-300:]


def has_module(python: str, module: str) -> bool:
    code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
    return subprocess.run([python, "-c", code], check=False, capture_output=True).returncode == 0


def one_round(python: str, cache: Path, out: Path, env: dict[str, str], torch: bool, pip: bool) -> dict[str, float]:
    snap = [sys.executable, "-m", "megacpp_env", "snapshot", "--python", python, "-o", str(out)]
    senv = {**env, "MEGACPP_ENV_CACHE_DIR": str(cache)}
    results: dict[str, float] = {}
    for name, argv, run_env in (
        ("snapshot_full", snap, senv),
        ("snapshot_repeat", snap, senv),
        *((("collect_env", [python, "-m", "torch.utils.collect_env"], env),) if torch else ()),
        *((("pip_freeze", [python, "-m", "pip", "freeze"], env),) if pip else ()),
    ):
        seconds, rc, tail = timed(argv, run_env)
        if rc != 0:
            print(f"warning: {name} exited {rc}: {tail}", file=sys.stderr)
        results[name] = round(seconds, 3)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_python = (
        str(Path(os.environ["VIRTUAL_ENV"]) / "bin" / "python") if os.environ.get("VIRTUAL_ENV") else sys.executable
    )
    parser.add_argument("--python", default=default_python, help="the interpreter to inspect")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    torch, pip = has_module(args.python, "torch"), has_module(args.python, "pip")
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-snapshot-") as tmp:
        for i in range(args.rounds):
            cache = Path(tmp) / f"cache-{i}"  # empty: the first snapshot of the round hashes everything
            rounds.append(one_round(args.python, cache, Path(tmp) / "snap.json", env, torch, pip))
        doc = json.loads((Path(tmp) / "snap.json").read_text())
    names = list(rounds[0])
    median = {n: round(statistics.median(r[n] for r in rounds), 3) for n in names}
    integrity = doc["timing"].get("integrity", {})
    result = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": args.python,
            "cpu_model": doc["facts"]["system"].get("cpu_model"),
            "gpus": [g.get("name") for g in doc["facts"]["gpu"].get("devices", [])],
        },
        "environment": {
            "distributions": len(doc["facts"]["python"]["distributions"]),
            "record_files": integrity.get("files"),
            "cache_hits_last_repeat": integrity.get("cache_hits"),
        },
        "rounds": rounds,
        "last_repeat_timing": doc["timing"],
        "median_s": median,
    }
    full = [r["snapshot_full"] for r in rounds]
    print(f"{'command':<18}{'median s':>10}   rounds")
    for n in names:
        print(f"{n:<18}{median[n]:>10.3f}   {', '.join(f'{r[n]:.3f}' for r in rounds)}")
    if "collect_env" in median:
        ce = median["collect_env"]
        result["checks"] = {
            "full_faster_than_collect_env (median)": median["snapshot_full"] < ce,
            "full_faster_than_collect_env (every round)": max(full) < min(r["collect_env"] for r in rounds),
            "repeat_under_tenth_of_collect_env (median)": median["snapshot_repeat"] < ce / 10,
        }
        print(
            f"full/collect_env = {median['snapshot_full'] / ce:.2f}, repeat/collect_env = {median['snapshot_repeat'] / ce:.3f}"
        )
    print(json.dumps(result, indent=2))
    if args.json_out:
        args.json_out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
