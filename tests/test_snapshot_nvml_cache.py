"""The NVML facts cache (``snapshot.nvml.read`` with a cache file), through a fake ``pynvml`` that
answers from a recorded reading (tests/data/gpu): a cache hit skips the fixed queries and gives the
same reading; a new driver, boot id or UUID reads them again; a setting changed the way
``nvidia-smi`` changes it (power limit, application clocks, persistence, compute mode) is seen on
the next read without any change to the cache key."""

from __future__ import annotations

import collections
import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from megacpp_env.snapshot.collectors import gpu, nvml
from megacpp_env.snapshot.options import Cache

DATA = Path(__file__).parent / "data" / "gpu"
CLOCK = {1: "graphics", 2: "sm", 3: "memory"}


class FakeNvml:
    """pynvml's calls ``snapshot.nvml`` makes, answered from a raw reading; counts every call."""

    NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2, 3
    NVML_TEMPERATURE_GPU = 0
    NVML_NVLINK_MAX_LINKS = 18

    class NVMLError(Exception):
        pass

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = copy.deepcopy(raw)
        self.calls: collections.Counter[str] = collections.Counter()

    def dev(self, handle: int) -> dict[str, Any]:
        return self.raw["devices"][handle]

    def field(self, handle: int, key: str) -> Any:
        if key not in self.dev(handle):
            raise self.NVMLError("Not Supported")
        return self.dev(handle)[key]

    def __getattr__(self, name: str) -> Any:
        answers = {
            "nvmlInit": lambda: None, "nvmlShutdown": lambda: None,
            "nvmlDeviceGetCount": lambda: len(self.raw["devices"]),
            "nvmlDeviceGetHandleByIndex": lambda i: i,
            "nvmlSystemGetDriverVersion": lambda: self.raw["driver_version"],
            "nvmlSystemGetCudaDriverVersion": lambda: self.raw["cuda_driver_version"],
            "nvmlDeviceGetName": lambda h: self.field(h, "name"),
            "nvmlDeviceGetUUID": lambda h: self.field(h, "uuid"),
            "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId=self.field(h, "pci_bus_id").encode()),
            "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(
                total=self.field(h, "memory_total_bytes"), used=self.field(h, "memory_used_bytes")),
            "nvmlDeviceGetAttributes_v2": lambda h: SimpleNamespace(multiprocessorCount=self.field(h, "multiprocessor_count")),
            "nvmlDeviceGetCudaComputeCapability": lambda h: tuple(self.field(h, "cuda_capability")),
            "nvmlDeviceGetNumGpuCores": lambda h: self.field(h, "num_gpu_cores"),
            "nvmlDeviceGetMaxClockInfo": lambda h, c: self.field(h, "max_clock_mhz")[CLOCK[c]],
            "nvmlDeviceGetApplicationsClock": lambda h, c: self.field(h, "applications_clock_mhz")[CLOCK[c]],
            "nvmlDeviceGetClockInfo": lambda h, c: self.field(h, "clock_mhz")[CLOCK[c]],
            "nvmlDeviceGetMaxPcieLinkGeneration": lambda h: self.field(h, "pcie_max_link_gen"),
            "nvmlDeviceGetMaxPcieLinkWidth": lambda h: self.field(h, "pcie_max_link_width"),
            "nvmlDeviceGetCurrPcieLinkGeneration": lambda h: self.field(h, "pcie_link_gen"),
            "nvmlDeviceGetCurrPcieLinkWidth": lambda h: self.field(h, "pcie_link_width"),
            "nvmlDeviceGetEnforcedPowerLimit": lambda h: self.field(h, "power_limit_mw"),
            "nvmlDeviceGetPowerManagementDefaultLimit": lambda h: self.field(h, "power_default_limit_mw"),
            "nvmlDeviceGetEccMode": lambda h: tuple(self.field(h, "ecc_mode")),
            "nvmlDeviceGetMigMode": lambda h: tuple(self.field(h, "mig_mode")),
            "nvmlDeviceGetPersistenceMode": lambda h: self.field(h, "persistence_mode"),
            "nvmlDeviceGetComputeMode": lambda h: self.field(h, "compute_mode"),
            "nvmlDeviceGetNvLinkState": lambda h, link: self.link(h, link)["active"],
            "nvmlDeviceGetNvLinkVersion": lambda h, link: self.link(h, link)["version"],
            "nvmlDeviceGetNvLinkRemoteDeviceType": lambda h, link: self.link(h, link)["remote_type"],
            "nvmlDeviceGetTemperature": lambda h, _s: self.field(h, "temperature_c"),
            "nvmlDeviceGetPowerUsage": lambda h: self.field(h, "power_usage_mw"),
            "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(**self.field(h, "utilization")),
            "nvmlDeviceGetPerformanceState": lambda h: self.field(h, "performance_state"),
            "nvmlDeviceGetCurrentClocksEventReasons": lambda h: self.field(h, "clocks_event_reasons"),
            "nvmlDeviceGetTopologyCommonAncestor": lambda a, b: self.raw["topology"][f"{a}-{b}"],
        }  # fmt: skip
        if name not in answers:
            raise AttributeError(name)
        fn = answers[name]

        def counted(*args: Any) -> Any:
            self.calls[name] += 1
            return fn(*args)

        return counted

    def link(self, handle: int, link: int) -> dict[str, Any]:
        links = self.field(handle, "nvlink")
        if link >= len(links):
            raise self.NVMLError("Not Supported")
        return links[link]


def recorded(name: str) -> dict[str, Any]:
    raw = json.loads((DATA / name).read_text())
    for device in raw["devices"]:
        device.pop("numa_node", None)  # sysfs, not NVML
    return raw


KEY = b"k" * 32  # the cache directory's key (verify.cachefile)


def _cache(root: Path) -> Cache:
    return Cache(root=root, key=KEY, records=root / "records")


@pytest.fixture
def boot(tmp_path: Path) -> Path:
    path = tmp_path / "boot_id"
    path.write_text("6f1c0e9e-0000-4000-8000-000000000001\n")
    return path


@pytest.mark.parametrize("name", ["nvml-hgx-h100x8.json", "nvml-a100-sxm4.json"])
def test_the_fake_gives_back_the_recorded_reading_with_and_without_the_cache(name, tmp_path, boot):
    raw = recorded(name)
    assert nvml.read(FakeNvml(raw)) == raw
    cache = tmp_path / "nvml.json"
    assert nvml.read(FakeNvml(raw), cache, boot, key=KEY) == raw  # miss: read and stored
    hit = FakeNvml(raw)
    assert nvml.read(hit, cache, boot, key=KEY) == raw  # hit: the same reading
    assert hit.calls["nvmlDeviceGetName"] == 0 and hit.calls["nvmlDeviceGetTopologyCommonAncestor"] == 0
    assert hit.calls["nvmlDeviceGetEnforcedPowerLimit"] == len(raw["devices"])  # settings: every time


def _warm(raw: dict[str, Any], cache: Path, boot: Path) -> None:
    nvml.read(FakeNvml(raw), cache, boot, key=KEY)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("power_limit_mw", 500000),  # nvidia-smi -pl 500
        ("applications_clock_mhz", {"graphics": 1755, "memory": 2619}),  # nvidia-smi -ac
        ("persistence_mode", 0),  # nvidia-smi -pm 0
        ("compute_mode", 3),  # nvidia-smi -c EXCLUSIVE_PROCESS
        ("ecc_mode", [1, 0]),  # nvidia-smi -e 0 (pending)
        ("mig_mode", [0, 1]),  # nvidia-smi -mig 1 (pending)
    ],
)
def test_a_setting_changed_without_changing_the_key_is_seen(setting, value, tmp_path, boot):
    raw = recorded("nvml-hgx-h100x8.json")
    cache = tmp_path / "nvml.json"
    _warm(raw, cache, boot)
    raw["devices"][3][setting] = value
    fake = FakeNvml(raw)
    got = nvml.read(fake, cache, boot, key=KEY)
    assert fake.calls["nvmlDeviceGetName"] == 0  # still a cache hit
    assert got["devices"][3][setting] == value and got == raw


def test_a_new_driver_a_reboot_or_other_gpus_read_the_fixed_facts_again(tmp_path, boot):
    raw = recorded("nvml-hgx-h100x8.json")
    cache = tmp_path / "nvml.json"
    _warm(raw, cache, boot)
    # a new driver that reports another name and CUDA version
    raw["driver_version"], raw["cuda_driver_version"] = "590.10.01", 13010
    raw["devices"][0]["name"] = "NVIDIA H100 80GB HBM3 (new driver)"
    fake = FakeNvml(raw)
    assert nvml.read(fake, cache, boot, key=KEY) == raw and fake.calls["nvmlDeviceGetName"] == 8
    # a reboot: the boot id changes (a GPU re-seated in another slot keeps its UUID, not its bus id)
    raw["devices"][1]["pci_bus_id"] = "00000000:99:00.0"
    boot.write_text("6f1c0e9e-0000-4000-8000-000000000002\n")
    fake = FakeNvml(raw)
    assert nvml.read(fake, cache, boot, key=KEY) == raw and fake.calls["nvmlDeviceGetPciInfo"] == 8
    # another GPU in the machine: its UUID differs
    raw["devices"][7].update(
        uuid="GPU-00000000-0000-4000-8000-0000000000ff", num_gpu_cores=14592, name="NVIDIA H100 PCIe"
    )
    fake = FakeNvml(raw)
    assert nvml.read(fake, cache, boot, key=KEY) == raw and fake.calls["nvmlDeviceGetNumGpuCores"] == 8
    # one GPU fewer (the topology shrinks with it)
    raw["devices"].pop()
    raw["topology"] = {k: v for k, v in raw["topology"].items() if "7" not in k}
    assert nvml.read(FakeNvml(raw), cache, boot, key=KEY) == raw


def test_no_boot_id_or_a_damaged_cache_file_reads_everything(tmp_path, boot):
    raw = recorded("nvml-a100-sxm4.json")
    cache = tmp_path / "nvml.json"
    fake = FakeNvml(raw)
    assert nvml.read(fake, cache, tmp_path / "absent", key=KEY) == raw and not cache.exists()
    _warm(raw, cache, boot)
    for damaged in ("{", json.dumps({"key": {}, "fixed": []}), json.dumps([1])):
        cache.write_text(damaged)
        fake = FakeNvml(raw)
        assert nvml.read(fake, cache, boot, key=KEY) == raw and fake.calls["nvmlDeviceGetName"] == 1


def test_the_collector_keeps_the_cache_in_the_hash_cache_directory(tmp_path, monkeypatch):
    raw = recorded("nvml-hgx-h100x8.json")
    monkeypatch.setitem(__import__("sys").modules, "pynvml", FakeNvml(raw))
    first = gpu.collect(_cache(tmp_path))
    assert (tmp_path / gpu.NVML_CACHE).is_file() or not nvml.BOOT_ID.exists()
    assert gpu.collect(_cache(tmp_path)) == first
    assert gpu.collect(None) == first


FAKE_MODULE = """
import json
from tests.test_snapshot_nvml_cache import FakeNvml
_fake = FakeNvml(json.loads({raw!r}))
def __getattr__(name):
    return getattr(_fake, name)
"""


def test_the_reading_in_a_process_of_its_own_is_the_same(tmp_path, monkeypatch):
    """The collector reads NVML in a child interpreter (pynvml's import off this process's GIL):
    the same reading, the same cache file, and NVML's errors under their own class names."""
    import sys

    raw = recorded("nvml-hgx-h100x8.json")
    fake_dir = tmp_path / "fake"
    fake_dir.mkdir()
    (fake_dir / "pynvml.py").write_text(FAKE_MODULE.format(raw=json.dumps(raw)))
    monkeypatch.syspath_prepend(str(Path(__file__).parent.parent))  # tests.* for the child
    monkeypatch.syspath_prepend(str(fake_dir))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    apart = gpu.read_apart(_cache(tmp_path))
    assert apart == nvml.read(FakeNvml(raw)) == raw
    assert (tmp_path / gpu.NVML_CACHE).is_file() or not nvml.BOOT_ID.exists()
    assert gpu.collect(_cache(tmp_path)) == gpu.finish(copy.deepcopy(raw))
    assert "pynvml" not in sys.modules  # read apart, not imported here
    (fake_dir / "pynvml.py").write_text(
        "class NVMLError_DriverNotLoaded(Exception):\n    pass\n"
        "def nvmlInit():\n    raise NVMLError_DriverNotLoaded('Driver Not Loaded')\n"
    )
    with pytest.raises(Exception, match="Driver Not Loaded") as caught:
        gpu.read_apart(None)
    assert type(caught.value).__name__ in gpu.NO_DRIVER_ERRORS


def test_the_child_the_plan_launched_is_the_one_used(tmp_path, monkeypatch):
    """The plan launches the NVML child before the verb imports its collectors; the gpu collector
    hands that child the cache file (no second child) and gets the same reading."""
    import sys

    from megacpp_env.snapshot.collectors import nvml_child

    raw = recorded("nvml-hgx-h100x8.json")
    fake_dir = tmp_path / "fake"
    fake_dir.mkdir()
    (fake_dir / "pynvml.py").write_text(FAKE_MODULE.format(raw=json.dumps(raw)))
    monkeypatch.syspath_prepend(str(Path(__file__).parent.parent))
    monkeypatch.syspath_prepend(str(fake_dir))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    early = nvml_child.spawn()
    spawned = []
    real_spawn = nvml_child.spawn
    monkeypatch.setattr(nvml_child, "spawn", lambda: spawned.append(1) or real_spawn())
    assert gpu.read_apart(_cache(tmp_path), early) == raw
    assert not spawned and early.returncode == 0  # the launched one, used
    assert gpu.read_apart(None) == raw and len(spawned) == 1  # none given: a new one


def test_a_tampered_fixed_cache_is_discarded(tmp_path, boot):
    """An edit of the cached facts (an H100 made a B200) fails the cache file's seal: read again."""
    from megacpp_env.snapshot.verify import cachefile

    raw = recorded("nvml-hgx-h100x8.json")
    cache = tmp_path / "nvml.json"
    _warm(raw, cache, boot)
    entry = cachefile.read(str(cache), KEY, 1 << 20)
    edited = entry.payload.replace(b"H100", b"B200")
    cache.write_bytes(cachefile.MAGIC + b"\0" * cachefile.TAG_BYTES + edited)
    fake = FakeNvml(raw)
    got = nvml.read(fake, cache, boot, key=KEY)
    assert got == raw and "B200" not in json.dumps(got) and fake.calls["nvmlDeviceGetName"] == 8
