"""Check the snapshot's GPU facts on a GPU machine: SM counts, NVML against nvidia-smi, new fields.

    python benchmarks/gpu_facts_check.py [--json] [--dump-raw FILE]

Runs with the repository, the standard library and nvidia-ml-py only (no network, nothing else
installed: ``PYTHONPATH=. python benchmarks/gpu_facts_check.py`` from the repository root works).

1. SM count, per GPU, three ways: the snapshot's (NVML's CUDA core count / the FP32-cores-per-SM
   table of ``megacpp_env/snapshot/collectors/gpu_facts.py``), NVML's own ``multiprocessorCount``
   (``nvmlDeviceGetAttributes_v2``; NVML documents it for MIG devices only) and the CUDA driver's
   ``CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT`` (libcuda.so.1 through ctypes; the reference),
   matched by PCI bus id.
2. The facts NVML and the nvidia-smi fallback give, field by field, where both have one (same
   driver, same moment: they must agree; a field nvidia-smi does not know shows up here).
3. The new snapshot fields: per-GPU facts and live readings, topology, CPU, NUMA, scheduler and
   container, as the snapshot records them, and how long NVML and nvidia-smi took.

Exit status: 0 every check agrees, 1 a check disagrees, 2 nothing to check (no NVIDIA GPU or NVML).
``--dump-raw FILE`` writes NVML's raw reading (UUIDs replaced) in the shape of tests/data/gpu/*.json.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from megacpp_env.snapshot.collectors import container, gpu, gpu_facts, scheduler, system

CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16


def timed(fn: Any) -> tuple[Any, float, str]:
    """(result, milliseconds, error)."""
    start = time.perf_counter()
    try:
        return fn(), round((time.perf_counter() - start) * 1000, 1), ""
    except Exception as exc:  # ImportError, ToolError, OSError, NVMLError: each is a finding, not a crash
        return None, round((time.perf_counter() - start) * 1000, 1), f"{type(exc).__name__}: {exc}"


def bus(bus_id: str) -> str:
    return gpu.sysfs_bus_id(bus_id)


def cuda_sm_counts() -> tuple[dict[str, int], str]:
    """PCI bus id -> SMs, as the CUDA driver reports them (the reference)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return {}, f"libcuda.so.1: {exc}"
    if (rc := cuda.cuInit(0)) != 0:
        return {}, f"cuInit: CUresult {rc}"
    count = ctypes.c_int()
    cuda.cuDeviceGetCount(ctypes.byref(count))
    out = {}
    for ordinal in range(count.value):
        dev, sms, pci = ctypes.c_int(), ctypes.c_int(), ctypes.create_string_buffer(64)
        cuda.cuDeviceGet(ctypes.byref(dev), ordinal)
        cuda.cuDeviceGetAttribute(ctypes.byref(sms), CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev)
        cuda.cuDeviceGetPCIBusId(pci, len(pci), dev)
        out[bus(pci.value.decode())] = sms.value
    return out, ""


def sm_rows(raw: dict[str, Any], cuda: dict[str, int]) -> list[dict[str, Any]]:
    rows = []
    for d in raw.get("devices") or []:
        cap = d.get("cuda_capability")
        per_sm = gpu_facts.CORES_PER_SM.get(tuple(cap)) if cap else None
        table = gpu_facts.sm_count(d.get("num_gpu_cores"), cap)
        reference = cuda.get(bus(d.get("pci_bus_id", "")))
        rows.append({
            "index": d["index"], "name": d.get("name"), "compute_capability": cap, "nvml_cores": d.get("num_gpu_cores"),
            "cores_per_sm": per_sm, "sm_count_table": table, "sm_count_nvml": d.get("multiprocessor_count"),
            "sm_count_cuda": reference, "agree": reference is None or table == reference,
        })  # fmt: skip
    return rows


def compare_sources(nvml: dict[str, Any], smi: dict[str, Any]) -> list[str]:
    """Fields where NVML's and nvidia-smi's facts disagree (live readings are not compared)."""
    out = []
    a, b = gpu_facts.split(nvml)[0], gpu_facts.split(smi)[0]
    if a.get("driver_version") != b.get("driver_version"):
        out.append(f"driver_version: nvml {a.get('driver_version')} != nvidia-smi {b.get('driver_version')}")
    for x, y in zip(a.get("devices") or [], b.get("devices") or [], strict=False):
        for key in sorted(set(x) & set(y)):
            if x[key] != y[key]:
                out.append(f"gpu {x['index']}: {key}: nvml {x[key]} != nvidia-smi {y[key]}")
        missing = sorted(set(x) - set(y) - {"sm_count", "nvlink", "numa_node"})
        if missing:
            out.append(f"gpu {x['index']}: nvidia-smi lacks {', '.join(missing)}")
    return out


def anonymised(raw: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(raw))
    for d in out.get("devices") or []:
        d["uuid"] = f"GPU-00000000-0000-4000-8000-{d['index']:012d}"
    return out


def machine() -> dict[str, Any]:
    sched = scheduler.split(dict(os.environ))
    parts = system.collect()
    return {"system": parts.facts, "system_live": parts.live, "scheduler": sched.facts,
            "scheduler_live": sched.live, "container": container.collect(os.environ)}  # fmt: skip


def report(args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    nvml_raw, nvml_ms, nvml_err = timed(gpu.read_nvml)
    smi_raw, smi_ms, smi_err = timed(gpu.read_smi)
    cuda, cuda_err = cuda_sm_counts()
    out: dict[str, Any] = {"nvml_ms": nvml_ms, "nvml_error": nvml_err, "nvidia_smi_ms": smi_ms,
                           "nvidia_smi_error": smi_err, "cuda_error": cuda_err, "machine": machine()}  # fmt: skip
    if nvml_raw is None:
        out["verdict"] = "nothing to check: NVML did not answer"
        return out, 2
    if args.dump_raw:
        args.dump_raw.write_text(json.dumps(anonymised(nvml_raw), indent=1, sort_keys=True) + "\n")
    parts = gpu.finish(nvml_raw)
    out |= {"gpu_facts": parts.facts, "gpu_live": parts.live, "sm_counts": sm_rows(nvml_raw, cuda)}
    out["nvml_vs_nvidia_smi"] = compare_sources(nvml_raw, smi_raw) if smi_raw else [f"nvidia-smi: {smi_err}"]
    bad = [r for r in out["sm_counts"] if not r["agree"]] + out["nvml_vs_nvidia_smi"]
    out["verdict"] = "disagreements: see sm_counts and nvml_vs_nvidia_smi" if bad else "all checks agree"
    return out, 1 if bad else 0


def print_text(out: dict[str, Any]) -> None:
    print(
        f"NVML: {out['nvml_ms']} ms {out['nvml_error']}; nvidia-smi: {out['nvidia_smi_ms']} ms {out['nvidia_smi_error']}"
    )
    if out["cuda_error"]:
        print(f"CUDA driver (reference SM counts): {out['cuda_error']}")
    for r in out.get("sm_counts", []):
        flag = "ok" if r["agree"] else "MISMATCH"
        print(f"gpu {r['index']} {r['name']} cc {r['compute_capability']}: {r['nvml_cores']} cores / "
              f"{r['cores_per_sm']} = {r['sm_count_table']} SMs; NVML attributes {r['sm_count_nvml']}; "
              f"CUDA {r['sm_count_cuda']}: {flag}")  # fmt: skip
    for line in out.get("nvml_vs_nvidia_smi", []):
        print(f"nvml vs nvidia-smi: {line}")
    for key in ("gpu_facts", "gpu_live", "machine"):
        if key in out:
            print(f"--- {key}\n{json.dumps(out[key], indent=2, sort_keys=True)}")
    print(out["verdict"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--dump-raw", type=Path, metavar="FILE", help="write NVML's raw reading (UUIDs replaced)")
    args = parser.parse_args()
    out, code = report(args)
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
    else:
        print_text(out)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
