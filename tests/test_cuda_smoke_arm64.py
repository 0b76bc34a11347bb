"""The GB10 toolchain path (issue 17, item 5): cuda_smoke's linux/arm64 toolchain, CUDA 13.2 from its sbsa
wheels on PyPI installed by hash from locks/cuda_smoke-cuda.linux-arm64.requirements.txt, built under qemu
as the image builds it (`--target cuda` of the rendered Dockerfile, the same arguments `build` passes);
then nvcc, under qemu, compiles a small kernel for sm_121a and cuobjdump lists exactly that cubin.
Only the toolchain stage: the venv, the sources and the image are amd64-only work (tests/test_cuda_smoke*)."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import time
from pathlib import Path

from megacpp_env import build, docker, layout
from megacpp_env.spec import load_spec
from tests.conftest import REPO_ROOT
from tests.fixtures.docker import ca_bundle, skip_or_fail

KERNEL = """
__global__ void axpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


def test_lock_holds_the_sbsa_toolchain() -> None:
    text = (REPO_ROOT / "locks" / "cuda_smoke-cuda.linux-arm64.requirements.txt").read_text()
    assert "nvidia-cuda-nvcc==13.2.51" in text and "nvidia-cuda-cuobjdump==13.2.51" in text
    pylock = (REPO_ROOT / "locks" / "pylock.cuda_smoke-cuda-linux-arm64.toml").read_text()
    wheels = re.findall(r'url = "[^"]*/(nvidia_[a-z_]+-13\.2\.[0-9]+-[^"]+\.whl)"', pylock)
    assert wheels and all("aarch64" in w for w in wheels), wheels


def test_nvcc_under_qemu_compiles_exactly_sm_121a(docker_daemon: str, tmp_path: Path) -> None:
    if not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").exists():
        skip_or_fail("no qemu-aarch64 binfmt handler (run scripts/docker-up.sh)")
    spec = load_spec(REPO_ROOT / "stack.yaml")
    plan = build.plan_build(
        spec, build.BuildOptions(target="cuda_smoke", platform="linux/arm64", ca_bundle=ca_bundle())
    )
    tag = "megacpp-test/cuda_smoke-arm64-toolchain:latest"
    request = dataclasses.replace(plan.deps_request, stage="cuda", tag=tag)
    start = time.monotonic()
    proc = subprocess.run(docker.build_argv(request, docker=docker_daemon), cwd=REPO_ROOT, env=docker.environ(), capture_output=True,
                          text=True, check=False)  # fmt: skip
    built = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    (tmp_path / "axpy.cu").write_text(KERNEL)
    script = (
        "set -euo pipefail; cd /w; uname -m; "
        "nvcc --version | tail -n 2; "
        'nvcc -ccbin "${CXX:-g++}" -arch=sm_121a -c axpy.cu -o axpy.o; '
        "cuobjdump --list-elf axpy.o"
    )
    start = time.monotonic()
    run = subprocess.run(
        [docker_daemon, "run", "--rm", "--platform", "linux/arm64", "--network", "none", "-v", f"{tmp_path}:/w",
         "-e", f"PATH={layout.CUDA_HOME}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
         tag, "bash", "-c", script],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    compiled = time.monotonic() - start
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines()[0] == "aarch64"
    assert "release 13.2," in run.stdout
    cubins = re.findall(r"[.](sm_[0-9]+[af]?)[.]cubin", run.stdout)
    assert cubins == ["sm_121a"], run.stdout
    print(f"arm64 toolchain stage {built:.0f} s (cached layers count as 0), nvcc sm_121a + cuobjdump {compiled:.0f} s")
