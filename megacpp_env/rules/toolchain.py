"""Toolchain alignment and pinning hygiene: CUDA builds of torch, real commit pins, explicit
indexes, aligned targets, base image digests, overlays present, forced source builds, drivers and
arch lists. Spec only (and, for overlays, that their directories exist)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from packaging.utils import canonicalize_name
from packaging.version import Version

from megacpp_env.layout import overlay_dir
from megacpp_env.rules.base import Hit, platform_rule, source_rule, spec_rule, target_rule
from megacpp_env.rules.common import provided_instead, requirements, sm_major
from megacpp_env.spec.model import ImageRef, Source, Spec, Target

TORCH_FAMILY = ("torch", "torchvision", "torchaudio", "pytorch-triton", "triton")
FORCE_BUILD = {"mamba": "MAMBA_FORCE_BUILD", "causal-conv1d": "CAUSAL_CONV1D_FORCE_BUILD"}
MIN_DRIVER_FOR_CUDA = {"13.0": "580.65.06", "13.2": "595.45.04"}


@target_rule("TC001", "error")
def torch_cuda(spec: Spec, t: Target) -> Iterator[Hit]:
    """the torch requirement must agree with the CUDA pins

    The torch requirement (its local version, e.g. +cu132) agrees with the CUDA the target pins and the index it
    takes torch from.

    Trip: set indexes.pytorch-nightly-cu132.url = https://download.pytorch.org/whl/nightly/cu130
    """
    if not t.toolchain.cuda:
        return
    want = "cu" + t.toolchain.cuda.replace(".", "")
    for key, req in requirements(t):
        if canonicalize_name(req.name) != "torch":
            continue
        for s in req.specifier:
            local = s.version.partition("+")[2]
            if local.startswith("cu") and local != want:
                cuda = t.toolchain.cuda
                yield key, f"torch {s} is a {local} build but the toolchain pins CUDA {cuda}", f"use a +{want} build"
        index = spec.index_for("torch", t)
        m = re.search(r"/(cu[0-9]+)(/|$)", index.url) if index else None
        if index and m and m.group(1) != want:
            why = f"torch comes from a {m.group(1)} index but target {t.name} pins CUDA {t.toolchain.cuda}"
            yield f"indexes.{index.name}.url", why, f"use the {want} index"


@source_rule("TC002", "error")
def placeholder_commit(spec: Spec, src: Source) -> Iterator[Hit]:
    """every source is pinned to a real full commit SHA

    Every source is pinned to a full commit SHA that is not a placeholder (all zeros, repeated patterns).

    Trip: set sources.vllm.commit = "0000000000000000000000000000000000000000"
    """
    if looks_like_placeholder(src.commit):
        yield (f"sources.{src.name}.commit", f"the commit {src.commit} is a placeholder", "pin the real 40-hex SHA")


def looks_like_placeholder(commit: str) -> bool:
    """Two or fewer distinct characters, or a pattern repeating with a period up to 20
    (``abcdabcd…``, ``0123456789abcdef0123…``): never the case for a real SHA-1."""
    if len(set(commit)) <= 2:
        return True
    return any(commit == (commit[:n] * (len(commit) // n + 1))[: len(commit)] for n in range(1, 21))


@target_rule("TC003", "error")
def torch_index(spec: Spec, t: Target) -> Iterator[Hit]:
    """the torch family comes only from an explicit index on CUDA targets

    On CUDA targets the torch family (torch, torchvision, torchaudio, triton) comes only from an explicit index,
    never from PyPI by accident.

    Trip: set indexes.pytorch-nightly-cu132.explicit = false
    """
    if not t.uses_cuda:
        return
    for key, req in requirements(t):
        if canonicalize_name(req.name) not in TORCH_FAMILY or provided_instead(t, req.name):
            continue
        index = spec.index_for(req.name, t)
        if index is None and t.toolchain.cuda_pypi:
            continue  # CUDA from PyPI: PyPI's torch by design (docs/SPEC.md, "CUDA from PyPI")
        if index is None:
            why = f"{req.name} is not pinned to an index: PyPI's torch is a different CUDA build"
            yield key, why, "list it under an explicit index's packages"
        elif not index.explicit:
            why = f"index {index.name} serves {req.name} but is not explicit (dependency confusion)"
            yield f"indexes.{index.name}.explicit", why, "set explicit: true"


@spec_rule("TC004", "error")
def aligned_toolchains(spec: Spec) -> Iterator[Hit]:
    """aligned targets share toolchain, requirements and sources

    Aligned targets share GCC, CUDA, Python, uv, cuDNN and CUTLASS, their requirements and their sources.

    Trip: set targets.cloud.toolchain = debian-forky-cpu
    """
    for i, group in enumerate(spec.aligned):
        first = spec.targets[group.targets[0]]
        for name in group.targets[1:]:
            yield from _misaligned(i, first, spec.targets[name])


def _misaligned(i: int, first: Target, other: Target) -> Iterator[Hit]:
    for fld in ("gcc", "cuda", "python", "uv", "cudnn", "cutlass"):
        a, b = getattr(first.toolchain, fld), getattr(other.toolchain, fld)
        if a != b:
            yield (
                f"aligned[{i}]",
                f"{fld} differs: {first.name} has {a or 'unset'}, {other.name} has {b or 'unset'}"
                " (the stack aligns them on purpose so failures can be attributed)",
                "use one toolchain for every aligned target",
            )
    if sorted(first.requirements) != sorted(other.requirements):
        why = f"requirements differ from {first.name}'s"
        yield f"targets.{other.name}.requirements", why, "keep aligned targets on one requirement list"
    if [s.name for s in first.sources] != [s.name for s in other.sources]:
        yield (
            f"targets.{other.name}.sources",
            f"sources differ from {first.name}'s",
            "build the same pinned sources, in the same order, for aligned targets",
        )


@platform_rule("TC005", "warning")
def digest(spec: Spec, t: Target, platform: str, image: ImageRef) -> Iterator[Hit]:
    """base images are pinned by digest

    A base image referenced by tag can move under the same name: pin it by @sha256 digest (megacpp-env pin-base).

    Example: fires on the shipped stack.yaml (its base images are tags): stack.yaml:296: warning TC005
    targets.gb10.base_image: nvidia/cuda:13.2.0-cudnn-devel-ubuntu24.04 (linux/arm64) has no @sha256 digest: the tag can
    move (remedy: run `megacpp-env pin-base gb10`: it asks the image's registry for the digest)
    """
    key = f"targets.{t.name}.base_image"
    if not image.digest:
        yield (
            f"{key}.{platform}" if f"{key}.{platform}" in spec.lines else key,
            f"{image} ({platform}) has no @sha256 digest: the tag can move",
            f"run `megacpp-env pin-base {t.name}`: it asks the image's registry for the digest",
        )


@spec_rule("TC006", "warning")
def prerelease_scope(spec: Spec) -> Iterator[Hit]:
    """pre-releases are scoped to an explicit index

    A pre-release is allowed only where it is scoped: to the packages of an explicit index, or per package with a
    reason.

    Trip: set indexes.pytorch-nightly-cu132.explicit = false
    """
    for index in spec.indexes.values():
        if index.prerelease and not index.explicit:
            why = "pre-releases allowed on a non-explicit index leak to every package"
            yield f"indexes.{index.name}.prerelease", why, "make the index explicit"


@source_rule("TC007", "error")
def overlay_exists(spec: Spec, src: Source) -> Iterator[Hit]:
    """overlays named by sources exist

    An overlay a source names exists under overlays/ with its manifest.

    Trip: set sources.vllm.overlay = vllm-missing
    """
    if src.overlay and not overlay_dir(spec.root, src.overlay).is_dir():
        why = f"overlay directory overlays/{src.overlay}/ does not exist"
        yield f"sources.{src.name}.overlay", why, f"capture it: megacpp-env overlay new {src.overlay} --from <checkout>"


@source_rule("TC008", "error")
def force_build(spec: Spec, src: Source) -> Iterator[Hit]:
    """mamba_ssm and causal_conv1d are forced to build from source

    mamba_ssm and causal_conv1d are forced to build from source (their setup.py otherwise downloads a prebuilt
    wheel).

    Trip: set sources.mamba_ssm.build_env.MAMBA_FORCE_BUILD = "FALSE"
    """
    for repo_part, var in FORCE_BUILD.items():
        if re.search(rf"/{re.escape(repo_part)}(\.git)?$", src.repo) and src.build_env.get(var) != "TRUE":
            key = f"sources.{src.name}.build_env"
            yield key, f"without {var}=TRUE setup.py downloads a prebuilt wheel", f'set {var}: "TRUE"'


@spec_rule("TC009", "error")
def min_driver(spec: Spec) -> Iterator[Hit]:
    """the minimum driver supports the pinned CUDA

    The minimum driver supports the pinned CUDA release.

    Trip: set toolchains.cuda132-ubuntu2404.min_driver = "580.0"
    """
    for name, tc in spec.toolchains.items():
        need = MIN_DRIVER_FOR_CUDA.get(tc.cuda)
        if need and (not tc.min_driver or Version(tc.min_driver) < Version(need)):
            why = f"CUDA {tc.cuda} needs driver {need} or later, min_driver is {tc.min_driver or 'unset'}"
            yield f"toolchains.{name}.min_driver", why, f'set min_driver: "{need}"'


@target_rule("TC010", "error")
def arch_list(spec: Spec, t: Target) -> Iterator[Hit]:
    """TORCH_CUDA_ARCH_LIST covers the target's GPUs

    TORCH_CUDA_ARCH_LIST covers every GPU arch the target runs on.

    Trip: set targets.gb10.gpu.torch_cuda_arch_list = "9.0;10.0"
    """
    if not t.gpu:
        return
    majors = {int(x.split(".")[0]) for x in t.gpu.torch_cuda_arch_list.replace("+PTX", "").split(";")}
    for i, arch in enumerate(t.gpu.archs):
        if sm_major(arch) not in majors:
            yield (
                f"targets.{t.name}.gpu.archs[{i}]",
                f"{arch} is not covered by TORCH_CUDA_ARCH_LIST {t.gpu.torch_cuda_arch_list}",
                "add its major version to torch_cuda_arch_list",
            )
    env_list = t.build_env.get("TORCH_CUDA_ARCH_LIST")
    if env_list is not None and env_list != t.gpu.torch_cuda_arch_list:
        key = f"targets.{t.name}.env.build.TORCH_CUDA_ARCH_LIST"
        yield (
            key,
            f"{env_list!r} differs from gpu.torch_cuda_arch_list {t.gpu.torch_cuda_arch_list!r}",
            "keep one value",
        )


@target_rule("TC011", "warning")
def cuda_without_gpu(spec: Spec, t: Target) -> Iterator[Hit]:
    """CUDA targets describe their GPUs

    A CUDA target describes its GPUs (gpu: archs, kernel_arch, torch_cuda_arch_list): the arch rules need them.

    Trip: drop targets.gb10.gpu
    """
    if t.uses_cuda and not t.gpu:
        yield (
            f"targets.{t.name}",
            "a CUDA toolchain without a gpu: section: arch rules cannot run",
            "add gpu.archs, gpu.kernel_arch and gpu.torch_cuda_arch_list",
        )
