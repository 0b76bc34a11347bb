"""The names of the shipped runtime patches and the environment variable that switches each on.

The spec loader validates ``targets.*.runtime_patches`` against ``PATCHES``. Stdlib only.
"""

from __future__ import annotations

# what a gate variable must hold to switch its patch on (any case; anything else, or unset, is off)
TRUTHY = ("1", "true", "yes", "on")

# name -> (gate environment variable, one-line description)
PATCHES: dict[str, tuple[str, str]] = {
    "triton_ptxas": (
        "MEGACPP_PATCH_TRITON_PTXAS",
        "point Triton at the CUDA 13.x ptxas when TRITON_PTXAS_PATH is unset and one exists",
    ),
    "inductor_small_gpu": (
        "MEGACPP_PATCH_INDUCTOR_SMALL_GPU",
        "allow inductor max-autotune GEMM on GPUs below 68 SMs (is_big_gpu override)",
    ),
    "dynamo_capture_scalar": (
        "MEGACPP_PATCH_DYNAMO_CAPTURE_SCALAR",
        "torch._dynamo.config.capture_scalar_outputs = True (removes the Liger fused-linear-CE graph break)",
    ),
    "smoke_shadow": (
        "MEGACPP_PATCH_SMOKE_SHADOW",
        "load a shadow copy of megacpp_smoke_ext's pure-Python module (the smoke target's patch)",
    ),
}


def gate_of(name: str) -> str:
    return PATCHES[name][0]
