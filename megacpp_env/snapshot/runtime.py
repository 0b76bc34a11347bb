"""Runtime patches and hooks active in the inspected environment: which patch gates are set, and
which ``megacpp_env_runtime*.pth`` hook files its site directories hold (with their content hash)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from megacpp_env.runtime.catalog import PATCHES

HOOK_GLOB = "megacpp_env_runtime*.pth"


def hook_files(site_dirs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for site in site_dirs:
        for path in sorted(Path(site).glob(HOOK_GLOB)):
            try:
                out[str(path)] = "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError as exc:
                out[str(path)] = f"unreadable: {exc.strerror}"
    return out


def collect(environ: Mapping[str, str], site_dirs: Sequence[str]) -> dict[str, Any]:
    gates = {name: environ.get(gate) for name, (gate, _doc) in sorted(PATCHES.items())}
    return {
        "patch_gates": {name: {"env": PATCHES[name][0], "value": value} for name, value in gates.items()},
        "hook_files": hook_files(site_dirs),
    }
