"""Read NVML (``pynvml`` from nvidia-ml-py) into a raw machine reading: plain values in NVML's
units, one record per GPU (see ``gpu_facts``, which turns it into snapshot facts). The only module
that calls NVML. A query the GPU or driver does not support leaves its key out; only NVML itself
failing (no library, no driver) raises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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


def _identity(r: Reader, handle: Any, index: int) -> dict[str, Any]:
    nvml = r.nvml
    pci = r.get("nvmlDeviceGetPciInfo", handle)
    mem = r.get("nvmlDeviceGetMemoryInfo", handle)
    attrs = r.get("nvmlDeviceGetAttributes_v2", handle)  # NVML documents it for MIG handles only
    cap = r.get("nvmlDeviceGetCudaComputeCapability", handle)
    return {
        "index": index,
        "name": text(nvml.nvmlDeviceGetName(handle)),
        "uuid": text(nvml.nvmlDeviceGetUUID(handle)),
        "pci_bus_id": text(pci.busId) if pci is not None else None,
        "cuda_capability": [int(cap[0]), int(cap[1])] if cap is not None else None,
        "memory_total_bytes": int(mem.total) if mem is not None else None,
        "memory_used_bytes": int(mem.used) if mem is not None else None,
        "num_gpu_cores": r.get("nvmlDeviceGetNumGpuCores", handle),
        "multiprocessor_count": getattr(attrs, "multiprocessorCount", None),
    }


def _configuration(r: Reader, handle: Any) -> dict[str, Any]:
    return {
        "power_limit_mw": r.get("nvmlDeviceGetEnforcedPowerLimit", handle),
        "power_default_limit_mw": r.get("nvmlDeviceGetPowerManagementDefaultLimit", handle),
        "applications_clock_mhz": r.clocks("nvmlDeviceGetApplicationsClock", handle, ("graphics", "memory")),
        "max_clock_mhz": r.clocks("nvmlDeviceGetMaxClockInfo", handle, ("graphics", "sm", "memory")),
        "ecc_mode": r.pair("nvmlDeviceGetEccMode", handle),
        "mig_mode": r.pair("nvmlDeviceGetMigMode", handle),
        "persistence_mode": r.get("nvmlDeviceGetPersistenceMode", handle),
        "compute_mode": r.get("nvmlDeviceGetComputeMode", handle),
        "pcie_max_link_gen": r.get("nvmlDeviceGetMaxPcieLinkGeneration", handle),
        "pcie_max_link_width": r.get("nvmlDeviceGetMaxPcieLinkWidth", handle),
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


def read_device(r: Reader, handle: Any, index: int) -> dict[str, Any]:
    raw = {**_identity(r, handle, index), **_configuration(r, handle), **_live(r, handle)}
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


def read(nvml: Any) -> dict[str, Any]:
    """The raw reading of every GPU NVML sees. Raises whatever ``nvmlInit`` raises (no library, no
    driver); the caller decides what that means."""
    nvml.nvmlInit()
    try:
        r = Reader(nvml)
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(nvml.nvmlDeviceGetCount()))]
        cuda = r.get("nvmlSystemGetCudaDriverVersion")
        return {
            "source": "nvml",
            "driver_version": text(nvml.nvmlSystemGetDriverVersion()),
            "cuda_driver_version": int(cuda) if cuda is not None else None,
            "devices": [read_device(r, h, i) for i, h in enumerate(handles)],
            "topology": read_topology(r, handles),
        }
    finally:
        nvml.nvmlShutdown()
