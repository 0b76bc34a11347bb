"""The jobs formula: how many compile jobs (and nvcc threads) a source build can afford here.

    memory  = min(MemAvailable, every cgroup limit on the way up minus its working set)
    cpus    = min(CPUs this process may run on, the cgroup CPU quota rounded up)
    slots   = floor(memory / mem_per_job_gib): how many single-threaded compiles fit in memory
    units   = the files the build compiles (its facts; not known: as many as the cpus)
    jobs    = the target's fixed number, else clamp(1, min(units, cpus, slots / threads when those are fixed))
    threads = what the build hard-codes (upstream causal-conv1d and mamba pass ``--threads 4``), else
              the target's fixed number, else 1 for a build that reads no threads variable (or compiles
              no CUDA), else the cores each job has (cpus / jobs, to the nearest whole number), up to
              the archs each file is compiled for (nvcc's ``--threads`` splits a file by arch) and
              within memory: min(archs, round(cpus / jobs), slots // jobs), at least 1

so jobs x threads x mem_per_job_gib <= memory whenever the formula chooses, and jobs x threads <=
1.5 x cpus. Rounding to the nearest (not down) is what uses the idle cores: mamba's 10 files on 16
cores get 2 threads, not 1, and its heaviest files, which finish last, keep two cores busy each
(causal-conv1d's 4 files on 16 cores: 4 x 2, the archs being the limit). What is exported models
what the build does with the numbers: a build that runs ``MAX_JOBS // NVCC_THREADS`` jobs (vLLM's
``compute_num_jobs``) gets MAX_JOBS = jobs x threads. Only the variables the build reads
(``plan.jobs.reads``, from its facts) are exported.

The working set of a cgroup is its usage minus its inactive page cache (what the kernel reclaims
first; the same rule container runtimes use), so a build cache filling the page cache does not
starve the next build.

``read_resources`` takes the roots of ``/proc`` and ``/sys`` so tests (and ``build-source
--resources-root``) can give it fake trees; the CPUs this process may run on then come from that
tree's ``self/status`` (``Cpus_allowed_list``). Those trees are untrusted (``read_resources``). Stdlib and
``fsutil`` only; never prints.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megacpp_env.errors import InputError, RefusedError
from megacpp_env.fsutil import read_regular
from megacpp_env.srcbuild.plan import THREADS_ENV, JobsPlan

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
    """MAX_JOBS and nvcc threads for one build; ``jobs`` (``--jobs N``, N >= 1) overrides the job count."""
    if jobs < 0:
        raise RefusedError(f"--jobs {jobs}: expected a positive number of compile jobs (or none: the formula)")
    slots = max(1, res.memory // (policy.mem_per_job_gib * GIB))
    units = policy.units or res.cpus
    units_why = f"{policy.units} units" if policy.units else "units not known"
    fixed = jobs or policy.max_jobs
    threads, threads_why = _fixed_threads(policy)
    if threads:
        count = fixed or max(1, min(units, res.cpus, slots // threads))
        jobs_why = f"min({units_why}, {res.cpus} cpus, {slots} memory slots / {threads} threads)"
    else:
        count = fixed or max(1, min(units, res.cpus, slots))
        jobs_why = f"min({units_why}, {res.cpus} cpus, {slots} memory slots)"
        archs = max(1, policy.archs)
        per_job = (2 * res.cpus + count) // (2 * count)  # cpus / jobs, to the nearest (halves up)
        threads = max(1, min(archs, per_job, slots // count))
        threads_why = f"min({archs} archs, {res.cpus} cpus / {count} jobs ~ {per_job}, {slots} slots // {count} jobs)"
    why = f"fixed at {fixed}" if fixed else f"{jobs_why} of {policy.mem_per_job_gib} GiB"
    divided = policy.divides and any(name in policy.reads for name in THREADS_ENV)
    if divided:
        threads_why += f"; the build runs MAX_JOBS // NVCC_THREADS jobs, so MAX_JOBS = {count} x {threads}"
    return JobsDecision(
        max_jobs=count,
        nvcc_threads=threads,
        per_job_gib=policy.mem_per_job_gib * threads,
        env=_exported(policy, count * threads if divided else count, count, threads),
        why=f"{why}; nvcc threads {threads} ({threads_why})",
        resources=res,
    )


def _fixed_threads(policy: JobsPlan) -> tuple[int, str]:
    """The threads when the build or the target fixes them; (0, "") when the formula chooses."""
    if policy.nvcc_threads:
        return policy.nvcc_threads, "hard-coded by the build"
    if not policy.cuda:
        return 1, "no CUDA"
    if policy.nvcc_threads_override:
        return policy.nvcc_threads_override, "the target's build.nvcc_threads"
    if not any(name in policy.reads for name in THREADS_ENV):
        return 1, "the build reads no nvcc threads variable"
    return 0, ""


def _exported(policy: JobsPlan, max_jobs: int, jobs: int, threads: int) -> dict[str, str]:
    values = {
        "MAX_JOBS": max_jobs,
        "CMAKE_BUILD_PARALLEL_LEVEL": jobs,
        "NVCC_THREADS": threads,
        "FLASHINFER_NVCC_THREADS": threads,
    }
    return {name: str(values[name]) for name in sorted(policy.reads) if name in values}


# ---- reading the machine -------------------------------------------------------------------------


def read_resources(*, proc: Path = Path("/proc"), sys: Path = Path("/sys"), affinity: int | None = None) -> Resources:
    """Memory and CPUs available to this process: /proc/meminfo, the cgroup (v2 or v1) and the affinity.

    The trees are read as untrusted input (``--resources-root`` names any directory): only regular files
    inside their tree are read (a FIFO, a device, a link out of the tree read as nothing), each up to
    ``MAX_READ`` bytes; a number must be plain ASCII digits, at most ``MAX_DIGITS`` of them (else it is
    not known); a cgroup path with ``.`` or ``..`` parts, or deeper than ``MAX_LEVELS``, is not visible
    (the mount's root is read, as in a container)."""
    cpus = affinity if affinity is not None else _affinity(proc)
    memory, memory_from = _meminfo_available(proc)
    cpus_from = "cpu affinity"
    for limit, where in _cgroup_memory(proc, sys):
        if limit < memory:
            memory, memory_from = limit, where
    quota = _cgroup_cpus(proc, sys)
    if quota is not None and quota[0] < cpus:
        cpus, cpus_from = quota
    return Resources(memory=max(0, memory), memory_from=memory_from, cpus=max(1, cpus), cpus_from=cpus_from)


MAX_READ = 1 << 20  # bytes of one /proc or /sys file
MAX_DIGITS = 20  # a number with more digits is not one the kernel writes (2**64 has 20)
MAX_LEVELS = 64  # cgroup path parts (real hierarchies are a few deep)
MAX_CPUS = 1 << 16
_DIGITS = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")


def _affinity(proc: Path) -> int:
    """CPUs this process may run on: the scheduler's answer, or a given tree's ``Cpus_allowed_list``."""
    if proc == Path("/proc"):
        return len(os.sched_getaffinity(0))
    for line in _read(proc / "self" / "status", proc).splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Cpus_allowed_list":
            return _count_cpu_list(value.strip())
    return 1


def _count_cpu_list(text: str) -> int:
    """``0-19,24`` -> 21; anything malformed counts as 1 CPU (never more than the tree says)."""
    total = 0
    for part in text.split(","):
        low_text, dash, high_text = part.strip().partition("-")
        low, high = _plain(low_text, digits=7), _plain(high_text, digits=7) if dash else None
        if low is None or (dash and (high is None or high < low)):
            return 1
        total += high - low + 1 if high is not None else 1
        if total > MAX_CPUS:
            break
    return max(1, min(total, MAX_CPUS))


def _meminfo_available(proc: Path) -> tuple[int, str]:
    fields = _keyed_numbers(_read(proc / "meminfo", proc), scale=1024)
    if "MemAvailable" in fields:
        return fields["MemAvailable"], "MemAvailable"
    return fields.get("MemFree", 0), "MemFree"


def _keyed_numbers(text: str, *, scale: int = 1) -> dict[str, int]:
    """``Key: 123 kB`` or ``key 123`` lines -> {key: number * scale} (a value that is no plain number is left out)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.replace(":", " ").split()
        value = _plain(parts[1]) if len(parts) >= 2 else None
        if value is not None:
            out[parts[0]] = value * scale
    return out


def _plain(text: str, *, digits: int = MAX_DIGITS) -> int | None:
    """``text`` as a number when it is 1..``digits`` ASCII digits, else None (``²``, 5,000 digits, ``-1``)."""
    return int(text) if len(text) <= digits and _DIGITS.fullmatch(text) else None


def _read(path: Path, root: Path) -> str:
    """The text of the regular file ``path`` inside ``root``; "" for anything else (missing, a FIFO or a
    device, a link that leaves the tree, unreadable, larger than ``MAX_READ``). Never blocks."""
    try:
        return read_regular(path, limit=MAX_READ, root=root).decode("ascii", errors="replace")
    except (InputError, OSError, ValueError):
        return ""


def _cgroup_paths(proc: Path) -> dict[str, str]:
    """Controller -> cgroup path from /proc/self/cgroup (``""`` is the v2 unified hierarchy)."""
    out: dict[str, str] = {}
    for line in _read(proc / "self" / "cgroup", proc).splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for controller in parts[1].split(","):
                out[controller] = parts[2]
    return out


def _levels(mount: Path, rel: str) -> list[Path]:
    """The cgroup directory and its ancestors up to the mount (the mount alone when the path is not
    visible there, as inside a container whose cgroup is the mount's root, or when it is no plain
    relative path: ``..``, ``.``, more than ``MAX_LEVELS`` parts)."""
    parts = [p for p in rel.split("/") if p]
    if not parts or len(parts) > MAX_LEVELS or any(p in (".", "..") or "\0" in p for p in parts):
        return [mount]
    try:
        visible = (mount / "/".join(parts)).is_dir()
    except OSError:  # a name too long, a loop
        visible = False
    if not visible:
        return [mount]
    return [mount / "/".join(parts[:n]) if n else mount for n in range(len(parts), -1, -1)]


def _cgroup_memory(proc: Path, sys: Path) -> list[tuple[int, str]]:
    """(limit minus working set, where) for every level that has a memory limit."""
    paths, root = _cgroup_paths(proc), sys / "fs" / "cgroup"
    if "" in paths and (root / "cgroup.controllers").is_file():
        files = ("memory.max", "memory.current", "inactive_file")
        return _memory_levels(_levels(root, paths[""]), files, "cgroup v2", sys)
    if "memory" in paths:
        files = ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")
        return _memory_levels(_levels(root / "memory", paths["memory"]), files, "cgroup v1", sys)
    return []


def _memory_levels(levels: list[Path], files: tuple[str, str, str], label: str, sys: Path) -> list[tuple[int, str]]:
    limit_name, usage_name, inactive_name = files
    out = []
    for level in levels:
        limit = _number(_read(level / limit_name, sys))
        if limit is None or limit >= UNLIMITED:
            continue
        usage = _number(_read(level / usage_name, sys)) or 0
        inactive = _keyed_numbers(_read(level / "memory.stat", sys)).get(inactive_name, 0)
        working_set = max(0, usage - inactive)
        out.append((max(0, limit - working_set), f"{label} {level / limit_name} minus its working set"))
    return out


def _number(text: str) -> int | None:
    return _plain(text.strip())


def _cgroup_cpus(proc: Path, sys: Path) -> tuple[int, str] | None:
    """The tightest CPU quota on the way up (quota / period, rounded up), or None when unlimited."""
    paths, root = _cgroup_paths(proc), sys / "fs" / "cgroup"
    best: tuple[int, str] | None = None
    if "" in paths and (root / "cgroup.controllers").is_file():
        for level in _levels(root, paths[""]):
            quota = [_plain(word) for word in _read(level / "cpu.max", sys).split()]
            if len(quota) == 2 and quota[0] is not None and quota[1]:
                best = _tighter(best, quota[0], quota[1], f"cgroup v2 {level / 'cpu.max'}")
    else:
        rel = paths.get("cpu", paths.get("cpuacct"))
        mount = next((root / n for n in ("cpu,cpuacct", "cpu") if (root / n).is_dir()), None)
        for level in _levels(mount, rel) if mount is not None and rel is not None else []:
            q, p = _number(_read(level / "cpu.cfs_quota_us", sys)), _number(_read(level / "cpu.cfs_period_us", sys))
            if q is not None and p:
                best = _tighter(best, q, p, f"cgroup v1 {level / 'cpu.cfs_quota_us'}")
    return best


def _tighter(best: tuple[int, str] | None, quota: int, period: int, where: str) -> tuple[int, str]:
    cpus = max(1, min(MAX_CPUS, -(-quota // period)))  # rounded up, in integers (no float overflow)
    return (cpus, where) if best is None or cpus < best[0] else best
