"""Read NVML (``pynvml`` from nvidia-ml-py) into a raw machine reading: plain values in NVML's
units, one record per GPU (see ``gpu_facts``, which turns it into snapshot facts). The only module
that calls NVML. A query the GPU or driver does not support leaves its key out; only NVML itself
failing (no library, no driver) raises.

The facts no setting can change (``FIXED``: model, PCI address, compute capability, cores, SMs,
maximum clocks and PCIe link, the topology) may be kept in a cache file, keyed by the driver
version, the kernel's boot id and every GPU's UUID: a new driver, a reboot or another set of GPUs
reads them again. The cache file is sealed and checked before use (``cachefile``); one that fails
is discarded and the facts read again. Everything ``nvidia-smi`` can set (power limit, application clocks, persistence,
compute, ECC and MIG modes, NVLink state) and the live readings are read on every call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from megacpp_env.snapshot.verify import cachefile

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
CACHE_FORMAT = 1
FIXED = ("name", "pci_bus_id", "cuda_capability", "num_gpu_cores", "multiprocessor_count", "max_clock_mhz",
         "pcie_max_link_gen", "pcie_max_link_width")  # fmt: skip
CLOCKS = {"graphics": "NVML_CLOCK_GRAPHICS", "sm": "NVML_CLOCK_SM", "memory": "NVML_CLOCK_MEM"}


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Reader:
    """NVML queries that answer None when a GPU or driver does not support them."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml

    def get(self, name: str, *args: Any) -> Any:
        fn: Callable[..., Any] | None = getattr(self.nvml, name, None)
        if fn is None:  # an older nvidia-ml-py without this call
            return None
        try:
            return fn(*args)
        except self.nvml.NVMLError:  # NotSupported, NoPermission, FunctionNotFound (older driver), ...
            return None

    def first(self, names: tuple[str, ...], *args: Any) -> Any:
        """The first of several spellings of one query that answers (NVML renames calls)."""
        for name in names:
            value = self.get(name, *args)
            if value is not None:
                return value
        return None

    def clocks(self, query: str, handle: Any, names: tuple[str, ...]) -> dict[str, int]:
        out = {}
        for name in names:
            value = self.get(query, handle, getattr(self.nvml, CLOCKS[name]))
            if value is not None:
                out[name] = int(value)
        return out

    def pair(self, query: str, handle: Any) -> list[int] | None:
        value = self.get(query, handle)
        return None if value is None else [int(value[0]), int(value[1])]

    def nvlink(self, handle: Any) -> list[dict[str, Any]]:
        """Every NVLink the GPU has (a link NVML refuses to describe does not exist on it)."""
        links = []
        for link in range(int(getattr(self.nvml, "NVML_NVLINK_MAX_LINKS", 18))):
            state = self.get("nvmlDeviceGetNvLinkState", handle, link)
            if state is None:
                continue
            entry: dict[str, Any] = {"active": bool(state)}
            if state:
                entry["version"] = self.get("nvmlDeviceGetNvLinkVersion", handle, link)
                entry["remote_type"] = self.get("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
            links.append(entry)
        return links


def read_fixed(r: Reader, handle: Any) -> dict[str, Any]:
    """The ``FIXED`` facts of one GPU: what it is, which no setting changes."""
    pci = r.get("nvmlDeviceGetPciInfo", handle)
    attrs = r.get("nvmlDeviceGetAttributes_v2", handle)  # NVML documents it for MIG handles only
    cap = r.get("nvmlDeviceGetCudaComputeCapability", handle)
    return {
        "name": text(r.nvml.nvmlDeviceGetName(handle)),
        "pci_bus_id": text(pci.busId) if pci is not None else None,
        "cuda_capability": [int(cap[0]), int(cap[1])] if cap is not None else None,
        "num_gpu_cores": r.get("nvmlDeviceGetNumGpuCores", handle),
        "multiprocessor_count": getattr(attrs, "multiprocessorCount", None),
        "max_clock_mhz": r.clocks("nvmlDeviceGetMaxClockInfo", handle, ("graphics", "sm", "memory")),
        "pcie_max_link_gen": r.get("nvmlDeviceGetMaxPcieLinkGeneration", handle),
        "pcie_max_link_width": r.get("nvmlDeviceGetMaxPcieLinkWidth", handle),
    }


def _configuration(r: Reader, handle: Any) -> dict[str, Any]:
    """What can be set without a new driver, a reboot or another GPU: read every time."""
    mem = r.get("nvmlDeviceGetMemoryInfo", handle)
    return {
        "memory_total_bytes": int(mem.total) if mem is not None else None,
        "memory_used_bytes": int(mem.used) if mem is not None else None,
        "power_limit_mw": r.get("nvmlDeviceGetEnforcedPowerLimit", handle),
        "power_default_limit_mw": r.get("nvmlDeviceGetPowerManagementDefaultLimit", handle),
        "applications_clock_mhz": r.clocks("nvmlDeviceGetApplicationsClock", handle, ("graphics", "memory")),
        "ecc_mode": r.pair("nvmlDeviceGetEccMode", handle),
        "mig_mode": r.pair("nvmlDeviceGetMigMode", handle),
        "persistence_mode": r.get("nvmlDeviceGetPersistenceMode", handle),
        "compute_mode": r.get("nvmlDeviceGetComputeMode", handle),
        "nvlink": r.nvlink(handle),
    }


def _live(r: Reader, handle: Any) -> dict[str, Any]:
    util = r.get("nvmlDeviceGetUtilizationRates", handle)
    reasons = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
    return {
        "clock_mhz": r.clocks("nvmlDeviceGetClockInfo", handle, ("graphics", "sm", "memory")),
        "temperature_c": r.get("nvmlDeviceGetTemperature", handle, getattr(r.nvml, "NVML_TEMPERATURE_GPU", 0)),
        "power_usage_mw": r.get("nvmlDeviceGetPowerUsage", handle),
        "utilization": {"gpu": int(util.gpu), "memory": int(util.memory)} if util is not None else None,
        "performance_state": r.get("nvmlDeviceGetPerformanceState", handle),
        "pcie_link_gen": r.get("nvmlDeviceGetCurrPcieLinkGeneration", handle),
        "pcie_link_width": r.get("nvmlDeviceGetCurrPcieLinkWidth", handle),
        "clocks_event_reasons": r.first(reasons, handle),
    }


def read_device(r: Reader, handle: Any, index: int, fixed: dict[str, Any] | None = None) -> dict[str, Any]:
    """One GPU's raw record; ``fixed`` (its ``FIXED`` facts from the cache) spares those queries."""
    uuid = text(r.nvml.nvmlDeviceGetUUID(handle))
    known = read_fixed(r, handle) if fixed is None else fixed
    raw = {"index": index, "uuid": uuid, **known, **_configuration(r, handle), **_live(r, handle)}
    return {k: v for k, v in raw.items() if v not in (None, {}, [])}


def read_topology(r: Reader, handles: list[Any]) -> dict[str, int]:
    """The PCIe common ancestor of every pair of GPUs (nvmlGpuTopologyLevel_t values)."""
    out = {}
    for i, a in enumerate(handles):
        for j in range(i + 1, len(handles)):
            level = r.get("nvmlDeviceGetTopologyCommonAncestor", a, handles[j])
            if level is not None:
                out[f"{i}-{j}"] = int(level)
    return out


def _boot_id(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii").strip() or None
    except (OSError, ValueError):
        return None


CACHE_LIMIT = 1 << 20


def _load_fixed(cache_file: Path, key: dict[str, Any], seal: bytes | None) -> dict[str, Any] | None:
    """The cached ``FIXED`` facts when the sealed file holds them for exactly ``key``, else None."""
    _found, stored = cachefile.read_json(str(cache_file), seal, CACHE_LIMIT)
    if not isinstance(stored, dict) or stored.get("key") != key or not isinstance(stored.get("fixed"), dict):
        return None
    fixed: dict[str, Any] = stored["fixed"]
    devices = fixed.get("devices")
    ok = isinstance(devices, list) and len(devices) == len(key["uuids"]) and all(_fixed_device(d) for d in devices)
    ok = ok and isinstance(fixed.get("topology"), dict) and all(type(v) is int for v in fixed["topology"].values())
    return (
        fixed
        if ok and (fixed.get("cuda_driver_version") is None or type(fixed["cuda_driver_version"]) is int)
        else None
    )


def _fixed_device(device: Any) -> bool:
    """A device's cached facts: only ``FIXED`` keys, plain values."""
    return isinstance(device, dict) and set(device) <= set(FIXED) and all(
        v is None
        or type(v) in (str, int, float)
        or (isinstance(v, list) and all(type(x) is int for x in v))
        or (isinstance(v, dict) and all(type(k) is str and type(x) is int for k, x in v.items()))
        for v in device.values()
    )  # fmt: skip


def read(
    nvml: Any, cache_file: Path | None = None, boot_id_file: Path = BOOT_ID, *, key: bytes | None = None
) -> dict[str, Any]:
    """The raw reading of every GPU NVML sees. Raises whatever ``nvmlInit`` raises (no library, no
    driver); the caller decides what that means. With ``cache_file``, the ``FIXED`` facts are read
    from it while the driver, the boot id and the GPUs' UUIDs match, and stored there otherwise."""
    nvml.nvmlInit()
    try:
        r = Reader(nvml)
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(nvml.nvmlDeviceGetCount()))]
        driver = text(nvml.nvmlSystemGetDriverVersion())
        boot = _boot_id(boot_id_file) if cache_file is not None else None
        cache_key = {"format": CACHE_FORMAT, "driver": driver, "boot_id": boot,
                     "uuids": [text(nvml.nvmlDeviceGetUUID(h)) for h in handles]}  # fmt: skip
        fixed = _load_fixed(cache_file, cache_key, key) if cache_file is not None and boot else None
        if fixed is None:
            cuda = r.get("nvmlSystemGetCudaDriverVersion")
            fixed = {
                "cuda_driver_version": int(cuda) if cuda is not None else None,
                "devices": [read_fixed(r, h) for h in handles],
                "topology": read_topology(r, handles),
            }
            if cache_file is not None and boot:  # an unwritable cache only costs the next snapshot the queries
                payload = json.dumps({"key": cache_key, "fixed": fixed}, sort_keys=True).encode()
                cachefile.write(str(cache_file), payload, key)
        return {
            "source": "nvml",
            "driver_version": driver,
            "cuda_driver_version": fixed["cuda_driver_version"],
            "devices": [read_device(r, h, i, fixed["devices"][i]) for i, h in enumerate(handles)],
            "topology": fixed["topology"],
        }
    finally:
        nvml.nvmlShutdown()
