"""`doctor`: the live machine against a target: toolchain, GPU, lock, installed files, sources."""

from __future__ import annotations

import json

from megacpp_env import layout
from megacpp_env.cli import main
from megacpp_env.doctor import arch_capability, run_doctor
from megacpp_env.snapshot.collect import take_snapshot
from megacpp_env.snapshot.document import Snapshot
from tests.fixtures.spec import REPO_ROOT, load_data

LOCK_TEMPLATE = """\
lock-version = "1.0"
created-by = "test"
requires-python = ">=3.11"

[[packages]]
name = "demo-pkg"
version = "1.0"
wheels = [{ url = "https://files.example.invalid/demo_pkg-1.0-py3-none-any.whl", hashes = { sha256 = "%s" } }]

[[packages]]
name = "missing-thing"
version = "3.0"
wheels = [{ url = "https://files.example.invalid/missing_thing-3.0-py3-none-any.whl", hashes = { sha256 = "%s" } }]

[[packages]]
name = "other-thing"
version = "2.5"
wheels = [{ url = "https://files.example.invalid/other_thing-2.5-py3-none-any.whl", hashes = { sha256 = "%s" } }]

[[packages]]
name = "windows-only"
version = "1.0"
marker = "sys_platform == 'win32'"
wheels = [{ url = "https://files.example.invalid/windows_only-1.0-py3-none-any.whl", hashes = { sha256 = "%s" } }]
"""
LOCK = LOCK_TEMPLATE % ("0" * 64, "1" * 64, "2" * 64, "3" * 64)


def _by_area(report):
    out = {}
    for f in report.findings:
        out.setdefault(f.area, []).append((f.severity, f.message))
    return out


def test_doctor_checks_lock_installed_files_and_toolchain(tmp_path, stack_data, snap_options, snap_venv):
    spec = load_data(stack_data, tmp_path / "stack.yaml")
    lock = layout.lock_path(spec.root, "smoke", "linux/amd64")
    lock.parent.mkdir(parents=True)
    lock.write_text(LOCK)
    (snap_venv.site / "demo_pkg" / "ops" / "x.py").write_text("patched = True\n")
    snap = take_snapshot(snap_options(spec=spec))
    report = run_doctor(spec, "smoke", snap)
    areas = _by_area(report)
    assert not report.ok
    assert ("error", "missing-thing 3.0: locked, not installed") in areas["lock"]
    assert ("error", "other-thing: installed 2.0, locked 2.5") in areas["lock"]
    assert ("ok", "1 of 3 locked distributions installed as locked") in areas["lock"]
    assert ("error", "demo_pkg 1.0: 1 file(s) modified since install: demo_pkg/ops/x.py") in areas["installed"]
    py = snap.facts["python"]["interpreter"]["version"]
    assert ("error", f"python {py}, target wants 3.13") in areas["toolchain"] or py.startswith("3.13.")
    assert ("ok", "env MEGACPP_PATCH_SMOKE_SHADOW: unset (target sets 0)") in areas["runtime"]  # both off
    assert "gpu" not in areas  # smoke has no GPU promise


def test_missing_lock_and_no_gpu_through_the_cli(tmp_path, monkeypatch, capsys, snap_venv):
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    rc = main(["doctor", "cloud", "--spec", str(REPO_ROOT / "stack.yaml"), "--python", str(snap_venv.python), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    messages = {(f["area"], f["severity"], f["message"]) for f in data["findings"]}
    if not (REPO_ROOT / "locks" / "pylock.cloud-linux-amd64.toml").exists():
        assert (
            "lock",
            "error",
            "no lock for cloud on linux/amd64: locks/pylock.cloud-linux-amd64.toml is missing "
            "(run `megacpp-env lock resolve cloud`); installed distributions cannot be checked",
        ) in messages
    assert any(a == "gpu" and s == "error" and m.startswith("no NVIDIA GPU found") for a, s, m in messages)
    assert any(a == "sources" and "megatron_lm: no checkout found" in m for a, s, m in messages)
    assert main(["doctor", "nope", "--spec", str(REPO_ROOT / "stack.yaml")]) == 2  # a usage error


def _gpu_snap(cap, driver="595.50.01", sms=132, ptxas="13.2"):
    return Snapshot(
        facts={
            "system": {"machine": "x86_64"},
            "compilers": {
                "triton_ptxas": {
                    "path": "/v/triton/backends/nvidia/bin/ptxas",
                    "release": ptxas,
                    "chosen_by": "bundled with triton",
                }
            },
            "gpu": {
                "driver_version": driver,
                "devices": [{"index": 0, "name": "GPU", "compute_capability": cap, "sm_count": sms}],
            },
        }
    )


def test_gpu_architecture_and_driver(tmp_path, stack_data):
    spec = load_data(stack_data, tmp_path / "stack.yaml")
    cloud = _by_area(run_doctor(spec, "cloud", _gpu_snap("9.0")))
    assert ("ok", "GPU 0 GPU (compute capability 9.0) is sm_90a") in cloud["gpu"]
    assert ("ok", "NVIDIA driver 595.50.01 >= minimum 595.45.04") in cloud["toolchain"]
    old = _by_area(run_doctor(spec, "cloud", _gpu_snap("12.1", driver="580.159.04")))
    assert ("error", "GPU 0 GPU (compute capability 12.1) is not among the target's archs: sm_90a, sm_100a") in old[
        "gpu"
    ]
    assert ("error", "NVIDIA driver 580.159.04 < minimum 595.45.04") in old["toolchain"]
    gb10 = run_doctor(spec, "gb10", _gpu_snap("12.1", sms=48))
    assert ("platform", "error") in {(f.area, f.severity) for f in gb10.findings}  # x86_64 is not linux/arm64
    assert ("gpu", "ok") in {(f.area, f.severity) for f in gb10.findings}
    # the lock compared is the target's own (linux/arm64), not one for this machine's platform
    assert gb10.lock.endswith("pylock.gb10-linux-arm64.toml")


def test_arch_capability():
    assert [arch_capability(a) for a in ("sm_90a", "sm_100a", "sm_121a", "sm_120f", "compute_90")] == [
        "9.0",
        "10.0",
        "12.1",
        "12.0",
        "",
    ]


def test_triton_bundled_ptxas_older_than_the_toolkit(tmp_path, stack_data):
    spec = load_data(stack_data, tmp_path / "stack.yaml")
    toolchain = _by_area(run_doctor(spec, "cloud", _gpu_snap("9.0", ptxas="12.8")))["toolchain"]
    assert (
        "warning",
        "Triton will run ptxas 12.8 (bundled with triton, /v/triton/backends/nvidia/bin/ptxas), older "
        "than the toolchain's CUDA 13.2: set TRITON_PTXAS_PATH to the CUDA toolkit's ptxas (sm_121a needs it)",
    ) in toolchain
    assert ("ok", "Triton's ptxas is CUDA 13.2 (bundled with triton)") in _by_area(
        run_doctor(spec, "cloud", _gpu_snap("9.0"))
    )["toolchain"]


def _runtime_findings(spec, value):
    variables = {} if value is None else {"MEGACPP_PATCH_SMOKE_SHADOW": value}
    snap = Snapshot(facts={"system": {"machine": "x86_64"}, "env": {"variables": variables}})
    return [
        (f.severity, f.message) for f in run_doctor(spec, "smoke", snap).findings if f.key.startswith("runtime.env")
    ]


def test_patch_gates_compare_as_the_runtime_reads_them(tmp_path, stack_data):
    spec = load_data(stack_data, tmp_path / "stack.yaml")  # smoke sets MEGACPP_PATCH_SMOKE_SHADOW: "0"
    assert _runtime_findings(spec, None) == [("ok", "env MEGACPP_PATCH_SMOKE_SHADOW: unset (target sets 0)")]
    assert _runtime_findings(spec, "off") == [("ok", "env MEGACPP_PATCH_SMOKE_SHADOW: off (target sets 0)")]
    assert _runtime_findings(spec, "1") == [("warning", "env MEGACPP_PATCH_SMOKE_SHADOW: 1 (target sets 0)")]
    assert _runtime_findings(spec, " TRUE ") == [("warning", "env MEGACPP_PATCH_SMOKE_SHADOW:  TRUE  (target sets 0)")]


def test_python_that_is_not_an_executable_is_a_user_error(tmp_path, capsys):
    rc = main(["doctor", "smoke", "--spec", str(REPO_ROOT / "stack.yaml"), "--python", "/nonexistent"])
    assert rc == 1
    assert capsys.readouterr().err == "megacpp-env doctor: error: --python: /nonexistent: not an executable file\n"
