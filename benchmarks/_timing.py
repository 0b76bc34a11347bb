"""Shared timing helpers for the benchmarks (wall-clock of whole commands, repeated)."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Sequence


def time_command(argv: Sequence[str], *, repeat: int = 10, cwd: str | None = None, warmup: int = 1) -> dict[str, float]:
    """Run ``argv`` ``repeat`` times (after ``warmup`` runs) and return min/median/max seconds."""
    for _ in range(warmup):
        subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
        samples.append(time.perf_counter() - start)
    return {"min": min(samples), "median": statistics.median(samples), "max": max(samples), "n": float(repeat)}


def fmt(stats: dict[str, float]) -> str:
    return f"min {stats['min'] * 1000:7.1f} ms  median {stats['median'] * 1000:7.1f} ms  max {stats['max'] * 1000:7.1f} ms"
