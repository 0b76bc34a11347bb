"""Collectors other than the Python environment: runtime hooks and gates, torch facts, GPU parsing."""

from __future__ import annotations

from megacpp_env.snapshot.collect import take_snapshot
from megacpp_env.snapshot.collectors import gpu, torch_facts
from megacpp_env.snapshot.verify import integrity
from tests.fixtures.snapshot import make_wheel


def test_runtime_gates_and_pth_hook_are_recorded(snap_options, snap_venv):
    hook = snap_venv.site / "megacpp_env_runtime.pth"
    hook.write_text("import megacpp_env.runtime\n")
    environ = {"PATH": "/usr/bin:/bin", "MEGACPP_PATCH_DYNAMO_CAPTURE_SCALAR": "1"}
    runtime = take_snapshot(snap_options(environ=environ)).facts["runtime"]
    assert runtime["patch_gates"]["dynamo_capture_scalar"] == {
        "env": "MEGACPP_PATCH_DYNAMO_CAPTURE_SCALAR",
        "value": "1",
        "enabled": True,
    }
    # the hook file there does not run the real hook (megacpp_env is not importable in the venv)
    assert runtime["patches"]["dynamo_capture_scalar"] == {"state": "not-hooked", "detail": ""}
    assert (runtime["hook_loaded"], runtime["active"]) == (False, [])
    assert runtime["patch_gates"]["triton_ptxas"]["value"] is None
    assert list(runtime["hook_files"]) == [str(hook)]
    assert runtime["hook_files"][str(hook)].startswith("sha256:")


def test_torch_static_facts_without_importing_it(snap_options, snap_venv):
    (snap_venv.site / "torch").mkdir()
    (snap_venv.site / "torch" / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.13.0.dev20260415+cu132'\ndebug = False\n"
        "cuda: Optional[str] = '13.2'\ngit_version = 'abc123'\nhip = None\n"
    )
    torch = take_snapshot(snap_options()).facts["torch"]
    assert torch["installed"] is True
    assert torch["static"]["version"] == "2.13.0.dev20260415+cu132"
    assert (torch["static"]["cuda"], torch["static"]["git_version"]) == ("13.2", "abc123")
    assert torch["imported"].startswith("skipped")


def test_loaded_libraries_map_to_the_wheel_that_installed_them(snap_venv, tmp_path):
    wheel = make_wheel(tmp_path, "nvidia-cuda-runtime", "13.0.96", {"nvidia/cu13/lib/libcudart.so.13": "ELF"})
    snap_venv.install(wheel)
    dist_info = str(next(snap_venv.site.glob("nvidia_cuda_runtime-*.dist-info")))
    verified = integrity.verify([("nvidia-cuda-runtime", dist_info)], cache_dir=None, workers=1)
    lib = str(snap_venv.site / "nvidia" / "cu13" / "lib" / "libcudart.so.13")
    dists = {"nvidia-cuda-runtime": {"name": "nvidia-cuda-runtime", "version": "13.0.96"}}
    libs = torch_facts.loaded_cuda_libraries([lib, "/usr/lib/libc.so.6"], verified.owner_of, dists)
    assert libs == {
        "libcudart.so.13": {"path": lib, "file": "libcudart.so.13", "distribution": "nvidia-cuda-runtime 13.0.96"}
    }


def test_dist_key_is_packagings_canonical_name():
    from packaging.utils import canonicalize_name

    from megacpp_env.snapshot.collectors.python_env import dist_key

    for name in ("Demo_Pkg", "zope.interface", "nvidia-cuda-runtime-cu12", "A__b--C..d", "torch", "PyYAML"):
        assert dist_key(name) == canonicalize_name(name)


def _no_nvidia_here() -> bool:
    return not gpu.collect().facts.get("devices")


def test_no_nvidia_driver_is_a_fact_not_a_failed_collector(snap_options, tmp_path, monkeypatch):
    if not _no_nvidia_here():
        import pytest

        pytest.skip("this host has an NVIDIA GPU")
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    parts = gpu.collect()
    assert (parts.facts, parts.live) == ({"present": False, "devices": [], "reason": gpu.NO_DRIVER}, {})
    from megacpp_env.snapshot.report import render_summary as summary

    text = summary(take_snapshot(snap_options(environ={"PATH": str(empty), "HOME": str(tmp_path)})))
    assert f"  gpu: none ({gpu.NO_DRIVER})\n" in text
    assert "failed" not in text


def test_a_broken_nvidia_smi_is_still_a_failure(tmp_path, monkeypatch):
    if not _no_nvidia_here():
        import pytest

        pytest.skip("this host has an NVIDIA GPU")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    smi = bindir / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the driver' >&2\nexit 9\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    out = gpu.collect().facts
    assert "present" not in out and out["devices"] == []
    assert "nvidia-smi" in out["error"]
