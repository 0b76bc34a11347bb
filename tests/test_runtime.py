"""Runtime patches through the real .pth hook, in subprocesses of a real venv.

A small stand-in ``torch`` tree (torch/_inductor/utils.py, torch/_dynamo/config.py) is used where
torch itself is absent; ``test_real_torch`` runs on torch when it can be imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import megacpp_env.runtime as runtime
from megacpp_env.checkout import checkout_source
from megacpp_env.overlay import apply_overlay
from megacpp_env.runtime import pth
from megacpp_env.runtime.catalog import PATCHES
from tests.conftest import REPO_ROOT

GATES = {name: gate for name, (gate, _d) in PATCHES.items()}
PROBE = textwrap.dedent(
    """
    import json, os, sys
    out = {"ptxas": os.environ.get("TRITON_PTXAS_PATH")}
    if os.environ.get("PROBE_TORCH"):
        import torch._inductor.utils as u, torch._dynamo.config as c
        out["big"] = u.is_big_gpu(0) if getattr(u.is_big_gpu, "__megacpp_patched__", False) or os.environ.get("PROBE_CALL") else None
        out["patched_big"] = getattr(u.is_big_gpu, "__megacpp_patched__", False)
        out["capture"] = c.capture_scalar_outputs
    if os.environ.get("PROBE_SMOKE"):
        import megacpp_smoke_ext as m, megacpp_smoke_ext.greeting as g
        out.update(greet=g.greet("gb10"), shadow=g.SHADOW, file=g.__file__, add=m.add(2, 3), marker=m.OVERLAY_MARKER)
    out["megacpp_modules"] = sorted(k for k in sys.modules if k.startswith("megacpp_env"))
    out["finders"] = [type(f).__name__ for f in sys.meta_path]
    if "megacpp_env.runtime" in sys.modules:
        out["status"] = sys.modules["megacpp_env.runtime"].status()
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="session")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv (system site-packages visible) with the .pth hook installed by the real command."""
    root = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)], check=True)
    py = root / "bin" / "python"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [str(py), "-m", "megacpp_env.runtime", "install", "--json"], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(proc.stdout)["changed"] is True
    return py


@pytest.fixture(scope="session")
def fake_torch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fake-torch")
    files = {
        "torch/__init__.py": "",
        "torch/_inductor/__init__.py": "",
        "torch/_inductor/utils.py": "def is_big_gpu(index_or_device=0):\n    return False  # 48 SMs < 68\n",
        "torch/_dynamo/__init__.py": "",
        "torch/_dynamo/config.py": "capture_scalar_outputs = False\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEGACPP_", "TRITON_", "CUDA_"))}
    env.update(extra)
    return env


def probe(py: Path, *paths: Path, **env: str) -> dict:  # type: ignore[type-arg]
    pythonpath = os.pathsep.join([str(REPO_ROOT), *map(str, paths)])
    proc = subprocess.run(
        [str(py), "-c", PROBE],
        env=_clean_env(PYTHONPATH=pythonpath, **env),
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_off_imports_nothing_and_touches_nothing(venv: Path, fake_torch: Path) -> None:
    for value in (None, "0", "", "false"):
        gates = {} if value is None else dict.fromkeys(GATES.values(), value)
        out = probe(venv, fake_torch, PROBE_TORCH="1", PROBE_CALL="1", **gates)
        assert out["megacpp_modules"] == []
        assert out["big"] is False and out["patched_big"] is False and out["capture"] is False
        assert "PostImportFinder" not in out["finders"] and "ShadowFinder" not in out["finders"]


def test_inductor_small_gpu_on(venv: Path, fake_torch: Path) -> None:
    out = probe(venv, fake_torch, PROBE_TORCH="1", MEGACPP_PATCH_INDUCTOR_SMALL_GPU="1")
    assert out["big"] is True and out["patched_big"] is True
    assert out["capture"] is False  # only the gated patch
    st = out["status"]
    assert st["inductor_small_gpu"]["applied"] is True and st["inductor_small_gpu"]["state"] == "applied"
    assert st["dynamo_capture_scalar"] == {
        "gate": "MEGACPP_PATCH_DYNAMO_CAPTURE_SCALAR", "enabled": False, "applied": False, "state": "off", "detail": ""
    }  # fmt: skip


def test_dynamo_capture_scalar_on(venv: Path, fake_torch: Path) -> None:
    out = probe(venv, fake_torch, PROBE_TORCH="1", MEGACPP_PATCH_DYNAMO_CAPTURE_SCALAR="true")
    assert out["capture"] is True and out["patched_big"] is False
    assert out["status"]["dynamo_capture_scalar"]["applied"] is True


def test_armed_until_the_module_is_imported(venv: Path, fake_torch: Path) -> None:
    out = probe(venv, fake_torch, MEGACPP_PATCH_INDUCTOR_SMALL_GPU="1")
    assert out["status"]["inductor_small_gpu"]["state"] == "armed"
    assert "torch" not in out["megacpp_modules"]


def _fake_ptxas(root: Path, release: str) -> Path:
    ptxas = root / "bin" / "ptxas"
    ptxas.parent.mkdir(parents=True)
    ptxas.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.51'\n")
    ptxas.chmod(0o755)
    return ptxas


def test_triton_ptxas(venv: Path, tmp_path: Path) -> None:
    good = _fake_ptxas(tmp_path / "cuda13", "13.2")
    old = _fake_ptxas(tmp_path / "cuda12", "12.8")
    on = {"MEGACPP_PATCH_TRITON_PTXAS": "1"}
    assert probe(venv, CUDA_HOME=str(good.parent.parent), **on)["ptxas"] == str(good)
    out = probe(venv, CUDA_HOME=str(old.parent.parent), **on)
    assert out["ptxas"] != str(old)
    assert probe(venv, CUDA_HOME=str(good.parent.parent), TRITON_PTXAS_PATH="/x/ptxas", **on)["ptxas"] == "/x/ptxas"
    assert probe(venv, CUDA_HOME=str(good.parent.parent))["ptxas"] is None  # gate off


def test_shipped_pth_matches_catalog_and_installs_a_new_file(tmp_path: Path) -> None:
    shipped = REPO_ROOT / "megacpp_env" / "runtime" / pth.PTH_NAME
    assert shipped.read_text() == pth.pth_text()
    assert pth.pth_text().count("\n") == 1 and pth.pth_text().startswith("import os;")
    for gate in GATES.values():
        assert gate in pth.pth_text()
    path, changed = pth.install(tmp_path)
    assert changed and path == tmp_path / pth.PTH_NAME
    assert pth.install(tmp_path) == (path, False)
    assert pth.installed(tmp_path) == path
    assert pth.uninstall(tmp_path) == (path, True)
    assert pth.installed(tmp_path) is None
    assert pth.uninstall(tmp_path) == (path, False)


def test_uninstall_returns_the_original(tmp_path_factory: pytest.TempPathFactory, fake_torch: Path) -> None:
    root = tmp_path_factory.mktemp("venv2") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    py = root / "bin" / "python"
    env = _clean_env(PYTHONPATH=str(REPO_ROOT))
    subprocess.run([str(py), "-m", "megacpp_env.runtime", "install"], env=env, check=True, capture_output=True)
    on = {"PROBE_TORCH": "1", "MEGACPP_PATCH_INDUCTOR_SMALL_GPU": "1"}
    assert probe(py, fake_torch, **on)["patched_big"] is True
    cmd = [str(py), "-m", "megacpp_env.runtime", "install", "--uninstall"]
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    out = probe(py, fake_torch, **on)
    assert out["patched_big"] is False and out["megacpp_modules"] == []


def test_status_in_process_without_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    for gate in GATES.values():
        monkeypatch.delenv(gate, raising=False)
    monkeypatch.setenv("MEGACPP_PATCH_SMOKE_SHADOW", "1")
    monkeypatch.delitem(sys.modules, "megacpp_env.runtime.hook", raising=False)  # the .pth hook did not run here
    st = runtime.status()
    assert set(st) == set(PATCHES)
    assert st["smoke_shadow"] == {
        "gate": "MEGACPP_PATCH_SMOKE_SHADOW", "enabled": True, "applied": False, "state": "not-hooked", "detail": ""
    }  # fmt: skip
    assert st["triton_ptxas"] == {
        "gate": "MEGACPP_PATCH_TRITON_PTXAS", "enabled": False, "applied": False, "state": "off", "detail": ""
    }  # fmt: skip


def test_status_reports_what_the_hook_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    from megacpp_env.runtime import finders, hook  # noqa: F401 (the hook ran in this process)

    for gate in GATES.values():
        monkeypatch.delenv(gate, raising=False)
    monkeypatch.setenv("MEGACPP_PATCH_SMOKE_SHADOW", "1")
    monkeypatch.setattr(finders, "STATE", {})
    finders.record("smoke_shadow", "armed", "patches x when it is imported")
    assert runtime.status()["smoke_shadow"] == {
        "gate": "MEGACPP_PATCH_SMOKE_SHADOW", "enabled": True, "applied": False, "state": "armed",
        "detail": "patches x when it is imported",
    }  # fmt: skip


def test_runtime_package_stays_light() -> None:
    """The runtime and layout (its IMAGE_HOME, spelled once) import no yaml, jinja2, packaging or spec."""
    code = "import sys, megacpp_env.layout, megacpp_env.runtime, megacpp_env.runtime.hook, megacpp_env.runtime.patches; " \
        "print(sorted(m for m in ('yaml', 'jinja2', 'packaging', 'megacpp_env.spec') if m in sys.modules))"  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", code],
        env=_clean_env(PYTHONPATH=str(REPO_ROOT)),
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.strip() == "[]"


# ---- the smoke extension: checkout -> overlay -> build -> shadow patch -----------------------------


@pytest.fixture(scope="session")
def smoke_site(smoke_source, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    """The smoke extension checked out at its pin, overlaid, and built from source into a target dir."""
    work = tmp_path_factory.mktemp("smoke-build")
    src = work / "megacpp-smoke-ext"
    checkout_source(smoke_source.source(), src)
    apply_overlay(REPO_ROOT / "overlays" / "smoke-ext", src)
    site = work / "site"
    # An isolated build, as in the image: setuptools>=69 and wheel come from the configured index.
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(src)]
    env = {**os.environ, "MEGACPP_SMOKE_EXT_FORCE_BUILD": "TRUE", "PIP_NO_CACHE_DIR": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return site


def test_smoke_ext_built_from_the_overlaid_pin(venv: Path, smoke_site: Path) -> None:
    out = probe(venv, smoke_site, PROBE_SMOKE="1")
    assert out["add"] == 5
    assert out["marker"] == "overlay:smoke-ext"
    assert (smoke_site / "megacpp_smoke_ext" / "overlay_info.py").is_file()
    assert "FORCE_BUILD = 'TRUE'" in (smoke_site / "megacpp_smoke_ext" / "_build_info.py").read_text()
    assert out["greet"] == "hello, gb10" and out["shadow"] is False
    assert out["megacpp_modules"] == []


def test_smoke_shadow_on_loads_the_shadow_copy(venv: Path, smoke_site: Path) -> None:
    installed = (smoke_site / "megacpp_smoke_ext" / "greeting.py").read_bytes()
    out = probe(venv, smoke_site, PROBE_SMOKE="1", MEGACPP_PATCH_SMOKE_SHADOW="1", MEGACPP_ENV_HOME=str(REPO_ROOT))
    assert out["greet"] == "hello, gb10 (from the megacpp-env shadow tree)" and out["shadow"] is True
    assert out["file"] == str(REPO_ROOT / "overlays/runtime/smoke_shadow/megacpp_smoke_ext/greeting.py")
    assert out["add"] == 5
    assert out["status"]["smoke_shadow"]["state"] == "applied"
    assert (smoke_site / "megacpp_smoke_ext" / "greeting.py").read_bytes() == installed  # never edited
    off = probe(venv, smoke_site, PROBE_SMOKE="1", MEGACPP_PATCH_SMOKE_SHADOW="0", MEGACPP_ENV_HOME=str(REPO_ROOT))
    assert off["shadow"] is False and off["file"] == str(smoke_site / "megacpp_smoke_ext" / "greeting.py")


def test_smoke_shadow_refuses_a_different_installed_version(venv: Path, smoke_site: Path, tmp_path: Path) -> None:
    import shutil

    site = tmp_path / "site"
    shutil.copytree(smoke_site, site)
    greeting = site / "megacpp_smoke_ext" / "greeting.py"
    greeting.write_text(greeting.read_text() + "# upgraded upstream\n")
    out = probe(venv, site, PROBE_SMOKE="1", MEGACPP_PATCH_SMOKE_SHADOW="1", MEGACPP_ENV_HOME=str(REPO_ROOT))
    assert out["shadow"] is False
    assert out["status"]["smoke_shadow"]["state"] == "skipped"
    assert "not shadowing a different version" in out["status"]["smoke_shadow"]["detail"]


def test_smoke_setup_refuses_without_force_build(smoke_source, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "src"
    checkout_source(smoke_source.source(), src)
    env = {k: v for k, v in os.environ.items() if k != "MEGACPP_SMOKE_EXT_FORCE_BUILD"}
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(tmp_path / "site"), str(src)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode != 0
    assert "set MEGACPP_SMOKE_EXT_FORCE_BUILD=TRUE" in proc.stdout + proc.stderr


# ---- real torch, where it can be imported ----------------------------------------------------------


def _torch_path() -> str | None:
    """A directory to put on PYTHONPATH for torch ('' when this interpreter imports it), or None."""
    extra = os.environ.get("MEGACPP_TEST_TORCH_PATH", "")
    code = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
    env = {**os.environ, "PYTHONPATH": extra}
    ok = subprocess.run([sys.executable, "-c", code], env=env, check=False).returncode == 0
    return extra if ok else None


@pytest.mark.skipif(
    _torch_path() is None,
    reason="torch is not importable (install the CPU wheel, or set MEGACPP_TEST_TORCH_PATH to a --target dir)",
)
def test_real_torch(venv: Path) -> None:
    paths = [Path(p) for p in [_torch_path()] if p]
    off = probe(venv, *paths, PROBE_TORCH="1")
    assert off["patched_big"] is False and off["capture"] is False and off["megacpp_modules"] == []
    on = probe(
        venv, *paths, PROBE_TORCH="1", MEGACPP_PATCH_INDUCTOR_SMALL_GPU="1", MEGACPP_PATCH_DYNAMO_CAPTURE_SCALAR="1"
    )
    assert on["big"] is True and on["patched_big"] is True and on["capture"] is True
    assert on["status"]["inductor_small_gpu"]["applied"] and on["status"]["dynamo_capture_scalar"]["applied"]


def test_purelib_is_where_install_writes() -> None:
    assert pth.purelib() == Path(sysconfig.get_paths()["purelib"])


def test_status_command(venv: Path, fake_torch: Path) -> None:
    env = _clean_env(
        PYTHONPATH=os.pathsep.join([str(REPO_ROOT), str(fake_torch)]), MEGACPP_PATCH_DYNAMO_CAPTURE_SCALAR="1"
    )
    proc = subprocess.run(
        [str(venv), "-m", "megacpp_env.runtime", "status"], env=env, capture_output=True, text=True, check=True
    )
    report = json.loads(proc.stdout)
    assert report["pth"] and report["pth"].endswith(pth.PTH_NAME)
    assert report["patches"]["dynamo_capture_scalar"]["state"] == "armed"
    assert report["patches"]["triton_ptxas"]["state"] == "off"
