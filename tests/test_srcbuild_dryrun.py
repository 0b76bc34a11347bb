"""`build-source --dry-run --json` on a cgroup fixture of 20 CPUs and 128 GiB: the jobs each shipped
source gets on cloud and gb10, the variables exported to it (from its facts), vLLM's division."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from megacpp_env.cli import main
from tests.fixtures.spec import REPO_ROOT

GIB = 1 << 30


def cgroup_fixture(root: Path, *, cpus: int = 20, anon_gib: int = 0) -> Path:
    """A machine of 64 CPUs and ~500 GiB whose build cgroup allows ``cpus`` CPUs and 128 GiB
    (minus ``anon_gib`` already in use)."""
    files = {
        "proc/meminfo": "MemTotal: 528482304 kB\nMemFree: 500000000 kB\nMemAvailable: 520000000 kB\n",
        "proc/self/status": "Name:\tpython3\nCpus_allowed_list:\t0-63\n",
        "proc/self/cgroup": "0::/build\n",
        "sys/fs/cgroup/cgroup.controllers": "cpuset cpu memory\n",
        "sys/fs/cgroup/build/memory.max": f"{128 * GIB}\n",
        "sys/fs/cgroup/build/memory.current": f"{(3 + anon_gib) * GIB}\n",
        "sys/fs/cgroup/build/memory.stat": f"anon {anon_gib * GIB}\ninactive_file {3 * GIB}\n",  # cache: reclaimable
        "sys/fs/cgroup/build/cpu.max": f"{cpus * 100000} 100000\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def dry_run(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["build-source", *args, "--dry-run", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


# (target, source) -> (jobs, nvcc threads, exported)
EXPECTED = {
    # 4 files x 2 archs (MEGACPP_CUDA_ARCHS "90a 100a"): 16 cores idle, each nvcc splits its 2 archs
    ("cloud", "causal_conv1d"): (4, 2, {"MAX_JOBS": "4", "NVCC_THREADS": "2"}),
    ("cloud", "mamba_ssm"): (10, 2, {"MAX_JOBS": "10", "NVCC_THREADS": "2"}),
    ("cloud", "flashinfer_jit_cache"): (20, 1, {"FLASHINFER_NVCC_THREADS": "1", "MAX_JOBS": "20"}),
    ("cloud", "vllm"): (20, 1, {"MAX_JOBS": "20", "NVCC_THREADS": "1"}),
    ("cloud", "flashinfer"): (20, 1, {}),  # the JIT package compiles nothing and reads nothing
    ("gb10", "causal_conv1d"): (4, 1, {"MAX_JOBS": "4", "NVCC_THREADS": "1"}),  # one arch (121a)
    ("gb10", "mamba_ssm"): (10, 1, {"MAX_JOBS": "10", "NVCC_THREADS": "1"}),
    ("gb10", "flashinfer_jit_cache"): (20, 1, {"FLASHINFER_NVCC_THREADS": "1", "MAX_JOBS": "20"}),
    ("gb10", "vllm"): (20, 1, {"MAX_JOBS": "20", "NVCC_THREADS": "1"}),
}


@pytest.mark.parametrize(("target", "source"), sorted(EXPECTED))
def test_dry_run_on_a_20_cpu_128_gib_cgroup(tmp_path, capsys, target, source) -> None:
    root = cgroup_fixture(tmp_path / "host")
    doc = dry_run(capsys, source, "--target", target, "--resources-root", str(root), "--spec",
                  str(REPO_ROOT / "stack.yaml"))  # fmt: skip
    jobs = doc["jobs"]
    assert (doc["ok"], doc["dry_run"], doc["name"], doc["target"]) == (True, True, source, target)
    assert (jobs["resources"]["cpus"], jobs["resources"]["memory_gib"]) == (20, 128.0)
    assert jobs["resources"]["cpus_from"].endswith("build/cpu.max")
    assert (jobs["max_jobs"], jobs["nvcc_threads"], jobs["env"]) == EXPECTED[(target, source)]
    assert jobs["max_jobs"] * jobs["nvcc_threads"] * 4 <= 128  # the memory bound
    assert not (tmp_path / ".megacpp").exists()  # a dry run checks nothing out


def test_vllm_division_shows_in_max_jobs(tmp_path, capsys) -> None:
    """With the division in vLLM's facts (setup.py compute_num_jobs: MAX_JOBS // NVCC_THREADS, read from the
    v0.29.0 sdist) and two nvcc threads, MAX_JOBS is jobs x threads so vLLM runs the jobs the formula chose."""
    spec_dir = tmp_path / "spec"
    for name in ("facts", "overlays", "locks"):
        shutil.copytree(REPO_ROOT / name, spec_dir / name)
    text = (REPO_ROOT / "stack.yaml").read_text()
    cloud = text.index("\n  cloud:\n")
    text = text[:cloud] + text[cloud:].replace("\n    env:\n      build:\n", "\n    build: {nvcc_threads: 2}\n    env:\n      build:\n", 1)
    assert "build: {nvcc_threads: 2}" in text
    (spec_dir / "stack.yaml").write_text(text)
    assert 'jobs_divided_at = "setup.py:234"' in (spec_dir / "facts" / "vllm.toml").read_text()
    root = cgroup_fixture(tmp_path / "host")
    doc = dry_run(capsys, "vllm", "--target", "cloud", "--resources-root", str(root), "--spec", str(spec_dir / "stack.yaml"))
    assert doc["jobs_inputs"]["divides"] is True
    # 20 cpus, 32 slots of 4 GiB, 2 threads: 16 jobs; vLLM divides MAX_JOBS by NVCC_THREADS -> MAX_JOBS=32
    assert (doc["jobs"]["max_jobs"], doc["jobs"]["nvcc_threads"]) == (16, 2)
    assert doc["jobs"]["env"] == {"MAX_JOBS": "32", "NVCC_THREADS": "2"}
    assert "MAX_JOBS // NVCC_THREADS" in doc["jobs"]["why"]


@pytest.mark.parametrize("value", ["-3", "0", "x", "99999", "\u0663", "+2", ""])
def test_bad_jobs_is_a_usage_error(tmp_path, capsys, value) -> None:
    code = main(["build-source", "causal_conv1d", "--target", "cloud", f"--jobs={value}", "--dry-run",
                 "--spec", str(REPO_ROOT / "stack.yaml")])  # fmt: skip
    assert code == 2
    assert "expected a number of compile jobs from 1 to 4096" in capsys.readouterr().err


@pytest.mark.parametrize(("source", "expected"), [("causal_conv1d", (4, 2)), ("mamba_ssm", (10, 2))])
def test_the_h200_shape_two_archs_on_16_cores(tmp_path, capsys, source, expected) -> None:
    """Issue 17's measurement: 16 cores, 128 GB with ~4 GiB in use (31 slots < 32). causal-conv1d's 4
    files: 4 jobs x 2 threads (the old formula chose 1 thread and ran over 580 s)."""
    root = cgroup_fixture(tmp_path / "host", cpus=16, anon_gib=4)
    doc = dry_run(capsys, source, "--target", "cloud", "--resources-root", str(root), "--spec",
                  str(REPO_ROOT / "stack.yaml"))  # fmt: skip
    assert (doc["jobs"]["resources"]["cpus"], doc["jobs"]["resources"]["memory_gib"]) == (16, 124.0)
    assert (doc["jobs"]["max_jobs"], doc["jobs"]["nvcc_threads"]) == expected
    assert doc["jobs"]["env"] == {"MAX_JOBS": str(expected[0]), "NVCC_THREADS": str(expected[1])}
