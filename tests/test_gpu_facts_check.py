"""benchmarks/gpu_facts_check.py, the GPU-machine check: it runs with the standard library and the
repository only, says why when there is nothing to check, and its comparisons catch disagreements
(on NVML-shaped readings; the real run is on the GPU machine)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

from megacpp_env.snapshot.collectors.gpu_facts import SMI_QUERY, parse_smi
from tests.conftest import REPO_ROOT
from tests.test_snapshot_gpu import SMI_ROW

SCRIPT = REPO_ROOT / "benchmarks" / "gpu_facts_check.py"
HGX = json.loads((Path(__file__).parent / "data" / "gpu" / "nvml-hgx-h100x8.json").read_text())


def _module():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import gpu_facts_check
    finally:
        sys.path.pop(0)
    return gpu_facts_check


def test_runs_with_the_standard_library_only(tmp_path):
    """-I -S: no site-packages (no nvidia-ml-py, no jinja2/yaml/packaging), no PYTHONPATH, another cwd."""
    proc = subprocess.run(
        [sys.executable, "-I", "-S", str(SCRIPT), "--json"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2, proc.stderr
    out = json.loads(proc.stdout)
    assert out["verdict"] == "nothing to check: NVML did not answer"
    assert out["nvml_error"] == "ModuleNotFoundError: No module named 'pynvml'"
    assert out["machine"]["system"]["cpu_flags"] and "runtime" in out["machine"]["container"]


def test_with_nvidia_ml_py_and_no_driver_nvml_says_why(tmp_path):
    proc = subprocess.run([sys.executable, str(SCRIPT), "--json"], cwd=tmp_path, capture_output=True, text=True, check=False)
    out = json.loads(proc.stdout)
    assert proc.returncode == 2 and out["nvml_error"].startswith("NVMLError_LibraryNotFound")


def test_sm_counts_are_checked_against_the_cuda_driver():
    check = _module()
    cuda = {check.bus(d["pci_bus_id"]): 132 for d in HGX["devices"]}
    rows = check.sm_rows(HGX, cuda)
    assert all(r["agree"] and r["sm_count_table"] == 132 and r["cores_per_sm"] == 128 for r in rows)
    cuda[check.bus(HGX["devices"][2]["pci_bus_id"])] = 66  # what a wrong table would disagree with
    assert [r["index"] for r in check.sm_rows(HGX, cuda) if not r["agree"]] == [2]


def test_nvml_and_nvidia_smi_disagreements_are_named():
    check = _module()
    one = copy.deepcopy(HGX)
    one["devices"], one["topology"] = one["devices"][:1], {}
    fields = [f for f, _key, _kind in SMI_QUERY]
    assert check.compare_sources(one, parse_smi(SMI_ROW, fields)) == []
    capped = parse_smi(SMI_ROW.replace("700.00, 700.00", "500.00, 700.00"), fields)
    assert check.compare_sources(one, capped) == ["gpu 0: power_limit_w: nvml 700.0 != nvidia-smi 500.0"]
    fewer = [f for f in fields if f != "mig.mode.pending"]
    short = parse_smi(SMI_ROW.replace("Disabled, Disabled", "Disabled"), fewer)
    assert check.compare_sources(one, short) == ["gpu 0: mig: nvml {'current': False, 'pending': False} != nvidia-smi {'current': False}"]


def test_dump_is_anonymised():
    dumped = _module().anonymised(HGX)
    assert "5f1d3a9c" not in json.dumps(dumped) and dumped["devices"][3]["uuid"].endswith("000000000003")
    assert HGX["devices"][3]["uuid"].startswith("GPU-5f1d3a9c")  # the input is not changed
