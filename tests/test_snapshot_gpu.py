"""GPU facts: the FP32-cores-per-SM table, raw NVML-shaped readings (tests/data/gpu) and nvidia-smi's
CSV turned into hashed facts and live readings, and "no GPU" as a fact. The real NVML run is
benchmarks/gpu_facts_check.py on a GPU machine (no NVIDIA driver here)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from megacpp_env.snapshot.collectors import gpu, gpu_facts
from megacpp_env.snapshot.collectors.gpu_facts import CORES_PER_SM, SMI_MINIMAL, SMI_QUERY, parse_smi, sm_count, split
from megacpp_env.snapshot.diff import diff_snapshots
from megacpp_env.snapshot.document import Snapshot

DATA = Path(__file__).parent / "data" / "gpu"

# (GPU, compute capability, SMs, FP32 cores) as NVIDIA's architecture whitepapers and datasheets give them.
PUBLISHED = [
    ("Tesla P100", (6, 0), 56, 3584),
    ("Tesla V100", (7, 0), 80, 5120),
    ("Tesla T4", (7, 5), 40, 2560),
    ("A100", (8, 0), 108, 6912),
    ("A10", (8, 6), 72, 9216),
    ("GeForce RTX 3090", (8, 6), 82, 10496),
    ("Jetson AGX Orin 64GB", (8, 7), 16, 2048),
    ("L4", (8, 9), 58, 7424),
    ("GeForce RTX 4090", (8, 9), 128, 16384),
    ("H100 SXM5", (9, 0), 132, 16896),
    ("H100 PCIe", (9, 0), 114, 14592),
    ("GeForce RTX 5090", (12, 0), 170, 21760),
    ("GB10 (DGX Spark)", (12, 1), 48, 6144),
]


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


@pytest.mark.parametrize(("gpu_name", "cap", "sms", "cores"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_cores_per_sm_gives_the_published_sm_count(gpu_name, cap, sms, cores):
    assert CORES_PER_SM[cap] * sms == cores
    assert sm_count(cores, cap) == sms


def test_a100_has_108_sms_not_54():
    """The old table was keyed by the major version only (8 -> 128): an A100 came out at 54 SMs."""
    assert sm_count(6912, [8, 0]) == 108
    assert 6912 // {7: 64, 8: 128, 9: 128}[8] == 54  # what the old table said


def test_sm_count_prefers_what_nvml_reports_and_never_guesses():
    assert sm_count(16896, [9, 0], reported=132) == 132
    assert sm_count(6912, [8, 0], reported=98) == 98  # a MIG slice reports its own count
    assert sm_count(16896, [13, 0]) is None  # a capability the table does not know
    assert sm_count(1000, [9, 0]) is None  # not a whole number of SMs
    assert sm_count(None, [9, 0]) is None and sm_count(16896, None) is None


def test_every_table_entry_is_a_known_fp32_width():
    assert set(CORES_PER_SM.values()) == {64, 128, 192}
    assert all(CORES_PER_SM[(major, minor)] == 64 for major, minor in [(6, 0), (7, 0), (7, 2), (7, 5), (8, 0)])


def test_hgx_h100_facts_and_live_readings():
    facts, live = split(load("nvml-hgx-h100x8.json"))
    assert (facts["present"], facts["source"], facts["driver_version"], facts["cuda_driver_api"]) == (
        True, "nvml", "580.95.05", "13.0",
    )  # fmt: skip
    dev = facts["devices"][5]
    assert dev == {
        "index": 5,
        "name": "NVIDIA H100 80GB HBM3",
        "compute_capability": "9.0",
        "sm_count": 132,
        "memory_total_mib": 81559,
        "uuid_hash": gpu_facts.hash_uuid("GPU-5f1d3a9c-0000-4000-8000-000000000005"),
        "power_limit_w": 700.0,
        "power_default_limit_w": 700.0,
        "clocks_applications_mhz": {"graphics": 1980, "memory": 2619},
        "clocks_max_mhz": {"graphics": 1980, "sm": 1980, "memory": 2619},
        "ecc": {"current": True, "pending": True},
        "mig": {"current": False, "pending": False},
        "persistence_mode": True,
        "compute_mode": "default",
        "pcie": {"max_gen": 5, "max_width": 16},
        "nvlink": {"links": 18, "active": 18, "versions": [4], "remote": {"switch": 18}},
        "numa_node": 1,
    }
    assert "5f1d3a9c" not in json.dumps(facts)  # UUIDs are hashed, never recorded
    assert facts["topology"]["0-3"] == "NODE" and facts["topology"]["3-4"] == "SYS" and len(facts["topology"]) == 28
    assert live["devices"][5] == {
        "index": 5,
        "clocks_mhz": {"graphics": 345, "sm": 345, "memory": 2619},
        "temperature_c": 36,
        "power_draw_w": 71.2,
        "utilization_pct": {"gpu": 0, "memory": 0},
        "memory_used_mib": 528,
        "pstate": "P0",
        "pcie": {"gen": 5, "width": 16},
        "clocks_event_reasons": ["gpu_idle"],
    }


def test_a100_mig_pending_exclusive_mode_and_unknown_reason_bits():
    facts, live = split(load("nvml-a100-sxm4.json"))
    (dev,) = facts["devices"]
    assert (dev["sm_count"], dev["mig"], dev["compute_mode"], dev["persistence_mode"]) == (
        108, {"current": False, "pending": True}, "exclusive-process", False,
    )  # fmt: skip
    assert dev["nvlink"] == {"links": 12, "active": 12, "versions": [3], "remote": {"switch": 12}}
    assert live["devices"][0]["clocks_event_reasons"] == ["gpu_idle", "sw_power_cap", "0x10000"]


def _snapshot(raw: dict) -> Snapshot:
    facts, live = split(raw)
    return Snapshot(facts={"gpu": facts}, live={"gpu": live})


def test_live_readings_never_change_the_digest_configuration_does():
    raw = load("nvml-hgx-h100x8.json")
    hot = copy.deepcopy(raw)
    for d in hot["devices"]:
        d.update(temperature_c=83, power_usage_mw=690000, clock_mhz={"graphics": 1755, "sm": 1755, "memory": 2619})
        d.update(utilization={"gpu": 100, "memory": 61}, memory_used_bytes=80 << 30, clocks_event_reasons=0x4)
        d.update(pcie_link_gen=1, performance_state=2)
    capped = copy.deepcopy(raw)
    capped["devices"][3]["power_limit_mw"] = 500000
    base = _snapshot(raw)
    assert _snapshot(hot).digest == base.digest
    assert _snapshot(capped).digest != base.digest
    assert diff_snapshots(base, _snapshot(hot)).findings == ()  # readings of the moment: no drift, no noise
    (finding,) = diff_snapshots(base, _snapshot(capped)).findings
    assert (finding.severity, finding.key, finding.message) == (
        "warning",
        "gpu.devices.3.power_limit_w",
        "gpu 3 (NVIDIA H100 80GB HBM3): power_limit_w: 700.0 -> 500.0",
    )


def test_a_gpu_that_disappears_is_one_finding():
    raw = load("nvml-hgx-h100x8.json")
    fewer = copy.deepcopy(raw)
    fewer["devices"] = fewer["devices"][:7]
    fewer["topology"] = {k: v for k, v in raw["topology"].items() if "7" not in k}
    report = diff_snapshots(_snapshot(raw), _snapshot(fewer))
    assert [f.message for f in report.findings if f.key == "gpu.devices.7"] == ["gpu 7: NVIDIA H100 80GB HBM3 is gone"]


# ---- nvidia-smi ---------------------------------------------------------------------------------

SMI_ROW = (
    "0, NVIDIA H100 80GB HBM3, GPU-5f1d3a9c-0000-4000-8000-000000000000, 00000000:18:00.0, 9.0, 580.95.05, "
    "81559, 528, 700.00, 700.00, 71.23, 1980, 2619, 1980, 1980, 2619, 345, 345, 2619, Enabled, Enabled, "
    "Disabled, Disabled, Enabled, Default, 5, 16, 5, 16, 31, 0, 0, P0"
)


def test_smi_fields_are_nvidia_smi_query_names():
    fields = [f for f, _key, _kind in SMI_QUERY]
    assert len(fields) == len(set(fields)) == len(SMI_ROW.split(", "))
    assert set(SMI_MINIMAL) <= set(fields)


def test_nvidia_smi_gives_the_same_facts_nvml_does_where_it_can():
    raw = parse_smi(SMI_ROW + "\n", [f for f, _key, _kind in SMI_QUERY])
    facts, live = split(raw)
    nvml_dev = split(load("nvml-hgx-h100x8.json"))[0]["devices"][0]
    (dev,) = facts["devices"]
    not_in_smi = {"sm_count", "nvlink", "numa_node"}  # no core count, no NVLink in --query-gpu; numa from sysfs
    assert dev == {k: v for k, v in nvml_dev.items() if k not in not_in_smi}
    assert (facts["source"], facts["driver_version"]) == ("nvidia-smi", "580.95.05")
    assert live["devices"][0]["power_draw_w"] == 71.2 and live["devices"][0]["pstate"] == "P0"


def test_nvidia_smi_not_available_and_minimal_fields():
    row = "1, NVIDIA H200, GPU-0a1b2c3d-aaaa-bbbb-cccc-000000000001, 9.0, 143771, 580.159.04\n"
    facts, _live = split(parse_smi(row, SMI_MINIMAL))
    assert facts["driver_version"] == "580.159.04"
    (dev,) = facts["devices"]
    assert (dev["index"], dev["name"], dev["compute_capability"], dev["memory_total_mib"]) == (1, "NVIDIA H200", "9.0", 143771)
    assert dev["uuid_hash"].startswith("sha256:") and "0a1b2c3d" not in dev["uuid_hash"]
    na = SMI_ROW.replace("700.00, 700.00", "[N/A], [Not Supported]").replace("Disabled, Disabled", "[N/A], [N/A]")
    (dev,) = split(parse_smi(na, [f for f, _key, _kind in SMI_QUERY]))[0]["devices"]
    assert "power_limit_w" not in dev and "power_default_limit_w" not in dev and "mig" not in dev


# ---- the machine (no driver here: tests/test_snapshot_collectors.py checks that it is a fact) ---


def test_numa_node_of_a_pci_device(tmp_path):
    assert gpu.sysfs_bus_id("00000000:B8:00.0") == "0000:b8:00.0"
    assert gpu.sysfs_bus_id("0001:07:00.0") == "0001:07:00.0"
    for bus, node in (("0000:18:00.0", "1\n"), ("0000:19:00.0", "-1\n")):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "numa_node").write_text(node)
    assert gpu.numa_node("00000000:18:00.0", tmp_path) == 1
    assert gpu.numa_node("00000000:19:00.0", tmp_path) is None  # -1: the kernel does not know
    assert gpu.numa_node("00000000:20:00.0", tmp_path) is None and gpu.numa_node(None, tmp_path) is None
    real = sorted(gpu.PCI_DEVICES.iterdir())[0].name  # this machine's first PCI device
    value = (gpu.PCI_DEVICES / real / "numa_node").read_text().strip()
    assert gpu.numa_node(real) == (int(value) if int(value) >= 0 else None)


def test_summary_groups_gpus_by_model_and_setting():
    from megacpp_env.snapshot.report import render_summary

    raw = load("nvml-hgx-h100x8.json")
    raw["devices"][7]["power_limit_mw"] = 500000
    facts, live = split(raw)
    text = render_summary(Snapshot(facts={"gpu": facts}, live={"gpu": live}))
    assert "  gpu: 7 x NVIDIA H100 80GB HBM3 (132 SMs, 700 W), NVIDIA H100 80GB HBM3 (132 SMs, 500 W)\n" in text
