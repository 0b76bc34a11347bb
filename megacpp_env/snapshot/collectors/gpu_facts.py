"""GPU facts from raw readings: pure functions, no NVML, no subprocess.

Both sources (``snapshot.nvml`` reading NVML, ``parse_smi`` reading ``nvidia-smi``'s CSV) produce
*raw device records* in NVML's own units (milliwatts, bytes, MHz, NVML enum values); ``split``
turns one into the two parts of the snapshot:

- the **facts** (hashed): what the GPU is and how it is configured, i.e. what decides a benchmark's
  speed and does not change while it runs: model, compute capability, SM count, memory, power
  limit, application and maximum clocks, ECC, MIG, persistence and compute mode, PCIe and NVLink
  links, NUMA node;
- the **live** readings (recorded, never hashed): clocks now, temperature, power draw,
  utilisation, memory in use, performance state, the current PCIe link (it trains down when idle)
  and why the clocks are held back.

Units in the snapshot: W, MHz, MiB, °C, %.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# FP32 cores per SM (32-bit floating-point add/multiply/multiply-add results per clock per SM), by
# compute capability. Sources: the CUDA C++ Programming Guide, "Arithmetic Instructions", table
# "Throughput of Native Arithmetic Instructions" (row "32-bit floating-point add, multiply,
# multiply-add"), and NVIDIA's cuda-samples Common/helper_cuda.h `_ConvertSMVer2Cores` (commit
# 3e631f46, 2025-05-21, which adds SM 10.3, 11.0 and 12.1). Cross-checked against the architecture
# whitepapers' SM x cores (tests/test_snapshot_gpu.py): V100 80 x 64 = 5120, A100 108 x 64 = 6912
# (8.0 is 64, not 128: the old major-only table made an A100 54 SMs), H100 SXM5 132 x 128 = 16896.
# An unknown capability gives no SM count rather than a guess.
CORES_PER_SM: dict[tuple[int, int], int] = {
    (3, 0): 192, (3, 2): 192, (3, 5): 192, (3, 7): 192,  # Kepler
    (5, 0): 128, (5, 2): 128, (5, 3): 128,  # Maxwell
    (6, 0): 64, (6, 1): 128, (6, 2): 128,  # Pascal (GP100 is 64)
    (7, 0): 64, (7, 2): 64, (7, 5): 64,  # Volta, Xavier, Turing
    (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,  # Ampere (GA100 is 64), Orin, Ada
    (9, 0): 128,  # Hopper
    (10, 0): 128, (10, 1): 128, (10, 3): 128, (11, 0): 128,  # Blackwell (10.1 = Thor before CUDA 13's 11.0)
    (12, 0): 128, (12, 1): 128,  # Blackwell GeForce/RTX PRO, GB10
}  # fmt: skip

# nvmlGpuTopologyLevel_t -> nvidia-smi topo's label (X = the same board)
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
COMPUTE_MODES = {0: "default", 1: "exclusive-thread", 2: "prohibited", 3: "exclusive-process"}
NVLINK_REMOTE = {0: "gpu", 1: "ibmnpu", 2: "switch"}
# nvmlClocksEventReason* bits (nvml.h): why the clocks are below the maximum right now
CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def hash_uuid(uuid: str) -> str:
    return "sha256:" + hashlib.sha256(b"megacpp-env/gpu-uuid\0" + uuid.encode()).hexdigest()[:16]


def sm_count(cores: int | None, capability: Sequence[int] | None, reported: int | None = None) -> int | None:
    """SMs: what NVML reports directly (``reported``) when it does, else cores / FP32 cores per SM
    of the capability; None when neither is known (or the division is not exact)."""
    if reported:
        return int(reported)
    if not cores or not capability:
        return None
    per_sm = CORES_PER_SM.get((int(capability[0]), int(capability[1])))
    if per_sm is None or cores % per_sm:
        return None
    return cores // per_sm


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else round(int(milliwatts) / 1000, 1)


def _mib(count: Any) -> int | None:
    return None if count is None else int(count) // (1 << 20)


def _mode(pair: Any) -> dict[str, bool] | None:
    """NVML's (current, pending) enable flags; pending is what applies after the next reset."""
    if pair is None or pair[0] is None:
        return None
    return {"current": bool(pair[0]), **({"pending": bool(pair[1])} if pair[1] is not None else {})}


def _flag(value: Any) -> bool | None:
    return None if value is None else bool(value)


def _clocks(raw: Mapping[str, Any], key: str, names: Sequence[str]) -> dict[str, int] | None:
    table = raw.get(key)
    if not isinstance(table, Mapping):
        return None
    out = {n: int(table[n]) for n in names if table.get(n) is not None}
    return out or None


def nvlink_facts(links: Sequence[Mapping[str, Any]] | None) -> dict[str, Any] | None:
    """NVLink: how many links the GPU has, how many are up, their versions and what is at the
    other end (another GPU or an NVSwitch). None when the GPU has no NVLink."""
    if not links:
        return None
    active = [link for link in links if link.get("active")]
    remote: dict[str, int] = {}
    for link in active:
        if link.get("remote_type") is not None:
            kind = NVLINK_REMOTE.get(int(link["remote_type"]), "unknown")
            remote[kind] = remote.get(kind, 0) + 1
    versions = sorted({int(link["version"]) for link in active if link.get("version")})
    return {"links": len(links), "active": len(active), "versions": versions, "remote": dict(sorted(remote.items()))}


def clock_event_reasons(mask: int | None) -> list[str] | None:
    if mask is None:
        return None
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    return names + ([f"0x{unknown:x}"] if unknown else [])


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def device_facts(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The hashed facts of one raw device record. A reading the driver does not support is left out."""
    cap = raw.get("cuda_capability")
    pcie = _drop_none({"max_gen": raw.get("pcie_max_link_gen"), "max_width": raw.get("pcie_max_link_width")})
    return _drop_none(
        {
            "index": int(raw["index"]),
            "name": str(raw.get("name") or ""),
            "compute_capability": f"{cap[0]}.{cap[1]}" if cap else None,
            "sm_count": sm_count(raw.get("num_gpu_cores"), cap, raw.get("multiprocessor_count")),
            "memory_total_mib": _mib(raw.get("memory_total_bytes")),
            "uuid_hash": hash_uuid(str(raw["uuid"])) if raw.get("uuid") else None,
            "power_limit_w": _watts(raw.get("power_limit_mw")),
            "power_default_limit_w": _watts(raw.get("power_default_limit_mw")),
            "clocks_applications_mhz": _clocks(raw, "applications_clock_mhz", ("graphics", "memory")),
            "clocks_max_mhz": _clocks(raw, "max_clock_mhz", ("graphics", "sm", "memory")),
            "ecc": _mode(raw.get("ecc_mode")),
            "mig": _mode(raw.get("mig_mode")),
            "persistence_mode": _flag(raw.get("persistence_mode")),
            "compute_mode": COMPUTE_MODES.get(raw["compute_mode"]) if raw.get("compute_mode") is not None else None,
            "pcie": pcie or None,
            "nvlink": nvlink_facts(raw.get("nvlink")),
            "numa_node": raw.get("numa_node"),
        }
    )


def device_live(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The live readings of one raw device record (never hashed)."""
    util = raw.get("utilization")
    pcie = _drop_none({"gen": raw.get("pcie_link_gen"), "width": raw.get("pcie_link_width")})
    pstate = raw.get("performance_state")
    return _drop_none(
        {
            "index": int(raw["index"]),
            "clocks_mhz": _clocks(raw, "clock_mhz", ("graphics", "sm", "memory")),
            "temperature_c": raw.get("temperature_c"),
            "power_draw_w": _watts(raw.get("power_usage_mw")),
            "utilization_pct": dict(util) if isinstance(util, Mapping) else None,
            "memory_used_mib": _mib(raw.get("memory_used_bytes")),
            "pstate": f"P{pstate}" if pstate is not None and pstate != 32 else None,  # 32: unknown
            "pcie": pcie or None,
            "clocks_event_reasons": clock_event_reasons(raw.get("clocks_event_reasons")),
        }
    )


def topology(levels: Mapping[str, int] | None) -> dict[str, str] | None:
    """``{"0-1": "PIX", ...}``: the PCIe path between each pair of GPUs (nvidia-smi topo's labels)."""
    if not levels:
        return None
    return {pair: TOPOLOGY_LEVELS.get(int(level), str(level)) for pair, level in sorted(levels.items())}


def split(raw: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(facts, live) of a raw reading of the whole machine: ``source``, ``driver_version``,
    ``cuda_driver_version`` (NVML's integer, 12080 for 12.8), ``devices`` and ``topology``."""
    devices = list(raw.get("devices") or [])
    cuda = raw.get("cuda_driver_version")
    facts = _drop_none(
        {
            "present": bool(devices),
            "source": raw.get("source"),
            "driver_version": raw.get("driver_version") or None,
            "cuda_driver_api": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            "devices": [device_facts(d) for d in devices],
            "topology": topology(raw.get("topology")),
        }
    )
    live = {"devices": [device_live(d) for d in devices]}
    return facts, live


# ---- nvidia-smi (the fallback when NVML cannot be used) ----------------------------------------

# (query field, raw key, converter); `nvidia-smi --help-query-gpu` names them.
SMI_QUERY: tuple[tuple[str, str, str], ...] = (
    ("index", "index", "int"),
    ("name", "name", "text"),
    ("uuid", "uuid", "text"),
    ("pci.bus_id", "pci_bus_id", "text"),
    ("compute_cap", "cuda_capability", "capability"),
    ("driver_version", "driver_version", "text"),
    ("memory.total", "memory_total_bytes", "mib"),
    ("memory.used", "memory_used_bytes", "mib"),
    ("enforced.power.limit", "power_limit_mw", "watts"),
    ("power.default_limit", "power_default_limit_mw", "watts"),
    ("power.draw", "power_usage_mw", "watts"),
    ("clocks.applications.graphics", "applications_clock_mhz.graphics", "int"),
    ("clocks.applications.memory", "applications_clock_mhz.memory", "int"),
    ("clocks.max.graphics", "max_clock_mhz.graphics", "int"),
    ("clocks.max.sm", "max_clock_mhz.sm", "int"),
    ("clocks.max.memory", "max_clock_mhz.memory", "int"),
    ("clocks.current.graphics", "clock_mhz.graphics", "int"),
    ("clocks.current.sm", "clock_mhz.sm", "int"),
    ("clocks.current.memory", "clock_mhz.memory", "int"),
    ("ecc.mode.current", "ecc_mode.0", "enabled"),
    ("ecc.mode.pending", "ecc_mode.1", "enabled"),
    ("mig.mode.current", "mig_mode.0", "enabled"),
    ("mig.mode.pending", "mig_mode.1", "enabled"),
    ("persistence_mode", "persistence_mode", "enabled"),
    ("compute_mode", "compute_mode", "compute_mode"),
    ("pcie.link.gen.max", "pcie_max_link_gen", "int"),
    ("pcie.link.width.max", "pcie_max_link_width", "int"),
    ("pcie.link.gen.current", "pcie_link_gen", "int"),
    ("pcie.link.width.current", "pcie_link_width", "int"),
    ("temperature.gpu", "temperature_c", "int"),
    ("utilization.gpu", "utilization.gpu", "int"),
    ("utilization.memory", "utilization.memory", "int"),
    ("pstate", "performance_state", "pstate"),
)
# What older nvidia-smi builds know: the query falls back to these when a field above is refused.
SMI_MINIMAL = ("index", "name", "uuid", "compute_cap", "memory.total", "driver_version")
_SMI_COMPUTE_MODES = {"default": 0, "exclusive_thread": 1, "prohibited": 2, "exclusive_process": 3}


def _capability(text: str) -> list[int]:
    major, minor = text.split(".")
    return [int(major), int(minor)]


_SMI_CONVERT: dict[str, Callable[[str], Any]] = {
    "int": lambda t: int(float(t)),
    "mib": lambda t: int(float(t)) << 20,
    "watts": lambda t: round(float(t) * 1000),
    "capability": _capability,
    "pstate": lambda t: int(t.removeprefix("P")),
    "enabled": lambda t: {"enabled": 1, "disabled": 0}.get(t.lower()),
    "compute_mode": lambda t: _SMI_COMPUTE_MODES.get(t.lower().replace(" ", "_")),
    "text": str,
}


def _smi_value(text: str, kind: str) -> Any:
    """One CSV cell (``--format=csv,noheader,nounits``) in NVML's units; None for N/A."""
    text = text.strip()
    if not text or text.startswith("[") or text in ("N/A", "Unknown"):  # [N/A], [Not Supported]
        return None
    try:
        return _SMI_CONVERT[kind](text)
    except ValueError:
        return None


def _put(record: dict[str, Any], key: str, value: Any) -> None:
    """``a.b`` -> record["a"]["b"]; ``mode.0`` -> record["mode"][0] (a (current, pending) pair)."""
    head, _, tail = key.partition(".")
    if not tail:
        record[head] = value
    elif tail.isdigit():
        pair = record.setdefault(head, [None, None])
        pair[int(tail)] = value
    else:
        record.setdefault(head, {})[tail] = value


def parse_smi(text: str, fields: Sequence[str]) -> dict[str, Any]:
    """``nvidia-smi --query-gpu=FIELDS --format=csv,noheader,nounits`` as a raw machine reading."""
    import csv

    kinds = {f: (key, kind) for f, key, kind in SMI_QUERY}
    devices: list[dict[str, Any]] = []
    driver = ""
    for row in csv.reader(line for line in text.splitlines() if line.strip()):
        record: dict[str, Any] = {}
        for field, cell in zip(fields, row, strict=True):
            key, kind = kinds[field]
            _put(record, key, _smi_value(cell, kind))
        driver = record.pop("driver_version", None) or driver
        record.setdefault("index", len(devices))
        devices.append(record)
    return {"source": "nvidia-smi", "driver_version": driver, "devices": devices}
