"""Shared timing helpers for the benchmarks (wall-clock and CPU time of whole commands, repeated)."""

from __future__ import annotations

import resource
import statistics
import subprocess
import time
from collections.abc import Sequence


def time_command(argv: Sequence[str], *, repeat: int = 10, cwd: str | None = None, warmup: int = 1) -> dict[str, float]:
    """Run ``argv`` ``repeat`` times (after ``warmup`` runs) and return min/median/max seconds."""
    for _ in range(warmup):
        subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
    samples, cpu = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
        samples.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return {
        "min": min(samples),
        "median": statistics.median(samples),
        "max": max(samples),
        "cpu_median": statistics.median(cpu),  # user+sys of the command: less sensitive to a busy machine
        "n": float(repeat),
    }


def fmt(stats: dict[str, float]) -> str:
    text = f"min {stats['min'] * 1000:7.1f} ms  median {stats['median'] * 1000:7.1f} ms  max {stats['max'] * 1000:7.1f} ms"
    return text + (f"  cpu {stats['cpu_median'] * 1000:6.1f} ms" if "cpu_median" in stats else "")
