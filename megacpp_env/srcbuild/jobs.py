"""The jobs formula: how many compile jobs (and nvcc threads) a source build can afford here.

    memory  = min(MemAvailable, every cgroup limit on the way up minus its working set)
    cpus    = min(CPUs this process may run on, the cgroup CPU quota rounded up)
    threads = the source's real nvcc thread count: what its build hard-codes (causal-conv1d and mamba
              pass ``--threads 4``), else the target's fixed number, else 2 when memory allows two
              threads per job on every CPU, else 1 (1 for a build without CUDA)
    per job = mem_per_job_gib * threads
    jobs    = the target's fixed number, else clamp(1, cpus, floor(memory / per job))

The working set of a cgroup is its usage minus its inactive page cache (what the kernel reclaims
first; the same rule container runtimes use), so a build cache filling the page cache does not
starve the next build. Only the variables the build reads (``plan.jobs.reads``) are exported.

``read_resources`` takes the roots of ``/proc`` and ``/sys`` so tests can give it fake trees.
Stdlib only; never prints.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megacpp_env.srcbuild.plan import JobsPlan

GIB = 1 << 30
UNLIMITED = 1 << 60  # cgroup v1 reports "no limit" as a huge number near 2**63


@dataclass(frozen=True, kw_only=True, slots=True)
class Resources:
    """What this process may use: memory in bytes and CPUs, each with where the number came from."""

    memory: int
    memory_from: str
    cpus: int
    cpus_from: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "memory_gib": round(self.memory / GIB, 2),
            "memory_from": self.memory_from,
            "cpus": self.cpus,
            "cpus_from": self.cpus_from,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class JobsDecision:
    max_jobs: int
    nvcc_threads: int
    per_job_gib: int
    env: dict[str, str]  # what is exported to the build (only the variables it reads)
    why: str
    resources: Resources

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_jobs": self.max_jobs,
            "nvcc_threads": self.nvcc_threads,
            "per_job_gib": self.per_job_gib,
            "env": dict(sorted(self.env.items())),
            "why": self.why,
            "resources": self.resources.to_dict(),
        }


# ---- the formula ---------------------------------------------------------------------------------


def decide(policy: JobsPlan, res: Resources, *, jobs: int = 0) -> JobsDecision:
    """MAX_JOBS and nvcc threads for one build; ``jobs`` (``--jobs N``) overrides the job count."""
    slots = res.memory // (policy.mem_per_job_gib * GIB)
    threads, threads_why = _threads(policy, slots, res.cpus)
    per_job = policy.mem_per_job_gib * threads
    fixed = jobs or policy.max_jobs
    count = fixed or max(1, min(res.cpus, res.memory // (per_job * GIB)))
    why = (
        f"fixed at {fixed}"
        if fixed
        else f"min({res.cpus} cpus, {res.memory / GIB:.1f} GiB / {per_job} GiB per job), at least 1"
    )
    return JobsDecision(
        max_jobs=count,
        nvcc_threads=threads,
        per_job_gib=per_job,
        env=_exported(policy, count, threads),
        why=f"{why}; nvcc threads {threads} ({threads_why})",
        resources=res,
    )


def _threads(policy: JobsPlan, slots: int, cpus: int) -> tuple[int, str]:
    if policy.nvcc_threads:
        return policy.nvcc_threads, "hard-coded by the build"
    if not policy.cuda:
        return 1, "no CUDA"
    if policy.nvcc_threads_override:
        return policy.nvcc_threads_override, "the target's build.nvcc_threads"
    if "NVCC_THREADS" not in policy.reads:
        return 1, "the build does not read NVCC_THREADS"
    return (2, "memory for 2 per job on every cpu") if slots >= 2 * cpus else (1, "memory for 1 per job")


def _exported(policy: JobsPlan, jobs: int, threads: int) -> dict[str, str]:
    values = {"MAX_JOBS": jobs, "CMAKE_BUILD_PARALLEL_LEVEL": jobs, "NVCC_THREADS": threads}
    return {name: str(values[name]) for name in sorted(policy.reads) if name in values}


# ---- reading the machine -------------------------------------------------------------------------


def read_resources(*, proc: Path = Path("/proc"), sys: Path = Path("/sys"), affinity: int | None = None) -> Resources:
    """Memory and CPUs available to this process: /proc/meminfo, the cgroup (v2 or v1) and the affinity."""
    cpus = affinity if affinity is not None else len(os.sched_getaffinity(0))
    memory, memory_from = _meminfo_available(proc)
    cpus_from = "cpu affinity"
    for limit, where in _cgroup_memory(proc, sys):
        if limit < memory:
            memory, memory_from = limit, where
    quota = _cgroup_cpus(proc, sys)
    if quota is not None and quota[0] < cpus:
        cpus, cpus_from = quota
    return Resources(memory=max(0, memory), memory_from=memory_from, cpus=max(1, cpus), cpus_from=cpus_from)


def _meminfo_available(proc: Path) -> tuple[int, str]:
    fields = _keyed_numbers(_read(proc / "meminfo"), scale=1024)
    if "MemAvailable" in fields:
        return fields["MemAvailable"], "MemAvailable"
    return fields.get("MemFree", 0), "MemFree"


def _keyed_numbers(text: str, *, scale: int = 1) -> dict[str, int]:
    """``Key: 123 kB`` or ``key 123`` lines -> {key: number * scale}."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.replace(":", " ").split()
        if len(parts) >= 2 and parts[1].isdigit():
            out[parts[0]] = int(parts[1]) * scale
    return out


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""


def _cgroup_paths(proc: Path) -> dict[str, str]:
    """Controller -> cgroup path from /proc/self/cgroup (``""`` is the v2 unified hierarchy)."""
    out: dict[str, str] = {}
    for line in _read(proc / "self" / "cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(","):
                out[controller] = parts[2]
    return out


def _levels(mount: Path, rel: str) -> list[Path]:
    """The cgroup directory and its ancestors up to the mount (the mount alone when the path is not
    visible there, as inside a container whose cgroup is the mount's root)."""
    leaf = mount / rel.strip("/") if rel.strip("/") else mount
    if not leaf.is_dir():
        return [mount]
    out = [leaf]
    while out[-1] != mount and mount in out[-1].parents:
        out.append(out[-1].parent)
    return out


def _cgroup_memory(proc: Path, sys: Path) -> list[tuple[int, str]]:
    """(limit minus working set, where) for every level that has a memory limit."""
    paths, root = _cgroup_paths(proc), sys / "fs" / "cgroup"
    if "" in paths and (root / "cgroup.controllers").is_file():
        files = ("memory.max", "memory.current", "inactive_file")
        return _memory_levels(_levels(root, paths[""]), files, "cgroup v2")
    if "memory" in paths:
        files = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        return _memory_levels(_levels(root / "memory", paths["memory"]), files, "cgroup v1")
    return []


def _memory_levels(levels: list[Path], files: tuple[str, str, str], label: str) -> list[tuple[int, str]]:
    limit_name, usage_name, inactive_name = files
    out = []
    for level in levels:
        limit = _number(_read(level / limit_name))
        if limit is None or limit >= UNLIMITED:
            continue
        usage = _number(_read(level / usage_name)) or 0
        inactive = _keyed_numbers(_read(level / "memory.stat")).get(inactive_name, 0)
        working_set = max(0, usage - inactive)
        out.append((max(0, limit - working_set), f"{label} {level / limit_name} minus its working set"))
    return out


def _number(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def _cgroup_cpus(proc: Path, sys: Path) -> tuple[int, str] | None:
    """The tightest CPU quota on the way up (quota / period, rounded up), or None when unlimited."""
    paths, root = _cgroup_paths(proc), sys / "fs" / "cgroup"
    best: tuple[int, str] | None = None
    if "" in paths and (root / "cgroup.controllers").is_file():
        for level in _levels(root, paths[""]):
            quota = _read(level / "cpu.max").split()
            if len(quota) == 2 and quota[0].isdigit() and quota[1].isdigit() and int(quota[1]):
                best = _tighter(best, int(quota[0]), int(quota[1]), f"cgroup v2 {level / 'cpu.max'}")
    else:
        rel = paths.get("cpu", paths.get("cpuacct"))
        mount = next((root / n for n in ("cpu,cpuacct", "cpu") if (root / n).is_dir()), None)
        for level in _levels(mount, rel) if mount is not None and rel is not None else []:
            q, p = _number(_read(level / "cpu.cfs_quota_us")), _number(_read(level / "cpu.cfs_period_us"))
            if q is not None and p:
                best = _tighter(best, q, p, f"cgroup v1 {level / 'cpu.cfs_quota_us'}")
    return best


def _tighter(best: tuple[int, str] | None, quota: int, period: int, where: str) -> tuple[int, str]:
    cpus = max(1, math.ceil(quota / period))
    return (cpus, where) if best is None or cpus < best[0] else best
