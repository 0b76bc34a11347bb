"""OS, kernel, glibc, the CPU (model, count, instruction-set flags, frequency governor, SMT) and
the NUMA layout (nodes and their CPUs): hashed facts. Memory (total in ``host``, per NUMA node in
``live``) is recorded outside the digest: it drifts on VMs."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.snapshot.parts import Parts

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context


def _os_release() -> dict[str, str]:
    for candidate in (Path("/etc/os-release"), Path("/usr/lib/os-release")):
        try:
            text = candidate.read_text(encoding="utf-8")
        except OSError:
            continue
        out: dict[str, str] = {}
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep and key in ("ID", "VERSION_ID", "PRETTY_NAME", "VERSION_CODENAME"):
                out[key.lower()] = value.strip().strip('"')
        return out
    return {"error": "no /etc/os-release"}


def _glibc() -> str:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return " ".join(platform.libc_ver()).strip()


def cpuinfo_fields(text: str) -> dict[str, str]:
    """The fields of the first processor in ``/proc/cpuinfo``."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def cpu_model(fields: dict[str, str]) -> str:
    if "model name" in fields:
        return fields["model name"]
    parts = [f"{k}={fields[k]}" for k in ("CPU implementer", "CPU part") if k in fields]
    return " ".join(parts) or platform.processor()


def cpu_flags(fields: dict[str, str]) -> list[str]:
    """The instruction-set extensions of the CPU (x86 ``flags``, Arm ``Features``), sorted."""
    return sorted(set((fields.get("flags") or fields.get("Features") or "").split()))


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def numa(root: Path = Path("/sys/devices/system/node")) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(nodes with their CPU lists, MiB of memory per node); ([], {}) without NUMA information."""
    nodes, memory = [], {}
    paths = sorted(root.glob("node[0-9]*"), key=lambda p: int(p.name[4:])) if root.is_dir() else []
    for node in paths:
        nodes.append({"node": int(node.name[4:]), "cpus": _read(node / "cpulist") or ""})
        for line in (_read(node / "meminfo") or "").splitlines():
            if "MemTotal:" in line:
                memory[node.name[4:]] = int(line.split()[-2]) // 1024
    return nodes, memory


def cpu_settings(root: Path = Path("/sys/devices/system/cpu")) -> dict[str, Any]:
    """The frequency governor of CPU 0 and the SMT state, where the kernel says."""
    out = {
        "cpu_governor": _read(root / "cpu0" / "cpufreq" / "scaling_governor"),
        "smt": _read(root / "smt" / "control"),
    }
    return {k: v for k, v in out.items() if v is not None}


def _cpus_usable() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def collect() -> Parts:
    try:
        fields = cpuinfo_fields(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        fields = {}
    nodes, memory = numa()
    facts = {
        "os": _os_release(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "glibc": _glibc(),
        "cpu_model": cpu_model(fields),
        "cpu_count": os.cpu_count() or 0,
        "cpu_flags": cpu_flags(fields),
        **cpu_settings(),
        "numa_nodes": nodes,
    }
    return Parts(facts=facts, live={"numa_memory_mib": memory})


def _mem_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / (1 << 20), 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_facts() -> dict[str, Any]:
    """Facts that identify the run but must not change the digest."""
    import socket

    return {
        "hostname": socket.gethostname(),
        "memory_total_gib": _mem_total_gib(),
        "cpus_usable": _cpus_usable(),
    }


def start(ctx: Context) -> Callable[[], Parts]:
    return collect
