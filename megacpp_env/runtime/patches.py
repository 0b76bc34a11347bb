"""The shipped runtime patches (names and gates in ``catalog.py``). Each ``arm_*`` function runs
once from ``hook.install()`` when its gate is on; none writes to disk. Stdlib only.

- ``triton_ptxas``: when ``TRITON_PTXAS_PATH`` is unset, point it at a CUDA 13.x ``ptxas``
  (``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, ``/usr/local/cuda/bin``, then ``PATH``), checked by
  running ``ptxas --version``. Triton's bundled ptxas (12.8) does not know sm_121a.
- ``inductor_small_gpu``: after ``torch._inductor.utils`` is imported, ``is_big_gpu`` returns True
  (inductor refuses max-autotune GEMM below 68 SMs; GB10 has 48).
- ``dynamo_capture_scalar``: after ``torch._dynamo.config`` is imported,
  ``capture_scalar_outputs = True``.
- ``smoke_shadow``: ``megacpp_smoke_ext.greeting`` is loaded from the shadow tree
  ``<overlays/runtime>/smoke_shadow/`` (see ``shadow_root``).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from megacpp_env.layout import IMAGE_HOME
from megacpp_env.runtime import HOME_ENV
from megacpp_env.runtime.finders import POST_IMPORT, SHADOWS, record

MIN_PTXAS = (13, 0)
SHADOW_MANIFEST = "shadow.toml"


# ---- triton_ptxas -------------------------------------------------------------------------------


def ptxas_candidates() -> list[str]:
    out = [f"{os.environ[var]}/bin/ptxas" for var in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(var)]
    out.append("/usr/local/cuda/bin/ptxas")
    on_path = shutil.which("ptxas")
    if on_path:
        out.append(on_path)
    return list(dict.fromkeys(out))


def ptxas_version(path: str) -> tuple[int, int] | None:
    """``(13, 2)`` from ``ptxas --version`` ("Cuda compilation tools, release 13.2, V13.2.51")."""
    if not (Path(path).is_file() and os.access(path, os.X_OK)):
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"release (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def arm_triton_ptxas() -> None:
    name = "triton_ptxas"
    if os.environ.get("TRITON_PTXAS_PATH"):
        record(name, "skipped", f"TRITON_PTXAS_PATH already set to {os.environ['TRITON_PTXAS_PATH']}")
        return
    seen = []
    for cand in ptxas_candidates():
        version = ptxas_version(cand)
        if version is not None and version >= MIN_PTXAS:
            os.environ["TRITON_PTXAS_PATH"] = cand
            record(name, "applied", f"TRITON_PTXAS_PATH={cand} (ptxas {version[0]}.{version[1]})")
            return
        if version is not None:
            seen.append(f"{cand} is {version[0]}.{version[1]}")
    record(name, "skipped", "no CUDA >= 13 ptxas found" + (f" ({'; '.join(seen)})" if seen else ""))


# ---- torch post-import patches ------------------------------------------------------------------


def _always_big(module: ModuleType) -> str:
    original = module.is_big_gpu
    if getattr(original, "__megacpp_patched__", False):
        return "is_big_gpu already overridden"

    @functools.wraps(original)
    def is_big_gpu(*_args: Any, **_kwargs: Any) -> bool:
        return True

    is_big_gpu.__megacpp_patched__ = True  # type: ignore[attr-defined]
    setattr(module, "is_big_gpu", is_big_gpu)  # noqa: B010 (ModuleType has no declared attribute)
    return f"{module.__name__}.is_big_gpu returns True (original kept as __wrapped__)"


def _capture_scalar(module: ModuleType) -> str:
    setattr(module, "capture_scalar_outputs", True)  # noqa: B010 (ModuleType has no declared attribute)
    return f"{module.__name__}.capture_scalar_outputs = True"


def arm_inductor_small_gpu() -> None:
    POST_IMPORT.add("torch._inductor.utils", "inductor_small_gpu", _always_big)


def arm_dynamo_capture_scalar() -> None:
    POST_IMPORT.add("torch._dynamo.config", "dynamo_capture_scalar", _capture_scalar)


# ---- shadow trees -------------------------------------------------------------------------------


def shadow_root() -> Path | None:
    """The runtime overlay tree: ``$MEGACPP_ENV_HOME/overlays/runtime``, else the image's
    ``/opt/megacpp-env/overlays/runtime``, else ``overlays/runtime`` of the megacpp-env source tree
    this package is imported from (a git checkout or editable install). None when none exists."""
    candidates = []
    if os.environ.get(HOME_ENV):
        candidates.append(Path(os.environ[HOME_ENV]) / "overlays" / "runtime")
    candidates.append(Path(IMAGE_HOME) / "overlays" / "runtime")
    candidates.append(Path(__file__).resolve().parents[2] / "overlays" / "runtime")
    return next((c for c in candidates if c.is_dir()), None)


def arm_shadow(name: str) -> None:
    root = shadow_root()
    manifest = root / name / SHADOW_MANIFEST if root else None
    if manifest is None or not manifest.is_file():
        record(name, "skipped", f"no shadow tree {name}/{SHADOW_MANIFEST} (set {HOME_ENV})")
        return
    data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    for mod in data.get("modules", []):
        shadow = manifest.parent / mod["path"]
        SHADOWS.entries[mod["module"]] = (name, str(shadow), mod["base_sha256"], mod["sha256"])
    record(name, "armed", f"shadows {', '.join(m['module'] for m in data.get('modules', []))} from {manifest.parent}")


ARMERS: dict[str, Callable[[], None]] = {
    "triton_ptxas": arm_triton_ptxas,
    "inductor_small_gpu": arm_inductor_small_gpu,
    "dynamo_capture_scalar": arm_dynamo_capture_scalar,
    "smoke_shadow": functools.partial(arm_shadow, "smoke_shadow"),
}
