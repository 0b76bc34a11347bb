"""Policy rules over a loaded Spec: the GB10 rules, toolchain alignment and pinning hygiene.

Each rule has a stable id, a severity and yields findings with a message and a remedy.
Pure: reads the Spec (and, for overlays, checks that directories exist); never prints.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from megacpp_env.errors import MegacppEnvError
from megacpp_env.layout import overlay_dir
from megacpp_env.records import as_dict
from megacpp_env.spec.model import Spec, Target

Severity = Literal["error", "warning"]
TORCH_FAMILY = ("torch", "torchvision", "torchaudio", "pytorch-triton", "triton")
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
FORCE_BUILD = {"mamba": "MAMBA_FORCE_BUILD", "causal-conv1d": "CAUSAL_CONV1D_FORCE_BUILD"}
MIN_DRIVER_FOR_CUDA = {"13.0": "580.65.06", "13.2": "595.45.04"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    rule: str
    severity: Severity
    key: str
    message: str
    remedy: str = ""
    line: int = 0

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)

    def format(self, file: str) -> str:
        where = f"{file}:{self.line}" if self.line else file
        text = f"{where}: {self.severity} {self.rule} {self.key}: {self.message}"
        return f"{text} (remedy: {self.remedy})" if self.remedy else text


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    id: str
    severity: Severity
    title: str
    check: Callable[[Spec], Iterator[tuple[str, str, str]]]  # yields (key, message, remedy)

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "severity": self.severity, "title": self.title}


RULES: list[Rule] = []


Check = Callable[[Spec], Iterator[tuple[str, str, str]]]


def rule(rule_id: str, severity: Severity, title: str) -> Callable[[Check], Check]:
    """Register a rule; the function itself is returned unchanged, so it can be imported and tested alone."""

    def register(fn: Check) -> Check:
        RULES.append(Rule(id=rule_id, severity=severity, title=title, check=fn))
        return fn

    return register


def check_rule_ids(ids: Iterable[str]) -> tuple[str, ...]:
    """The rule ids a user named, all of them known; an unknown one is a user error naming the rules."""
    known = {r.id for r in RULES}
    ids = tuple(ids)
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise MegacppEnvError(f"unknown rule {unknown[0]!r} (rules: {', '.join(sorted(known))}; see --list-rules)")
    return ids


def failing(findings: Iterable[Finding], *, strict: bool = False) -> list[Finding]:
    """The findings that fail ``check``: errors, and with ``--strict`` warnings too."""
    return [f for f in findings if f.severity == "error" or strict]


def run_rules(spec: Spec, *, only: tuple[str, ...] = ()) -> list[Finding]:
    findings: list[Finding] = []
    for r in RULES:
        if only and r.id not in only:
            continue
        for key, message, remedy in r.check(spec):
            findings.append(
                Finding(rule=r.id, severity=r.severity, key=key, message=message, remedy=remedy, line=spec.line_of(key))
            )
    return sorted(findings, key=lambda f: (f.severity != "error", f.line, f.rule, f.key))


# -- helpers ---------------------------------------------------------------------------------------
def _sm_major(arch: str) -> int:
    m = re.fullmatch(r"sm_([0-9]+?)([0-9])[af]?", arch)
    return int(m.group(1)) if m else 0


def is_gb10_class(target: Target) -> bool:
    """Targets whose GPUs are consumer/DGX-Spark Blackwell (sm_12x): the GB10 rules apply."""
    return bool(target.gpu) and any(_sm_major(a) == 12 for a in target.gpu.archs)  # type: ignore[union-attr]


def _admits_below(spec_text: str, floor: str) -> bool:
    """Whether a specifier set admits some version below ``floor``.

    It does unless one of its clauses is a lower bound at or above the floor (``>=4.4.2``, ``>4.4.2``,
    ``==4.5.0``, ``~=4.4.2``); ``>4.4.1`` admits 4.4.1.5 and so counts as below.
    """
    floor_v = Version(floor)
    lower_bounds = (">=", "~=", ">", "==", "===")
    for s in SpecifierSet(spec_text):
        if s.operator in lower_bounds and "*" not in s.version and Version(s.version) >= floor_v:
            return False
    return True


def _requirements(target: Target) -> list[tuple[str, Requirement]]:
    out = [(f"targets.{target.name}.requirements[{i}]", Requirement(r)) for i, r in enumerate(target.requirements)]
    for src in target.sources:
        out += [
            (f"sources.{src.name}.extra_requirements[{i}]", Requirement(r))
            for i, r in enumerate(src.extra_requirements)
        ]
    return out


def _provided_instead(target: Target, name: str) -> bool:
    """A package the target removes with an override (``; sys_platform == 'never'``) and gets from a
    declared provider instead (triton from pytorch-triton): it is never installed from any index."""
    canon = canonicalize_name(name)
    provided = {canonicalize_name(p.provides) for p in target.resolutions.provides}
    for o in target.resolutions.overrides:
        req = Requirement(o.requirement)
        if canonicalize_name(req.name) == canon and req.marker is not None and not req.marker.evaluate({}):
            return canon in provided
    return False


# -- GB10 rules ------------------------------------------------------------------------------------
@rule("GB001", "error", "no bare sm_120/sm_121 arch (strips block-scaled MMA)")
def _bare_arch(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        if not t.gpu:
            continue
        if re.fullmatch(r"sm_12[01]", t.gpu.kernel_arch):
            yield (
                f"targets.{t.name}.gpu.kernel_arch",
                f"bare {t.gpu.kernel_arch} strips block-scaled MMA",
                "compile in-house kernels with -arch=sm_120f (family) or sm_121a (exact)",
            )
        for i, a in enumerate(t.gpu.archs):
            if re.fullmatch(r"sm_12[01]", a):
                yield (
                    f"targets.{t.name}.gpu.archs[{i}]",
                    f"bare {a} strips block-scaled MMA",
                    "write sm_121a or sm_120f",
                )


@rule("GB002", "error", "sm_12x targets need CUDA 13.0 or later")
def _cuda_for_sm121(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        if is_gb10_class(t) and (not t.toolchain.cuda or Version(t.toolchain.cuda) < Version("13.0")):
            yield (
                f"toolchains.{t.toolchain.name}.cuda",
                f"target {t.name} runs sm_12x but CUDA is {t.toolchain.cuda or 'unset'}",
                "use CUDA 13.x (the stack pins 13.2)",
            )


@rule("GB003", "error", "sm_121a needs PTX ISA 8.8 or later")
def _ptx_isa(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        if t.gpu and "sm_121a" in t.gpu.archs:
            isa = t.toolchain.ptx_isa
            if not isa or Version(isa) < Version("8.8"):
                yield (
                    f"toolchains.{t.toolchain.name}.ptx_isa",
                    f"PTX ISA {isa or 'unset'}: version 8.7 does not support .target sm_121a",
                    'set ptx_isa: "8.8"',
                )


@rule("GB004", "error", "CUTLASS 4.4.2 or later on sm_12x")
def _cutlass(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for tc_name, tc in _gb10_toolchains(spec):
        if not tc.cutlass or _admits_below(tc.cutlass, "4.4.2"):
            yield (
                f"toolchains.{tc_name}.cutlass",
                f"CUTLASS constraint {tc.cutlass or 'unset'} admits versions "
                "before 4.4.2, which miscompile SM120/SM121 SMEM carve-outs",
                'set cutlass: ">=4.4.2"',
            )


def _gb10_toolchains(spec: Spec) -> Iterator[tuple[str, Any]]:
    seen: set[str] = set()
    for t in spec.targets.values():
        if is_gb10_class(t) and t.toolchain.name not in seen:
            seen.add(t.toolchain.name)
            yield t.toolchain.name, t.toolchain


@rule("GB005", "error", "TRT-LLM 1.3.0rc2 or later for the NVFP4 MoE path")
def _trtllm(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        if "trtllm_nvfp4_moe" in t.features:
            c = t.toolchain.tensorrt_llm
            if not c or _admits_below(c, "1.3.0rc2"):
                yield (
                    f"toolchains.{t.toolchain.name}.tensorrt_llm",
                    f"target {t.name} uses the TRT-LLM NVFP4 MoE "
                    f"path but the constraint {c or 'unset'} admits versions before 1.3.0rc2",
                    'set tensorrt_llm: ">=1.3.0rc2" (with CUTLASS >=4.4.2)',
                )


@rule("GB006", "error", "dead paths on GB10 are refused")
def _dead_paths(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        if not is_gb10_class(t):
            continue
        for i, feat in enumerate(t.features):
            if feat in GB10_DEAD_FEATURES:
                yield (
                    f"targets.{t.name}.features[{i}]",
                    f"{feat}: {GB10_DEAD_FEATURES[feat]}",
                    "remove it from the GB10 target (SDPA / sm_120f kernels instead)",
                )
        for key, req in _requirements(t):
            if canonicalize_name(req.name) in FLASH_ATTN_PACKAGES:
                yield (key, f"{req.name}: FA2/FA3/FA4 builds are dead paths on GB10", "use SDPA on GB10")
        for src in t.sources:
            if any(s in src.repo.lower() for s in ("flash-attention", "flash_attn")):
                yield (f"sources.{src.name}.repo", "FlashAttention source builds are dead paths on GB10", "use SDPA")


@rule("GB007", "error", "TransformerEngine NVFP4 needs disable_rht on sm_12x")
def _te_rht(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        if is_gb10_class(t) and "te_nvfp4" in t.features and "te_nvfp4_disable_rht" not in t.features:
            yield (
                f"targets.{t.name}.features",
                "TE NVFP4 recipe without disable_rht=True fails on sm_120/sm_121",
                "add te_nvfp4_disable_rht to features",
            )


@rule("GB008", "error", "Triton must use the CUDA 13.x ptxas on sm_121a")
def _triton_ptxas(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        needs = t.gpu is not None and "sm_121a" in t.gpu.archs
        if needs and "TRITON_PTXAS_PATH" not in t.runtime_env and "triton_ptxas" not in t.runtime_patches:
            yield (
                f"targets.{t.name}.env.runtime",
                "Triton's bundled ptxas (12.8) does not know sm_121a",
                "set TRITON_PTXAS_PATH: /usr/local/cuda/bin/ptxas or enable the triton_ptxas patch",
            )


@rule("GB009", "warning", "max-autotune GEMM below 68 SMs needs the is_big_gpu override")
def _inductor_small_gpu(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        if not t.gpu or not t.gpu.sm_count or t.gpu.sm_count >= 68:
            continue
        wants = t.runtime_env.get("TORCHINDUCTOR_MAX_AUTOTUNE_GEMM") == "1"
        has = "inductor_small_gpu" in t.runtime_patches and t.runtime_env.get("MEGACPP_PATCH_INDUCTOR_SMALL_GPU") == "1"
        if wants and not has:
            yield (
                f"targets.{t.name}.runtime_patches",
                f"inductor refuses max_autotune_gemm below 68 SMs ({t.gpu.sm_count} here)",
                "enable inductor_small_gpu and MEGACPP_PATCH_INDUCTOR_SMALL_GPU=1",
            )


@rule("GB010", "error", "MFU on GB10 divides by its own peak")
def _mfu_peak(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        if is_gb10_class(t) and t.gpu and t.gpu.peak_bf16_tflops and not 62 <= t.gpu.peak_bf16_tflops <= 100:
            yield (
                f"targets.{t.name}.gpu.peak_bf16_tflops",
                f"peak {t.gpu.peak_bf16_tflops:g} TFLOPS is not a GB10 BF16 peak (~62-100)",
                "use GB10's own peak, not H100's",
            )


@rule("GB011", "warning", "GB10 serving runs eager with bounded memory")
def _serving(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        if is_gb10_class(t) and t.serving:
            if not t.serving.enforce_eager:
                yield (
                    f"targets.{t.name}.serving.enforce_eager",
                    "the GB10 serving lane runs with enforce_eager",
                    "set enforce_eager: true",
                )
            if t.serving.gpu_memory_utilization > 0.9:
                yield (
                    f"targets.{t.name}.serving.gpu_memory_utilization",
                    "unbounded gpu_memory_utilization on 128 GB unified memory starves the host",
                    "keep it at or below 0.9",
                )


@rule("GB012", "warning", "vLLM builds against a pinned CUTLASS >= 4.4.2, not one fetched by tag")
def _vllm_cutlass(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for src in spec.sources.values():
        declared = {**src.build_env, **getattr(src, "fetches", {})}
        if not re.search(r"/vllm(\.git)?$", src.repo) or "VLLM_CUTLASS_SRC_DIR" in declared:
            continue
        users = [t.name for t in spec.targets.values() if is_gb10_class(t) and src in t.sources]
        if users:
            yield (
                f"sources.{src.name}.build_env",
                f"vLLM's CMake fetches CUTLASS by git tag at build time (v4.2.1 at recent commits): unpinned, and "
                f"older than 4.4.2 for sm_12x targets ({', '.join(users)})",
                "add a pinned CUTLASS (>= 4.4.2) source and set VLLM_CUTLASS_SRC_DIR to its checkout",
            )


# -- toolchain and pinning rules -----------------------------------------------------------------
@rule("TC001", "error", "the torch requirement must agree with the CUDA pins")
def _torch_cuda(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        if not t.toolchain.cuda:
            continue
        want = "cu" + t.toolchain.cuda.replace(".", "")
        for key, req in _requirements(t):
            if canonicalize_name(req.name) != "torch":
                continue
            for s in req.specifier:
                local = s.version.partition("+")[2]
                if local.startswith("cu") and local != want:
                    yield (
                        key,
                        f"torch {s} is a {local} build but the toolchain pins CUDA {t.toolchain.cuda}",
                        f"use a +{want} build",
                    )
            index = spec.index_for("torch", t)
            m = re.search(r"/(cu[0-9]+)(/|$)", index.url) if index else None
            if index and m and m.group(1) != want:
                yield (
                    f"indexes.{index.name}.url",
                    f"torch comes from a {m.group(1)} index but target {t.name} pins CUDA {t.toolchain.cuda}",
                    f"use the {want} index",
                )


@rule("TC002", "error", "every source is pinned to a real full commit SHA")
def _placeholder_commit(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for src in spec.sources.values():
        if _looks_like_placeholder(src.commit):
            yield (f"sources.{src.name}.commit", f"the commit {src.commit} is a placeholder", "pin the real 40-hex SHA")


def _looks_like_placeholder(commit: str) -> bool:
    """Two or fewer distinct characters, or a pattern repeating with a period up to 20
    (``abcdabcd…``, ``0123456789abcdef0123…``): never the case for a real SHA-1."""
    if len(set(commit)) <= 2:
        return True
    return any(commit == (commit[:n] * (len(commit) // n + 1))[: len(commit)] for n in range(1, 21))


@rule("TC003", "error", "the torch family comes only from an explicit index on CUDA targets")
def _torch_index(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        if not t.uses_cuda:
            continue
        for key, req in _requirements(t):
            if canonicalize_name(req.name) not in TORCH_FAMILY or _provided_instead(t, req.name):
                continue
            index = spec.index_for(req.name, t)
            if index is None and t.toolchain.cuda_pypi:
                continue  # CUDA from PyPI: PyPI's torch by design (docs/SPEC.md, "CUDA from PyPI")
            if index is None:
                yield (
                    key,
                    f"{req.name} is not pinned to an index: PyPI's torch is a different CUDA build",
                    "list it under an explicit index's packages",
                )
            elif not index.explicit:
                yield (
                    f"indexes.{index.name}.explicit",
                    f"index {index.name} serves {req.name} but is not explicit (dependency confusion)",
                    "set explicit: true",
                )


@rule("TC004", "error", "aligned targets share toolchain, requirements and sources")
def _aligned_toolchains(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for i, group in enumerate(spec.aligned):
        first = spec.targets[group.targets[0]]
        for name in group.targets[1:]:
            other = spec.targets[name]
            for fld in ("gcc", "cuda", "python", "uv", "cudnn", "cutlass"):
                a, b = getattr(first.toolchain, fld), getattr(other.toolchain, fld)
                if a != b:
                    yield (
                        f"aligned[{i}]",
                        f"{fld} differs: {first.name} has {a or 'unset'}, {name} has {b or 'unset'}"
                        " (the stack aligns them on purpose so failures can be attributed)",
                        "use one toolchain for every aligned target",
                    )
            if sorted(first.requirements) != sorted(other.requirements):
                yield (
                    f"targets.{name}.requirements",
                    f"requirements differ from {first.name}'s",
                    "keep aligned targets on one requirement list",
                )
            if [s.name for s in first.sources] != [s.name for s in other.sources]:
                yield (
                    f"targets.{name}.sources",
                    f"sources differ from {first.name}'s",
                    "build the same pinned sources, in the same order, for aligned targets",
                )


@rule("TC005", "warning", "base images are pinned by digest")
def _digest(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        for platform, image in t.base_images.items():
            key = f"targets.{t.name}.base_image"
            if not image.digest:
                yield (
                    f"{key}.{platform}" if f"{key}.{platform}" in spec.lines else key,
                    f"{image} ({platform}) has no @sha256 digest: the tag can move",
                    f"run `megacpp-env pin-base {t.name}`: it asks the image's registry for the digest",
                )


@rule("TC006", "warning", "pre-releases are scoped to an explicit index")
def _prerelease_scope(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for index in spec.indexes.values():
        if index.prerelease and not index.explicit:
            yield (
                f"indexes.{index.name}.prerelease",
                "pre-releases allowed on a non-explicit index leak to every package",
                "make the index explicit",
            )


@rule("TC007", "error", "overlays named by sources exist")
def _overlay_exists(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for src in spec.sources.values():
        if src.overlay and not overlay_dir(spec.root, src.overlay).is_dir():
            yield (
                f"sources.{src.name}.overlay",
                f"overlay directory overlays/{src.overlay}/ does not exist",
                f"capture it: megacpp-env overlay new {src.overlay} --from <checkout>",
            )


@rule("TC008", "error", "mamba_ssm and causal_conv1d are forced to build from source")
def _force_build(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for src in spec.sources.values():
        for repo_part, var in FORCE_BUILD.items():
            if re.search(rf"/{re.escape(repo_part)}(\.git)?$", src.repo) and src.build_env.get(var) != "TRUE":
                yield (
                    f"sources.{src.name}.build_env",
                    f"without {var}=TRUE setup.py downloads a prebuilt wheel",
                    f'set {var}: "TRUE"',
                )


@rule("TC009", "error", "the minimum driver supports the pinned CUDA")
def _min_driver(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for name, tc in spec.toolchains.items():
        need = MIN_DRIVER_FOR_CUDA.get(tc.cuda)
        if need and (not tc.min_driver or Version(tc.min_driver) < Version(need)):
            yield (
                f"toolchains.{name}.min_driver",
                f"CUDA {tc.cuda} needs driver {need} or later, min_driver is {tc.min_driver or 'unset'}",
                f'set min_driver: "{need}"',
            )


@rule("TC010", "error", "TORCH_CUDA_ARCH_LIST covers the target's GPUs")
def _arch_list(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        if not t.gpu:
            continue
        majors = {int(x.split(".")[0]) for x in t.gpu.torch_cuda_arch_list.replace("+PTX", "").split(";")}
        for i, arch in enumerate(t.gpu.archs):
            if _sm_major(arch) not in majors:
                yield (
                    f"targets.{t.name}.gpu.archs[{i}]",
                    f"{arch} is not covered by TORCH_CUDA_ARCH_LIST {t.gpu.torch_cuda_arch_list}",
                    "add its major version to torch_cuda_arch_list",
                )
        env_list = t.build_env.get("TORCH_CUDA_ARCH_LIST")
        if env_list is not None and env_list != t.gpu.torch_cuda_arch_list:
            yield (
                f"targets.{t.name}.env.build.TORCH_CUDA_ARCH_LIST",
                f"{env_list!r} differs from gpu.torch_cuda_arch_list {t.gpu.torch_cuda_arch_list!r}",
                "keep one value",
            )


@rule("TC011", "warning", "CUDA targets describe their GPUs")
def _cuda_without_gpu(spec: Spec) -> Iterator[tuple[str, str, str]]:
    for t in spec.targets.values():
        if t.uses_cuda and not t.gpu:
            yield (
                f"targets.{t.name}",
                "a CUDA toolchain without a gpu: section: arch rules cannot run",
                "add gpu.archs, gpu.kernel_arch and gpu.torch_cuda_arch_list",
            )


def _register_upstream_rules() -> None:
    """The rules that read upstream facts, overlays and the dependency graph (megacpp_env.rules)."""
    from megacpp_env.rules import load_all

    for d in load_all():
        RULES.append(Rule(id=d.id, severity=d.severity, title=d.title, check=d.check))


_register_upstream_rules()
