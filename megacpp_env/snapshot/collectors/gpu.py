"""NVIDIA driver and GPUs: NVML by default (nvidia-ml-py, a dependency; imported when a snapshot
runs), ``nvidia-smi`` when NVML cannot be used. Both give a raw reading that ``gpu_facts.split``
turns into hashed facts (what the GPUs are and how they are configured) and live readings.

A machine with neither an NVIDIA driver library nor nvidia-smi has no GPU to report: that is a fact
(``present: false`` with the reason), not a failed collector. Any other failure (a driver that does
not answer, a broken nvidia-smi) is an ``error``. GPU UUIDs are hashed, never recorded raw.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.errors import ToolError, ToolNotFoundError
from megacpp_env.snapshot.collectors import gpu_facts, nvml_child
from megacpp_env.snapshot.parts import Parts
from megacpp_env.snapshot.proc import run_program

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context
    from megacpp_env.snapshot.options import Cache

hash_uuid = gpu_facts.hash_uuid  # kept importable from here
# NVML's answers when the driver's library is absent or not loaded: no NVIDIA GPU on this machine.
NO_DRIVER_ERRORS = frozenset({"NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded"})
NO_DRIVER = "no NVIDIA driver on this machine (no loadable libnvidia-ml, no nvidia-smi on PATH)"
NO_DEVICE = "the NVIDIA driver reports no GPU"
PCI_DEVICES = Path("/sys/bus/pci/devices")


def sysfs_bus_id(bus_id: str) -> str:
    """NVML's ``00000000:18:00.0`` as sysfs spells it: ``0000:18:00.0`` (4-digit domain, lower case)."""
    domain, _, rest = bus_id.strip().lower().partition(":")
    return f"{domain[-4:].rjust(4, '0')}:{rest}"


def numa_node(bus_id: str | None, devices: Path = PCI_DEVICES) -> int | None:
    """The NUMA node the kernel puts the GPU's PCI device on; None when unknown (-1 in sysfs)."""
    if not bus_id:
        return None
    try:
        node = int((devices / sysfs_bus_id(bus_id) / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


NVML_CACHE = "nvml-fixed.json"  # in the hash cache directory: the GPUs' facts no setting changes (nvml.FIXED)


APART_TIMEOUT = 20.0


class ApartFailedError(Exception):
    """The separate process gave no answer (not an NVML error): read in this process instead."""


def read_apart(cache: Cache | None, child: subprocess.Popen[str] | None = None) -> dict[str, Any]:
    """``nvml.read`` in a child interpreter (``nvml_child``: the one the plan launched, or a new
    one): importing pynvml (~0.1 s of Python on the H200) would hold this process's GIL, which the
    snapshot's critical path needs. NVML's own errors are raised here again under their class
    names (``NO_DRIVER_ERRORS`` is by name); a child that could not load megacpp-env's reader is
    no answer (``ApartFailedError``: read here instead), never "nvidia-ml-py not installed"."""
    try:
        proc = child or nvml_child.spawn()
    except OSError as exc:
        raise ApartFailedError(str(exc)) from None
    ask = {"cache_file": str(cache.file(NVML_CACHE)) if cache else "", "key": cache.key.hex() if cache else ""}
    try:
        out, _err = proc.communicate(json.dumps(ask) + "\n", timeout=APART_TIMEOUT)
        data = json.loads(out)
    except subprocess.TimeoutExpired:
        nvml_child.reap(proc)
        raise ApartFailedError(f"no reading in {APART_TIMEOUT:g}s") from None
    except (OSError, ValueError) as exc:
        raise ApartFailedError(str(exc)) from None
    if not isinstance(data, dict):
        raise ApartFailedError("no reading")
    if data.get("tool_error"):
        raise ApartFailedError(f"the child could not load megacpp-env's NVML reader: {data['tool_error']}")
    if "raw" in data and isinstance(data["raw"], dict):
        raw: dict[str, Any] = data["raw"]
        return raw
    if data.get("import_error"):  # under its own class: ModuleNotFoundError stays itself
        cls = ModuleNotFoundError if data.get("error_type") == "ModuleNotFoundError" else ImportError
        raise cls(str(data.get("error", "")))
    raise type(str(data.get("error_type") or "NVMLError"), (Exception,), {})(str(data.get("error", "")))


def read_nvml(cache: Cache | None = None, child: subprocess.Popen[str] | None = None) -> dict[str, Any]:
    """NVML's reading: in a process of its own (``read_apart``) unless pynvml is already imported
    here (a caller's, or a test's stand-in) or that process gives no answer."""
    if "pynvml" not in sys.modules:
        try:
            return read_apart(cache, child)
        except ApartFailedError:
            pass
    elif child is not None:
        nvml_child.reap(child)
    import pynvml  # loads libnvidia-ml.so.1 on nvmlInit

    from megacpp_env.snapshot.collectors import nvml

    return nvml.read(pynvml, cache.file(NVML_CACHE) if cache else None, key=cache.key if cache else None)


def read_smi() -> dict[str, Any]:
    """``nvidia-smi --query-gpu`` with every field of ``gpu_facts.SMI_QUERY``; an nvidia-smi too old
    to know one of them is asked again for the few fields every version has."""
    full = [field for field, _key, _kind in gpu_facts.SMI_QUERY]
    try:
        return gpu_facts.parse_smi(_smi(full), full)
    except ToolNotFoundError:
        raise
    except ToolError as exc:
        if "not a valid field" not in str(exc):
            raise
    return gpu_facts.parse_smi(_smi(list(gpu_facts.SMI_MINIMAL)), gpu_facts.SMI_MINIMAL)


def _smi(fields: list[str]) -> str:
    argv = ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]
    return run_program(argv, timeout=15.0).stdout


def finish(raw: dict[str, Any], *, nvml_error: str = "") -> Parts:
    """The snapshot's parts of a raw reading, each GPU's NUMA node added from sysfs."""
    for device in raw.get("devices") or []:
        device.setdefault("numa_node", numa_node(device.get("pci_bus_id")))
    facts, live = gpu_facts.split(raw)
    if not facts.get("devices"):
        facts["reason"] = NO_DEVICE
    if nvml_error:
        live["nvml_error"] = nvml_error
    return Parts(facts=facts, live=live)


def collect(cache: Cache | None = None, child: subprocess.Popen[str] | None = None) -> Parts:
    """NVML, else nvidia-smi (see the module docstring for what no GPU and a failure record)."""
    try:
        return finish(read_nvml(cache, child))
    except ImportError:
        reason, no_driver = "nvml: nvidia-ml-py not installed", True
    except Exception as exc:  # NVMLError subclasses vary by version; any failure falls back
        reason = f"nvml: {str(exc) or type(exc).__name__}"
        no_driver = type(exc).__name__ in NO_DRIVER_ERRORS
    try:
        raw = read_smi()
    except ToolNotFoundError as exc:
        if no_driver:
            return Parts(facts={"present": False, "devices": [], "reason": NO_DRIVER}, live={})
        return Parts(facts={"error": f"{reason}; {exc}", "devices": []}, live={})
    except ToolError as exc:
        return Parts(facts={"error": f"{reason}; {exc}", "devices": []}, live={})
    return finish(raw, nvml_error=reason)


def start(ctx: Context) -> Callable[[], Parts]:
    return lambda: collect(ctx.plan.cache, ctx.started.take_nvml())
