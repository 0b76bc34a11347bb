"""The GB10 rules: what consumer/DGX-Spark Blackwell (sm_12x) targets need and the dead paths
they refuse. Spec only: no facts are read."""

from __future__ import annotations

import re
from collections.abc import Iterator

from packaging.utils import canonicalize_name
from packaging.version import Version

from megacpp_env.rules.base import Hit, source_rule, target_rule
from megacpp_env.rules.common import admits_below, is_gb10_class, requirements
from megacpp_env.spec.model import Source, Spec, Target

GB10_DEAD_FEATURES = {
    "flash_attention_2": "FA2 source builds give no gain over SDPA on GB10",
    "flash_attention_3": "FA3 source builds give no gain over SDPA on GB10",
    "flash_attention_4": "FlashAttention-4 needs tcgen05/TMEM, absent on sm_12x",
    "tcgen05_kernels": "tcgen05/TMEM kernels do not exist on sm_12x",
    "trtllm_gen_fmha": "trtllm-gen FMHA is a dead path on GB10",
    "b200_tile_configs": "B200 tile configs overflow GB10's ~99 KiB dynamic SMEM",
    "cudnn_mm_fp4": "cuDNN NVFP4 mm_fp4 is a dead path on GB10",
}
FLASH_ATTN_PACKAGES = ("flash-attn", "flash-attn-3", "flash-attn-4", "flash-attention")


@target_rule("GB001", "error")
def bare_arch(spec: Spec, t: Target) -> Iterator[Hit]:
    """no bare sm_120/sm_121 arch (strips block-scaled MMA)

    A bare sm_120/sm_121 arch compiles without the block-scaled MMA instructions NVFP4 kernels need: use
    sm_120a/sm_121a (or the f family).

    Trip: set targets.gb10.gpu.kernel_arch = sm_120
    """
    if not t.gpu:
        return
    if re.fullmatch(r"sm_12[01]", t.gpu.kernel_arch):
        yield (
            f"targets.{t.name}.gpu.kernel_arch",
            f"bare {t.gpu.kernel_arch} strips block-scaled MMA",
            "compile in-house kernels with -arch=sm_120f (family) or sm_121a (exact)",
        )
    for i, a in enumerate(t.gpu.archs):
        if re.fullmatch(r"sm_12[01]", a):
            yield (f"targets.{t.name}.gpu.archs[{i}]", f"bare {a} strips block-scaled MMA", "write sm_121a or sm_120f")


@target_rule("GB002", "error")
def cuda_for_sm121(spec: Spec, t: Target) -> Iterator[Hit]:
    """sm_12x targets need CUDA 13.0 or later

    sm_12x (GB10, RTX 50) needs CUDA 13.0 or later.

    Trip: set toolchains.cuda132-ubuntu2404.cuda = "12.8"
    """
    if is_gb10_class(t) and (not t.toolchain.cuda or Version(t.toolchain.cuda) < Version("13.0")):
        yield (
            f"toolchains.{t.toolchain.name}.cuda",
            f"target {t.name} runs sm_12x but CUDA is {t.toolchain.cuda or 'unset'}",
            "use CUDA 13.x (the stack pins 13.2)",
        )


@target_rule("GB003", "error")
def ptx_isa(spec: Spec, t: Target) -> Iterator[Hit]:
    """sm_121a needs PTX ISA 8.8 or later.

    Trip: set toolchains.cuda132-ubuntu2404.ptx_isa = "8.7"
    """
    isa = t.toolchain.ptx_isa
    if t.gpu and "sm_121a" in t.gpu.archs and (not isa or Version(isa) < Version("8.8")):
        yield (
            f"toolchains.{t.toolchain.name}.ptx_isa",
            f"PTX ISA {isa or 'unset'}: version 8.7 does not support .target sm_121a",
            'set ptx_isa: "8.8"',
        )


@target_rule("GB004", "error", once=True)
def cutlass(spec: Spec, t: Target) -> Iterator[Hit]:
    """CUTLASS 4.4.2 or later on sm_12x

    CUTLASS below 4.4.2 has no working sm_12x kernels: the toolchain's cutlass constraint must not admit an older
    one.

    Trip: set toolchains.cuda132-ubuntu2404.cutlass = ">=4.2"
    """
    tc = t.toolchain  # once per toolchain: its key and message name the toolchain only
    if is_gb10_class(t) and (not tc.cutlass or admits_below(tc.cutlass, "4.4.2")):
        yield (
            f"toolchains.{tc.name}.cutlass",
            f"CUTLASS constraint {tc.cutlass or 'unset'} admits versions "
            "before 4.4.2, which miscompile SM120/SM121 SMEM carve-outs",
            'set cutlass: ">=4.4.2"',
        )


@target_rule("GB005", "error")
def trtllm(spec: Spec, t: Target) -> Iterator[Hit]:
    """TRT-LLM 1.3.0rc2 or later for the NVFP4 MoE path

    The NVFP4 MoE path of TensorRT-LLM needs 1.3.0rc2 or later.

    Trip: add targets.gb10.features = trtllm_nvfp4_moe
    Trip: set toolchains.cuda132-ubuntu2404.tensorrt_llm = ">=1.2"
    """
    c = t.toolchain.tensorrt_llm
    if "trtllm_nvfp4_moe" in t.features and (not c or admits_below(c, "1.3.0rc2")):
        yield (
            f"toolchains.{t.toolchain.name}.tensorrt_llm",
            f"target {t.name} uses the TRT-LLM NVFP4 MoE "
            f"path but the constraint {c or 'unset'} admits versions before 1.3.0rc2",
            'set tensorrt_llm: ">=1.3.0rc2" (with CUTLASS >=4.4.2)',
        )


@target_rule("GB006", "error")
def dead_paths(spec: Spec, t: Target) -> Iterator[Hit]:
    """dead paths on GB10 are refused

    Paths that are dead on GB10 are refused there: FlashAttention 2/3/4, tcgen05 kernels, trtllm-gen FMHA, B200 tile
    configs, cuDNN mm_fp4, flash-attn requirements.

    Trip: add targets.gb10.features = flash_attention_4
    """
    if not is_gb10_class(t):
        return
    for i, feat in enumerate(t.features):
        if feat in GB10_DEAD_FEATURES:
            yield (
                f"targets.{t.name}.features[{i}]",
                f"{feat}: {GB10_DEAD_FEATURES[feat]}",
                "remove it from the GB10 target (SDPA / sm_120f kernels instead)",
            )
    for key, req in requirements(t):
        if canonicalize_name(req.name) in FLASH_ATTN_PACKAGES:
            yield (key, f"{req.name}: FA2/FA3/FA4 builds are dead paths on GB10", "use SDPA on GB10")
    for src in t.sources:
        if any(s in src.repo.lower() for s in ("flash-attention", "flash_attn")):
            yield (f"sources.{src.name}.repo", "FlashAttention source builds are dead paths on GB10", "use SDPA")


@target_rule("GB007", "error")
def te_rht(spec: Spec, t: Target) -> Iterator[Hit]:
    """TransformerEngine NVFP4 needs disable_rht on sm_12x

    TransformerEngine's NVFP4 recipe needs disable_rht on sm_12x.

    Trip: drop targets.gb10.features = te_nvfp4_disable_rht
    Trip: add targets.gb10.features = te_nvfp4
    """
    if is_gb10_class(t) and "te_nvfp4" in t.features and "te_nvfp4_disable_rht" not in t.features:
        yield (
            f"targets.{t.name}.features",
            "TE NVFP4 recipe without disable_rht=True fails on sm_120/sm_121",
            "add te_nvfp4_disable_rht to features",
        )


@target_rule("GB008", "error")
def triton_ptxas(spec: Spec, t: Target) -> Iterator[Hit]:
    """Triton must use the CUDA 13.x ptxas on sm_121a

    Triton ships a ptxas that does not know sm_121a: on sm_121a it must use CUDA 13's (TRITON_PTXAS_PATH or the
    triton_ptxas runtime patch).

    Trip: drop targets.gb10.env.runtime.TRITON_PTXAS_PATH
    Trip: drop targets.gb10.runtime_patches = triton_ptxas
    """
    needs = t.gpu is not None and "sm_121a" in t.gpu.archs
    if needs and "TRITON_PTXAS_PATH" not in t.runtime_env and "triton_ptxas" not in t.runtime_patches:
        fix = "set TRITON_PTXAS_PATH: /usr/local/cuda/bin/ptxas or enable the triton_ptxas patch"
        yield f"targets.{t.name}.env.runtime", "Triton's bundled ptxas (12.8) does not know sm_121a", fix


@target_rule("GB009", "warning")
def inductor_small_gpu(spec: Spec, t: Target) -> Iterator[Hit]:
    """max-autotune GEMM below 68 SMs needs the is_big_gpu override

    Inductor's max-autotune GEMM skips GPUs below 68 SMs (is_big_gpu): GB10 has 48, so the inductor_small_gpu patch
    is needed.

    Trip: drop targets.gb10.runtime_patches = inductor_small_gpu
    """
    if not t.gpu or not t.gpu.sm_count or t.gpu.sm_count >= 68:
        return
    wants = t.runtime_env.get("TORCHINDUCTOR_MAX_AUTOTUNE_GEMM") == "1"
    has = "inductor_small_gpu" in t.runtime_patches and t.runtime_env.get("MEGACPP_PATCH_INDUCTOR_SMALL_GPU") == "1"
    if wants and not has:
        why = f"inductor refuses max_autotune_gemm below 68 SMs ({t.gpu.sm_count} here)"
        yield (
            f"targets.{t.name}.runtime_patches",
            why,
            "enable inductor_small_gpu and MEGACPP_PATCH_INDUCTOR_SMALL_GPU=1",
        )


@target_rule("GB010", "error")
def mfu_peak(spec: Spec, t: Target) -> Iterator[Hit]:
    """MFU on GB10 divides by its own peak

    MFU on GB10 divides by GB10's own BF16 peak, not a datacenter GPU's.

    Trip: set targets.gb10.gpu.peak_bf16_tflops = 989
    """
    if is_gb10_class(t) and t.gpu and t.gpu.peak_bf16_tflops and not 62 <= t.gpu.peak_bf16_tflops <= 100:
        why = f"peak {t.gpu.peak_bf16_tflops:g} TFLOPS is not a GB10 BF16 peak (~62-100)"
        yield f"targets.{t.name}.gpu.peak_bf16_tflops", why, "use GB10's own peak, not H100's"


@target_rule("GB011", "warning")
def serving(spec: Spec, t: Target) -> Iterator[Hit]:
    """GB10 serving runs eager with bounded memory

    vLLM serving on GB10 runs eager with a bounded gpu_memory_utilization (unified memory is shared with the CPU).

    Trip: set targets.gb10.serving.gpu_memory_utilization = 0.98
    """
    if not is_gb10_class(t) or not t.serving:
        return
    if not t.serving.enforce_eager:
        key = f"targets.{t.name}.serving.enforce_eager"
        yield key, "the GB10 serving lane runs with enforce_eager", "set enforce_eager: true"
    if t.serving.gpu_memory_utilization > 0.9:
        why = "unbounded gpu_memory_utilization on 128 GB unified memory starves the host"
        yield f"targets.{t.name}.serving.gpu_memory_utilization", why, "keep it at or below 0.9"


@source_rule("GB012", "warning")
def vllm_cutlass(spec: Spec, src: Source) -> Iterator[Hit]:
    """vLLM builds against a pinned CUTLASS >= 4.4.2, not one fetched by tag

    vLLM's CMake fetches CUTLASS by tag unless VLLM_CUTLASS_SRC_DIR points at a pinned CUTLASS of 4.4.2 or later.

    Trip: drop sources.vllm.fetches.VLLM_CUTLASS_SRC_DIR
    """
    declared = {**src.build_env, **getattr(src, "fetches", {})}
    given = {"VLLM_CUTLASS_SRC_DIR", "FETCHCONTENT_SOURCE_DIR_CUTLASS"} & set(declared)  # vLLM's or CMake's override
    if not re.search(r"/vllm(\.git)?$", src.repo) or given:
        return
    users = [t.name for t in spec.targets.values() if is_gb10_class(t) and src in t.sources]
    if users:
        yield (
            f"sources.{src.name}.build_env",
            f"vLLM's CMake fetches CUTLASS by git tag at build time (v4.2.1 at recent commits): unpinned, and "
            f"older than 4.4.2 for sm_12x targets ({', '.join(users)})",
            "add a pinned CUTLASS (>= 4.4.2) source and set VLLM_CUTLASS_SRC_DIR to its checkout",
        )
