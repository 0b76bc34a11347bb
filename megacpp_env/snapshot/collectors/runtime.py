"""Runtime patches and hooks active in the inspected environment: which patch gates are set (and
whether the runtime reads them as on), which ``megacpp_env_runtime*.pth`` hook files its site
directories hold (with their content hash), and each patch's state as the runtime itself reports
it *in the inspected interpreter* (the probe asks ``megacpp_env.runtime.status()`` when the hook
ran there at start-up). A patch is ``active`` when its hook armed or applied it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.fsutil import sha256_file
from megacpp_env.runtime import gate_on
from megacpp_env.runtime.catalog import PATCHES

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context

HOOK_GLOB = "megacpp_env_runtime*.pth"
ACTIVE_STATES = ("armed", "applied")


def hook_files(site_dirs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for site in site_dirs:
        for path in sorted(Path(site).glob(HOOK_GLOB)):
            try:
                out[str(path)] = "sha256:" + sha256_file(path)
            except OSError as exc:
                out[str(path)] = f"unreadable: {exc.strerror}"
    return out


def patch_states(environ: Mapping[str, str], probed: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Name -> {state, detail}: the inspected interpreter's own report when its hook ran, else
    ``off`` / ``not-hooked`` from the gate alone."""
    reported = probed if isinstance(probed, Mapping) and "error" not in probed else {}
    out: dict[str, dict[str, Any]] = {}
    for name, (gate, _doc) in sorted(PATCHES.items()):
        rec = reported.get(name) if isinstance(reported.get(name), Mapping) else None
        if rec is not None:
            out[name] = {"state": str(rec.get("state", "")), "detail": str(rec.get("detail", ""))}
        else:
            out[name] = {"state": "not-hooked" if gate_on(gate, environ) else "off", "detail": ""}
    return out


def collect(
    environ: Mapping[str, str], site_dirs: Sequence[str], probed: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    gates = {
        name: {"env": gate, "value": environ.get(gate), "enabled": gate_on(gate, environ)}
        for name, (gate, _doc) in sorted(PATCHES.items())
    }
    states = patch_states(environ, probed)
    out: dict[str, Any] = {
        "patch_gates": gates,
        "hook_files": hook_files(site_dirs),
        "hook_loaded": bool(probed) and "error" not in (probed or {}),
        "patches": states,
        "active": sorted(name for name, st in states.items() if st["state"] in ACTIVE_STATES),
    }
    if isinstance(probed, Mapping) and "error" in probed:
        out["hook_error"] = str(probed["error"])
    return out


def start(ctx: Context) -> Callable[[], dict[str, Any]]:
    return lambda: collect(ctx.environ, ctx.sites(), ctx.probed().get("runtime"))
