"""OS, kernel, glibc, CPU model and count (hashed facts) and memory (unhashed: it drifts on VMs)."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

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


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor()
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    if "model name" in fields:
        return fields["model name"]
    parts = [f"{k}={fields[k]}" for k in ("CPU implementer", "CPU part") if k in fields]
    return " ".join(parts) or platform.processor()


def _cpus_usable() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def collect() -> dict[str, Any]:
    return {
        "os": _os_release(),
        "kernel": platform.release(),
        "machine": platform.machine(),
        "glibc": _glibc(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count() or 0,
    }


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


def start(ctx: Context) -> Callable[[], dict[str, Any]]:
    return collect
