"""NVIDIA driver and GPUs through NVML (nvidia-ml-py, imported lazily), falling back to nvidia-smi.

GPU UUIDs are hashed, never recorded raw. SM count comes from NVML's core count divided by the
cores per SM of the architecture (NVML has no direct SM query); 0 when unknown.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from megacpp_env.errors import ToolError, ToolNotFoundError
from megacpp_env.snapshot.proc import run_program

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context

# compute capability major -> CUDA cores per SM
CORES_PER_SM = {7: 64, 8: 128, 9: 128, 10: 128, 11: 128, 12: 128}
SMI_FIELDS = "name,uuid,compute_cap,memory.total,driver_version"
# NVML's answers when the driver's library is absent or not loaded: no NVIDIA GPU on this machine.
NO_DRIVER_ERRORS = frozenset({"NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded"})
NO_DRIVER = "no NVIDIA driver on this machine (no loadable libnvidia-ml, no nvidia-smi on PATH)"


def hash_uuid(uuid: str) -> str:
    return "sha256:" + hashlib.sha256(b"megacpp-env/gpu-uuid\0" + uuid.encode()).hexdigest()[:16]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_device(nvml: Any, index: int) -> dict[str, Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
    mem = nvml.nvmlDeviceGetMemoryInfo(handle)
    sm_count = 0
    try:
        cores = int(nvml.nvmlDeviceGetNumGpuCores(handle))
        sm_count = cores // CORES_PER_SM.get(int(major), 128)
    except (nvml.NVMLError, AttributeError):
        pass
    return {
        "index": index,
        "name": _text(nvml.nvmlDeviceGetName(handle)),
        "compute_capability": f"{major}.{minor}",
        "sm_count": sm_count,
        "memory_total_mib": int(mem.total) // (1 << 20),
        "uuid_hash": hash_uuid(_text(nvml.nvmlDeviceGetUUID(handle))),
    }


def collect_nvml() -> dict[str, Any]:
    import pynvml as nvml  # lazy: an optional dependency, and it loads libnvidia-ml

    nvml.nvmlInit()
    try:
        cuda = int(nvml.nvmlSystemGetCudaDriverVersion())
        return {
            "source": "nvml",
            "driver_version": _text(nvml.nvmlSystemGetDriverVersion()),
            "cuda_driver_api": f"{cuda // 1000}.{cuda % 1000 // 10}",
            "devices": [_nvml_device(nvml, i) for i in range(int(nvml.nvmlDeviceGetCount()))],
        }
    finally:
        nvml.nvmlShutdown()


def parse_smi(text: str) -> dict[str, Any]:
    devices: list[dict[str, Any]] = []
    driver = ""
    for index, line in enumerate(row for row in text.splitlines() if row.strip()):
        name, uuid, cap, mem, driver = (f.strip() for f in line.split(","))
        devices.append(
            {
                "index": index,
                "name": name,
                "compute_capability": cap,
                "sm_count": 0,
                "memory_total_mib": int(float(mem)) if mem.replace(".", "").isdigit() else 0,
                "uuid_hash": hash_uuid(uuid),
            }
        )
    return {"source": "nvidia-smi", "driver_version": driver, "devices": devices}


def collect_smi() -> dict[str, Any]:
    argv = ["nvidia-smi", f"--query-gpu={SMI_FIELDS}", "--format=csv,noheader,nounits"]
    return parse_smi(run_program(argv, timeout=15.0).stdout)


def collect() -> dict[str, Any]:
    """NVML, else nvidia-smi. A machine with neither an NVIDIA driver library nor nvidia-smi has no
    GPU to report: that is a fact (``present: false``), not a failed collector. Any other failure
    (a driver that does not answer, a broken nvidia-smi) is an ``error``."""
    reasons: list[str] = []
    no_driver = False
    try:
        return collect_nvml()
    except ImportError:
        reasons.append("nvml: nvidia-ml-py not installed")
        no_driver = True
    except Exception as exc:  # NVMLError subclasses vary by version; any failure falls back
        reasons.append(f"nvml: {_text(exc) or type(exc).__name__}")
        no_driver = type(exc).__name__ in NO_DRIVER_ERRORS
    try:
        out = collect_smi()
    except ToolNotFoundError as exc:
        if no_driver:
            return {"present": False, "devices": [], "reason": NO_DRIVER}
        return {"error": "; ".join([*reasons, str(exc)]), "devices": []}
    except ToolError as exc:
        return {"error": "; ".join([*reasons, str(exc)]), "devices": []}
    out["nvml_error"] = "; ".join(reasons)
    return out


def start(ctx: Context) -> Callable[[], dict[str, Any]]:
    return collect
