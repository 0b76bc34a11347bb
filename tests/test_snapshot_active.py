"""The snapshot reports what is active: an overlay applied to a real checkout of the smoke source
(by the real overlay API), and a runtime patch whose gate is on in an interpreter whose .pth hook
was installed by the real ``python -m megacpp_env.runtime install``."""

from __future__ import annotations

import os
import subprocess

from megacpp_env import layout
from megacpp_env.checkout import checkout_source, default_dest
from megacpp_env.overlay import apply_overlay
from megacpp_env.snapshot.collect import take_snapshot
from megacpp_env.snapshot.diff import diff_snapshots
from megacpp_env.spec import load_spec
from tests.conftest import REPO_ROOT


def _applied_checkout(spec, dest):
    source = spec.sources["megacpp_smoke_ext"]
    checkout_source(source, dest)
    status = apply_overlay(layout.overlay_dir(spec.root, source.overlay), dest)
    assert status.state == "applied"


def test_applied_overlay_is_reported_for_the_spec_checkout(smoke_spec, snap_options):
    spec = load_spec(smoke_spec)
    dest = default_dest(spec.root, spec.sources["megacpp_smoke_ext"])
    _applied_checkout(spec, dest)
    checkout = take_snapshot(snap_options(spec=spec)).facts["checkouts"]["megacpp_smoke_ext"]
    assert (checkout["path"], checkout["matches_pin"]) == (str(dest.resolve()), True)
    overlay = checkout["overlay_status"]
    assert (overlay["name"], overlay["state"], overlay["ok"]) == ("smoke-ext", "applied", True)
    assert set(overlay["files"].values()) == {"applied"}


def test_applied_overlay_is_reported_for_a_checkout_given_with_paths(smoke_spec, snap_options, tmp_path):
    spec = load_spec(smoke_spec)
    elsewhere = tmp_path / "work" / "smoke"
    _applied_checkout(spec, elsewhere)
    checkouts = take_snapshot(snap_options(spec=spec, paths=(elsewhere,))).facts["checkouts"]
    assert list(checkouts) == ["megacpp_smoke_ext"]  # matched to the spec's source by its remote
    assert checkouts["megacpp_smoke_ext"]["overlay_status"]["state"] == "applied"


def test_runtime_patch_gate_and_installed_hook_are_reported_active(snap_options, snap_venv):
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    argv = [str(snap_venv.python), "-m", "megacpp_env.runtime", "install"]
    subprocess.run(argv, env=env, check=True, capture_output=True)
    hook = snap_venv.site / "megacpp_env_runtime.pth"
    assert hook.is_file()
    base = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO_ROOT)}
    on = take_snapshot(snap_options(environ={**base, "MEGACPP_PATCH_SMOKE_SHADOW": "1"}))
    runtime = on.facts["runtime"]
    assert list(runtime["hook_files"]) == [str(hook)]
    assert runtime["hook_loaded"] is True
    assert runtime["active"] == ["smoke_shadow"]
    assert runtime["patches"]["smoke_shadow"]["state"] == "armed"
    assert runtime["patches"]["triton_ptxas"]["state"] == "off"
    off = take_snapshot(snap_options(environ={**base, "MEGACPP_PATCH_SMOKE_SHADOW": "0"}))
    assert (off.facts["runtime"]["active"], off.facts["runtime"]["hook_loaded"]) == ([], False)
    messages = [f.message for f in diff_snapshots(off, on).findings if f.area == "runtime"]
    assert "runtime patch smoke_shadow: off -> armed" in messages


def test_gate_on_without_the_hook_is_not_active(snap_options):
    runtime = take_snapshot(
        snap_options(
            environ={"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO_ROOT), "MEGACPP_PATCH_SMOKE_SHADOW": "yes"}
        )
    ).facts["runtime"]
    assert runtime["patches"]["smoke_shadow"] == {"state": "not-hooked", "detail": ""}
    assert runtime["active"] == []
