"""The jobs formula, on fake /proc and /sys trees (cgroup v2, v1, nested limits, none)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from megacpp_env.errors import RefusedError
from megacpp_env.srcbuild.jobs import GIB, Resources, decide, read_resources
from megacpp_env.srcbuild.plan import JobsPlan


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def meminfo(available_gib: float) -> str:
    kb = int(available_gib * 1024 * 1024)
    return f"MemTotal:       {kb * 2} kB\nMemFree:        {kb // 2} kB\nMemAvailable:   {kb} kB\n"


def fake_v2(tmp_path: Path, *, available_gib: float, levels: dict[str, dict[str, str]], path: str) -> tuple[Path, Path]:
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    write(proc, {"meminfo": meminfo(available_gib), "self/cgroup": f"0::{path}\n"})
    files = {"fs/cgroup/cgroup.controllers": "cpu memory\n"}
    for rel, content in levels.items():
        for name, text in content.items():
            files[f"fs/cgroup/{rel}/{name}".replace("//", "/")] = text
    write(sys, files)
    return proc, sys


def test_no_cgroup_limit_uses_memavailable_and_affinity(tmp_path: Path) -> None:
    proc, sys = fake_v2(tmp_path, available_gib=64, levels={"user.slice": {"memory.max": "max\n"}}, path="/user.slice")
    res = read_resources(proc=proc, sys=sys, affinity=16)
    assert res == Resources(memory=64 * GIB, memory_from="MemAvailable", cpus=16, cpus_from="cpu affinity")


def test_cgroup_v2_limit_minus_working_set_and_cpu_quota(tmp_path: Path) -> None:
    level = {
        "memory.max": f"{12 * GIB}\n",
        "memory.current": f"{5 * GIB}\n",
        "memory.stat": f"anon {2 * GIB}\nfile {3 * GIB}\ninactive_file {3 * GIB}\nactive_file 0\n",
        "cpu.max": "350000 100000\n",
    }
    proc, sys = fake_v2(tmp_path, available_gib=100, levels={"docker/abc": level}, path="/docker/abc")
    res = read_resources(proc=proc, sys=sys, affinity=32)
    # 12 GiB limit, working set 5 - 3 (inactive page cache is reclaimed first) = 2 GiB -> 10 GiB available.
    assert res.memory == 10 * GIB
    assert res.memory_from.startswith("cgroup v2 ") and res.memory_from.endswith(
        "docker/abc/memory.max minus its working set"
    )
    assert (res.cpus, res.cpus_from.split(" ")[:2]) == (4, ["cgroup", "v2"])  # 3.5 CPUs rounded up


def test_cgroup_v2_tightest_level_wins(tmp_path: Path) -> None:
    levels = {
        "outer": {"memory.max": f"{6 * GIB}\n", "memory.current": "0\n", "cpu.max": "200000 100000\n"},
        "outer/inner": {"memory.max": f"{20 * GIB}\n", "memory.current": "0\n", "cpu.max": "max 100000\n"},
    }
    proc, sys = fake_v2(tmp_path, available_gib=100, levels=levels, path="/outer/inner")
    res = read_resources(proc=proc, sys=sys, affinity=8)
    assert (res.memory, res.cpus) == (6 * GIB, 2)
    assert "/outer/memory.max" in res.memory_from and "/outer/cpu.max" in res.cpus_from


def test_cgroup_v2_in_a_container_namespace_reads_the_root(tmp_path: Path) -> None:
    root = {"memory.max": f"{8 * GIB}\n", "memory.current": f"{1 * GIB}\n", "cpu.max": "100000 100000\n"}
    proc, sys = fake_v2(tmp_path, available_gib=50, levels={"": root}, path="/")
    res = read_resources(proc=proc, sys=sys, affinity=4)
    assert (res.memory, res.cpus) == (7 * GIB, 1)


def test_meminfo_below_the_cgroup_limit_wins(tmp_path: Path) -> None:
    proc, sys = fake_v2(tmp_path, available_gib=3, levels={"a": {"memory.max": f"{32 * GIB}\n"}}, path="/a")
    res = read_resources(proc=proc, sys=sys, affinity=8)
    assert (res.memory, res.memory_from) == (3 * GIB, "MemAvailable")


def test_cgroup_v1_limit_and_quota(tmp_path: Path) -> None:
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    write(
        proc,
        {"meminfo": meminfo(40), "self/cgroup": "12:memory:/docker/x\n4:cpu,cpuacct:/docker/x\n1:name=systemd:/\n"},
    )
    write(sys, {
        "fs/cgroup/memory/docker/x/memory.limit_in_bytes": f"{16 * GIB}\n",
        "fs/cgroup/memory/docker/x/memory.usage_in_bytes": f"{4 * GIB}\n",
        "fs/cgroup/memory/docker/x/memory.stat": f"cache {3 * GIB}\ntotal_inactive_file {2 * GIB}\n",
        "fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
        "fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_quota_us": "600000\n",
        "fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000\n",
        "fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
        "fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
    })  # fmt: skip
    res = read_resources(proc=proc, sys=sys, affinity=64)
    assert res.memory == 14 * GIB and res.memory_from.startswith("cgroup v1 ")
    assert res.cpus == 6 and "cpu.cfs_quota_us" in res.cpus_from


def test_cgroup_v1_unlimited_is_ignored(tmp_path: Path) -> None:
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    write(proc, {"meminfo": meminfo(10), "self/cgroup": "5:memory:/\n"})
    write(sys, {"fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"})
    assert read_resources(proc=proc, sys=sys, affinity=2).memory == 10 * GIB


def test_missing_proc_and_sys_still_give_one_job(tmp_path: Path) -> None:
    res = read_resources(proc=tmp_path / "none", sys=tmp_path / "none", affinity=4)
    assert res.memory == 0 and res.memory_from == "MemFree"
    assert decide(JobsPlan(reads=("MAX_JOBS",)), res).max_jobs == 1


def res(gib: float, cpus: int) -> Resources:
    return Resources(memory=int(gib * GIB), memory_from="test", cpus=cpus, cpus_from="test")


def test_upstream_hard_coded_nvcc_threads_divide_the_jobs() -> None:
    """causal-conv1d and mamba pass `nvcc --threads 4`: 64 GiB at 4 GiB per thread -> 4 jobs, not 16."""
    policy = JobsPlan(reads=("MAX_JOBS",), nvcc_threads=4, cuda=True, mem_per_job_gib=4)
    d = decide(policy, res(64, 16))
    assert (d.max_jobs, d.nvcc_threads, d.per_job_gib) == (4, 4, 16)
    assert d.env == {"MAX_JOBS": "4"}  # the build does not read NVCC_THREADS: not exported
    assert "hard-coded by the build" in d.why


def test_causal_conv1d_two_archs_on_16_cores_gets_4_jobs_of_2_threads() -> None:
    """The H200 case: 4 compile units, 2 archs, 16 cores, ~124 GiB available (31 slots < 32). The old
    formula picked 1 thread (over 580 s); the units leave 12 cores idle, so each nvcc splits its 2 archs."""
    policy = JobsPlan(reads=("MAX_JOBS", "NVCC_THREADS"), cuda=True, mem_per_job_gib=4, units=4, archs=2)
    for gib in (124.5, 128):
        d = decide(policy, res(gib, 16))
        assert (d.max_jobs, d.nvcc_threads, d.env) == (4, 2, {"MAX_JOBS": "4", "NVCC_THREADS": "2"}), gib
    assert decide(replace(policy, archs=1), res(128, 16)).nvcc_threads == 1  # one arch: nothing to split


def test_threads_use_only_the_cores_the_units_leave_idle() -> None:
    policy = JobsPlan(reads=("MAX_JOBS", "NVCC_THREADS"), cuda=True, mem_per_job_gib=4, units=10, archs=4)
    assert (decide(policy, res(128, 20)).max_jobs, decide(policy, res(128, 20)).nvcc_threads) == (10, 2)
    # mamba's 10 files on the H200's 16 cores: 2 threads each (16 / 10 rounds to 2), not 1
    assert (decide(policy, res(124.5, 16)).max_jobs, decide(policy, res(124.5, 16)).nvcc_threads) == (10, 2)
    assert decide(policy, res(128, 19)).nvcc_threads == 2 and decide(policy, res(128, 14)).nvcc_threads == 1
    unknown = replace(policy, units=0)  # a CMake build: units not known, as many jobs as cpus
    assert (decide(unknown, res(512, 20)).max_jobs, decide(unknown, res(512, 20)).nvcc_threads) == (20, 1)


@pytest.mark.parametrize("gib", [1, 7, 9, 31, 33, 64, 127, 500])
@pytest.mark.parametrize("cpus", [1, 2, 3, 16, 20, 64])
@pytest.mark.parametrize(("units", "archs"), [(0, 1), (1, 4), (4, 2), (10, 3), (400, 2)])
def test_the_memory_bound_holds_whenever_the_formula_chooses(gib: int, cpus: int, units: int, archs: int) -> None:
    policy = JobsPlan(reads=("MAX_JOBS", "NVCC_THREADS"), cuda=True, mem_per_job_gib=4, units=units, archs=archs)
    d = decide(policy, res(gib, cpus))
    assert 1 <= d.max_jobs <= cpus and 1 <= d.nvcc_threads <= max(1, archs)
    assert d.max_jobs * d.nvcc_threads * 4 <= max(gib, 4)  # (at least one job of one thread)
    assert d.max_jobs * d.nvcc_threads <= 1.5 * cpus


def test_vllm_divides_max_jobs_by_nvcc_threads_so_max_jobs_is_jobs_times_threads() -> None:
    # vLLM's setup.py compute_num_jobs runs max(1, MAX_JOBS // NVCC_THREADS) jobs
    policy = JobsPlan(reads=("MAX_JOBS", "NVCC_THREADS"), cuda=True, mem_per_job_gib=4, divides=True,
                      nvcc_threads_override=2)  # fmt: skip
    d = decide(policy, res(128, 20))
    assert (d.max_jobs, d.nvcc_threads, d.env) == (16, 2, {"MAX_JOBS": "32", "NVCC_THREADS": "2"})
    assert "MAX_JOBS // NVCC_THREADS" in d.why
    assert decide(policy, res(128, 20), jobs=3).env == {"MAX_JOBS": "6", "NVCC_THREADS": "2"}  # --jobs 3: 3 run
    assert decide(replace(policy, reads=("MAX_JOBS",)), res(128, 20)).env == {"MAX_JOBS": "16"}  # no threads read


def test_negative_jobs_are_refused() -> None:
    with pytest.raises(RefusedError, match="--jobs -3: expected a positive number"):
        decide(JobsPlan(reads=("MAX_JOBS",)), res(64, 8), jobs=-3)


def test_an_injected_tree_gives_its_own_cpu_list(tmp_path: Path) -> None:
    proc, sys = fake_v2(tmp_path, available_gib=64, levels={}, path="/")
    write(proc, {"self/status": "Name:\tx\nCpus_allowed_list:\t0-19,24\n"})
    assert read_resources(proc=proc, sys=sys).cpus == 21
    write(proc, {"self/status": "Cpus_allowed_list:\t7-3\n"})  # malformed: one CPU, never more
    assert read_resources(proc=proc, sys=sys).cpus == 1


@pytest.mark.parametrize(
    ("gib", "cpus", "expected"),
    [(0.5, 8, 1), (7.9, 8, 1), (8, 8, 2), (31, 8, 7), (1000, 8, 8)],
)
def test_jobs_are_clamped_between_one_and_the_cpus(gib: float, cpus: int, expected: int) -> None:
    assert decide(JobsPlan(reads=("MAX_JOBS",), mem_per_job_gib=4), res(gib, cpus)).max_jobs == expected


def test_fixed_numbers_win() -> None:
    policy = JobsPlan(reads=("CMAKE_BUILD_PARALLEL_LEVEL", "MAX_JOBS", "NVCC_THREADS"), cuda=True, max_jobs=3,
                      nvcc_threads_override=1)  # fmt: skip
    d = decide(policy, res(512, 64))
    assert d.env == {"CMAKE_BUILD_PARALLEL_LEVEL": "3", "MAX_JOBS": "3", "NVCC_THREADS": "1"}
    assert decide(policy, res(512, 64), jobs=5).max_jobs == 5  # --jobs N


def test_nothing_is_exported_to_a_build_that_reads_nothing() -> None:
    d = decide(JobsPlan(), res(64, 8))
    assert d.env == {} and d.max_jobs == 8 and d.nvcc_threads == 1


# ---- hostile trees (issue 31, defect 4) ---------------------------------------------------------------

HUGE = "9" * 5000
V2_FILES = ("memory.max", "memory.current", "memory.stat", "cpu.max")


def _hostile_v2(tmp_path: Path, *, cgroup: str = "/docker/abc", **overrides: str) -> tuple[Path, Path]:
    level = {
        "memory.max": f"{12 * GIB}\n",
        "memory.current": f"{5 * GIB}\n",
        "memory.stat": f"inactive_file {3 * GIB}\n",
        "cpu.max": "350000 100000\n",
    }
    level.update({k.replace("_", "."): v for k, v in overrides.items() if k.replace("_", ".") in level})
    proc, sys = fake_v2(tmp_path, available_gib=100, levels={"docker/abc": level}, path=cgroup)
    if "meminfo" in overrides:
        (proc / "meminfo").write_text(overrides["meminfo"])
    (proc / "self" / "status").write_text(overrides.get("status", "Name:\tx\nCpus_allowed_list:\t0-7\n"))
    return proc, sys


def _finishes(fn, seconds: float = 20.0):
    """``fn()`` in a thread: its result, or a failure when it has not returned in ``seconds`` (a hang)."""
    import threading

    box: list = []
    t = threading.Thread(target=lambda: box.append(fn()), daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "read_resources hung"
    assert box, "read_resources raised"
    return box[0]


@pytest.mark.parametrize(
    "values",
    [
        {"memory_max": HUGE}, {"memory_current": HUGE}, {"memory_stat": f"inactive_file {HUGE}\n"},
        {"cpu_max": f"{HUGE} 100000\n"}, {"cpu_max": f"100000 {HUGE}\n"}, {"meminfo": f"MemAvailable: {HUGE} kB\n"},
        {"status": f"Cpus_allowed_list:\t0-{HUGE}\n"}, {"status": f"Cpus_allowed_list:\t{HUGE}\n"},
        {"memory_max": "²\n"}, {"cpu_max": "\u0663\u0665\u0660\u0660 \u0661\u0660\u0660\n"}, {"status": "Cpus_allowed_list:\t0-\u0663\n"},
        {"meminfo": "MemAvailable: ¹²³ kB\n"}, {"memory_max": "-5\n"}, {"cpu_max": "1 0\n"},
        {"memory_max": f"{'1' * 21}\n"}, {"status": "Cpus_allowed_list:\t0-99999999999999999999\n"},
    ],
)  # fmt: skip
def test_numbers_that_are_no_plain_number_are_not_known(tmp_path: Path, values: dict[str, str]) -> None:
    proc, sys = _hostile_v2(tmp_path, **values)
    res = read_resources(proc=proc, sys=sys, affinity=None if "status" in values else 8)
    assert 1 <= res.cpus <= 1 << 16 and 0 <= res.memory <= 100 * GIB
    assert decide(JobsPlan(reads=("MAX_JOBS",)), res).max_jobs >= 1


def test_a_cgroup_path_of_thousands_of_levels_is_not_visible(tmp_path: Path) -> None:
    for depth in (65, 5000, 200_000):
        proc, sys = _hostile_v2(tmp_path / str(depth), cgroup="/" + "/".join(["a"] * depth))
        res = _finishes(lambda proc=proc, sys=sys: read_resources(proc=proc, sys=sys, affinity=8))
        assert res.memory == 100 * GIB and res.cpus == 8  # only the mount's root (no limit there) is read


@pytest.mark.parametrize("name", ["meminfo", "self/cgroup", "self/status", *(f"docker/abc/{f}" for f in V2_FILES)])
def test_a_fifo_in_place_of_any_file_is_read_as_nothing_without_waiting(tmp_path: Path, name: str) -> None:
    import os

    proc, sys = _hostile_v2(tmp_path)
    path = proc / name if not name.startswith("docker/") else sys / "fs" / "cgroup" / name
    path.unlink()
    os.mkfifo(path)
    res = _finishes(lambda: read_resources(proc=proc, sys=sys, affinity=None))
    assert res.cpus >= 1


@pytest.mark.parametrize("cgroup", ["/../../../outside", "/docker/../../../outside", "/./../outside", "/link"])
def test_a_cgroup_path_never_reads_outside_the_tree(tmp_path: Path, cgroup: str) -> None:
    """A `..` in /proc/self/cgroup, or a link in the tree, would read another directory's limits: here one
    outside the tree with a 1 GiB limit, which must not be taken."""
    proc, sys = _hostile_v2(tmp_path / "root", cgroup=cgroup)
    outside = tmp_path / "outside"
    write(outside, {"memory.max": f"{1 * GIB}\n", "memory.current": "0\n", "cpu.max": "100000 100000\n"})
    (sys / "fs" / "cgroup" / "link").symlink_to(outside)
    (sys / "fs" / "cgroup" / "memory.max").symlink_to(outside / "memory.max")  # the mount's own file, linked out
    res = read_resources(proc=proc, sys=sys, affinity=8)
    assert "outside" not in res.memory_from + res.cpus_from
    assert res.memory == 100 * GIB and res.cpus == 8


def test_build_source_dry_run_on_a_hostile_tree_is_no_traceback(tmp_path: Path, capsys) -> None:
    import os

    from megacpp_env.cli import main
    from tests.fixtures.spec import STACK_YAML

    proc, _ = _hostile_v2(tmp_path, cgroup="/" + "/".join([".."] * 50) + "/x", memory_max=HUGE, meminfo=HUGE)
    (proc / "self" / "status").unlink()
    os.mkfifo(proc / "self" / "status")
    argv = ["build-source", "megacpp_smoke_ext", "--target", "smoke", "--dry-run", "--json",
            "--resources-root", str(tmp_path), "--spec", str(STACK_YAML)]  # fmt: skip
    assert _finishes(lambda: main(argv)) == 0
    assert "Traceback" not in capsys.readouterr().err
