"""The real CUDA target: ``cuda_smoke`` built once per session (tests/fixtures/cudasmoke.py) and then asked,
without a GPU, what a GPU run would rely on: the kernel module imports from the wheel built at the pin,
its fatbin holds SASS for exactly sm_90a (cuobjdump from the toolchain lock reads it), the venv passes
``pip check`` and the post-install dependency check, and the CUDA in CUDA_HOME is the one the toolchain
lock pins, by hash, while the venv keeps torch's own CUDA 13.0 runtime.
"""

from __future__ import annotations

import json
import re

import pytest

from megacpp_env import docker, layout
from megacpp_env.lock.pylock import read_pylock
from tests.fixtures.docker import REPO_ROOT

pytestmark = pytest.mark.docker

CUDA_LOCK = layout.toolchain_lock_path(REPO_ROOT, "cuda_smoke", "cuda", "linux/amd64")
CUDA_ROOT = layout.image_cuda_root("13.2")


def _run(image: str, script: str) -> str:
    proc = docker.run_in_image(image, ["bash", "-euo", "pipefail", "-c", script])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_the_kernel_module_imports_and_exports_its_kernels(cuda_smoke_image):
    code = (
        "import json, causal_conv1d, causal_conv1d_cuda as m, torch; "
        "print(json.dumps({'so': m.__file__, 'version': causal_conv1d.__version__, 'torch': torch.__version__, "
        "'torch_cuda': torch.version.cuda, 'gpu': torch.cuda.is_available(), "
        "'fns': sorted(f for f in dir(m) if f.startswith('causal_conv1d'))}))"
    )
    got = json.loads(_run(cuda_smoke_image.plan.tag, f"python -P -c {code!r}"))
    assert got["so"].startswith("/opt/venv/lib/python3.13/site-packages/causal_conv1d_cuda.")
    assert got["version"] == "1.6.1"
    assert (got["torch"], got["torch_cuda"], got["gpu"]) == ("2.13.0+cu130", "13.0", False)  # PyPI's torch is cu130
    assert {"causal_conv1d_fwd", "causal_conv1d_bwd", "causal_conv1d_update"} <= set(got["fns"])


def test_the_fatbin_holds_sm_90a_sass_only(cuda_smoke_image):
    """The arch overlay really narrowed the build: upstream's setup.py would give nine archs."""
    so = "$(python -P -c 'import torch, causal_conv1d_cuda as m; print(m.__file__)')"  # torch first: libtorch
    elf = _run(cuda_smoke_image.plan.tag, f"cuobjdump --list-elf {so}")
    cubins = re.findall(r"\.(sm_[0-9]+[af]?)\.cubin", elf)
    assert cubins and set(cubins) == {"sm_90a"}, elf
    assert any("causal_conv1d_bwd" in line for line in elf.splitlines()), elf
    ptx = docker.run_in_image(cuda_smoke_image.plan.tag, ["bash", "-c", f"cuobjdump --list-ptx {so}"])
    assert ".ptx" not in ptx.stdout, ptx.stdout  # SASS only, as upstream's code=sm_XX entries


def test_pip_check_and_the_dependency_check_are_clean(cuda_smoke_image):
    out = _run(cuda_smoke_image.plan.tag, "python -m pip check && python -P -m megacpp_env.depcheck "
               "--resolutions /opt/megacpp-env/resolutions.json --json")  # fmt: skip
    assert out.startswith("No broken requirements found."), out
    report = json.loads(out.split("\n", 1)[1])
    assert report["ok"] is True, report


def test_megatron_is_the_pinned_checkout(cuda_smoke_image):
    out = _run(cuda_smoke_image.plan.tag, "python -P -c 'import megatron.core as m; print(m.__version__, m.__file__)'")
    version, path = out.split()
    assert version == "0.19.1+5be9626" and path == "/opt/src/megatron-lm/megatron/core/__init__.py"


def test_cuda_home_is_the_locked_toolchain(cuda_smoke_image):
    """nvcc 13.2 from the toolchain lock in its own prefix; the venv keeps torch's 13.0 runtime."""
    lock = {p.name: p.version for p in read_pylock(CUDA_LOCK).packages}
    script = (
        "nvcc --version | tail -n 2; readlink -f \"$CUDA_HOME\"; "
        f"ls {layout.image_cuda_prefix('13.2')} | grep -F .dist-info; "
        "python -P -c 'import importlib.metadata as md; print(\"venv-runtime\", md.version(\"nvidia-cuda-runtime\"))'"
    )
    out = _run(cuda_smoke_image.plan.tag, script)
    assert "release 13.2, V13.2.51" in out and f"\n{CUDA_ROOT}\n" in out
    installed = dict(re.findall(r"^([A-Za-z0-9_.]+)-([0-9][^-]*)\.dist-info$", out, re.M))
    assert {k.replace("_", "-"): v for k, v in installed.items()} == lock
    assert re.search(r"^venv-runtime 13\.0\.", out, re.M)  # what torch 2.13.0 pins, untouched by the toolchain


def test_the_sources_were_built_with_no_network(cuda_smoke_image):
    argv = cuda_smoke_image.plan.argv
    assert argv[argv.index("--network") + 1] == "none"
    assert any(a.startswith("DEPS_IMAGE=megacpp/cuda_smoke-deps:") for a in argv)
