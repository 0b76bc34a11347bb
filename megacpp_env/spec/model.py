"""Typed, frozen records of the stack spec. Built only by ``spec.loader``; never re-read YAML.

Mappings are stored as plain dicts with sorted keys (frozen records, read-only by convention);
sequences are tuples. ``to_dict`` gives the canonical JSON-able view used for hashing and ``show``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from megacpp_env.fsutil import canonical_hash
from megacpp_env.layout import checkout_dir_name
from megacpp_env.records import HIDDEN, as_dict
from megacpp_env.sanity import SanityCheck

SCHEMA_VERSION = 1
INSTALL_MODES = ("wheel", "path")
FEATURES = (
    "nvfp4_inference",
    "te_nvfp4",
    "te_nvfp4_disable_rht",
    "cuda_graphs_allowlist",
    "flash_attention_2",
    "flash_attention_3",
    "flash_attention_4",
    "tcgen05_kernels",
    "trtllm_gen_fmha",
    "b200_tile_configs",
    "cudnn_mm_fp4",
    "trtllm_nvfp4_moe",
)

Install = Literal["wheel", "path"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageRef:
    """A container image reference: ``[registry/]name[:tag][@sha256:digest]``."""

    name: str
    tag: str = ""
    digest: str = ""

    def __str__(self) -> str:
        out = self.name
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "tag": self.tag, "digest": self.digest, "ref": str(self)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Index:
    name: str
    url: str
    explicit: bool = False
    packages: tuple[str, ...] = ()
    prerelease: bool = False
    reachable_here: bool = True

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class Toolchain:
    name: str
    gcc: str
    python: str
    uv: str
    cuda: str = ""
    # CUDA from PyPI wheels (``cuda: {version, pypi}``): these requirements are locked into the target's
    # toolchain lock and installed by hash into their own prefix, not the venv. Empty: CUDA comes with
    # the base image (or there is none).
    cuda_pypi: tuple[str, ...] = ()
    ptx_isa: str = ""
    min_driver: str = ""
    cudnn: str = ""
    cutlass: str = ""
    tensorrt_llm: str = ""
    apt_repositories: tuple[str, ...] = ()
    apt_packages: tuple[str, ...] = ()
    apt_options: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = as_dict(self)
        if not self.cuda_pypi:  # absent when unused: toolchains without it keep their digest
            del out["cuda_pypi"]
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceJobs:
    """How a source's build parallelises, beyond its facts. What the build reads (MAX_JOBS,
    NVCC_THREADS, ...), the files it compiles and a hard-coded ``--threads`` come from its facts
    (``sourceplans.jobs_inputs``); ``nvcc_threads`` is only for a source without facts: the
    ``nvcc --threads`` its build passes whatever the environment says."""

    nvcc_threads: int = 0

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class Source:
    """A pinned source. Its own runtime and build requirements are upstream facts
    (``facts/<name>.toml``); ``extra_requirements`` is only what the stack adds on top (build tools for
    ``--no-build-isolation`` builds, run-time packages the stack uses); ``drop_requirements`` names
    requirements of the facts that the source's own build removes (vLLM's ``use_existing_torch.py``
    strips every torch line before it builds), each with the reason. ``needs`` names other sources
    it cannot work without at run time although its metadata does not say so (name -> reason).
    ``subdir`` builds the distribution in a subdirectory of the checkout (FlashInfer's jit-cache);
    ``provisional`` says why the pin itself is not verified yet."""

    name: str
    repo: str
    commit: str
    ref: str = ""
    submodules: bool = False
    install: Install = "wheel"
    overlay: str = ""
    pre_build: tuple[str, ...] = ()
    build_env: Mapping[str, str] = field(default_factory=dict)
    extra_requirements: tuple[str, ...] = ()
    drop_requirements: Mapping[str, str] = field(default_factory=dict)  # package -> why the build drops it
    needs: Mapping[str, str] = field(default_factory=dict)
    subdir: str = ""
    provisional: str = ""
    sanity: SanityCheck = field(default_factory=SanityCheck)
    # Build-time fetches made hermetic: env var the build reads -> name of another pinned source whose
    # checkout it points at (e.g. VLLM_CUTLASS_SRC_DIR: cutlass instead of CMake's FetchContent), or CMake's
    # own FETCHCONTENT_SOURCE_DIR_<NAME>, appended to CMAKE_ARGS as -D<NAME>=<checkout>.
    fetches: Mapping[str, str] = field(default_factory=dict)
    # Build-time fetches the spec cannot pin yet: env var -> why (reported; the sealed build fails on them).
    unpinned_fetches: Mapping[str, str] = field(default_factory=dict)
    jobs: SourceJobs = field(default_factory=SourceJobs)
    # build_env variable -> why the build needs it, where no facts show the build reading it (UP001).
    # Policy text, not a build input: left out of to_dict, so it changes no rendered input digest.
    build_env_reasons: Mapping[str, str] = field(default_factory=dict, metadata=HIDDEN)
    # Declared exceptions to verification: a path of the checkout (a submodule, or a file inside the
    # source or a submodule) whose pinned object cannot be obtained -> why. Such a path is left out,
    # never stood in for, and `verify-checkout` reports it (a present path is still judged by content).
    unobtainable: Mapping[str, str] = field(default_factory=dict)
    # Why this source's tree cannot be read here (no snapshot holds its pin): what the facts would say of
    # it (its submodules, the files a build reads from it) is unverified, and `check` says so (UP015).
    # Policy text, not a build input.
    unread: str = field(default="", metadata=HIDDEN)
    # Finding code -> why it cannot be fixed here: ``check`` reports that code's findings on this source as
    # suppressed, with the reason (``megacpp_env.suppress``). Policy text, not a build input.
    ignore: Mapping[str, str] = field(default_factory=dict, metadata=HIDDEN)

    @property
    def dist_dir_name(self) -> str:
        """The directory name a checkout of this source gets by default (``/opt/src/<this>``)."""
        return checkout_dir_name(self.name)

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuSpec:
    archs: tuple[str, ...]
    kernel_arch: str
    torch_cuda_arch_list: str
    sm_count: int = 0
    peak_bf16_tflops: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class Serving:
    enforce_eager: bool = True
    gpu_memory_utilization: float = 0.9

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildSettings:
    """Parallelism for source builds. 0 means: derive from the build machine's memory."""

    max_jobs: int = 0
    nvcc_threads: int = 0
    mem_per_job_gib: int = 4

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class Override:
    """A reviewed resolution: ``requirement`` replaces every requirement on its package (uv's
    ``override-dependencies``); ``sys_platform == 'never'`` as marker removes them."""

    requirement: str
    reason: str
    requirers: tuple[str, ...] = ()  # distributions whose own requirement it overrules (post-install check)

    def to_dict(self) -> dict[str, Any]:
        return {"requirement": self.requirement, "reason": self.reason, "requirers": list(self.requirers)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Provides:
    """A distribution that supplies another one's modules under a different name (pytorch-triton
    provides triton): a requirement on ``provides`` is met by ``provider`` at the provider's version."""

    provider: str
    provides: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"provider": self.provider, "provides": self.provides, "reason": self.reason}


@dataclass(frozen=True, kw_only=True, slots=True)
class Resolutions:
    overrides: tuple[Override, ...] = ()
    provides: tuple[Provides, ...] = ()
    prereleases: Mapping[str, str] = field(default_factory=dict)  # package -> why a pre-release is allowed

    def to_dict(self) -> dict[str, Any]:
        return {
            "overrides": [o.to_dict() for o in self.overrides],
            "provides": [p.to_dict() for p in self.provides],
            "prereleases": dict(self.prereleases),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ArtifactSet:
    """Prebuilt artifacts a build or run needs that no index serves (FlashInfer's cubins): files listed
    in one ``checksums.txt`` per directory under ``url``, each ``checksums.txt`` pinned by its sha256.
    ``env`` is the variable that points the consumer at a local copy; ``source`` the pinned source whose
    facts pin the same directories."""

    name: str
    url: str
    env: str
    dirs: Mapping[str, str]  # directory (relative to url) -> sha256 of its checksums.txt
    source: str = ""
    reachable_here: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": self.url,
            "env": self.env,
            "source": self.source,
            "reachable_here": self.reachable_here,
            "dirs": dict(self.dirs),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    name: str
    description: str
    platforms: tuple[str, ...]
    base_images: Mapping[str, ImageRef]  # platform -> image
    toolchain: Toolchain
    requirements: tuple[str, ...] = ()
    sources: tuple[Source, ...] = ()
    runtime_patches: tuple[str, ...] = ()
    features: tuple[str, ...] = ()
    gpu: GpuSpec | None = None
    serving: Serving | None = None
    build_env: Mapping[str, str] = field(default_factory=dict)
    runtime_env: Mapping[str, str] = field(default_factory=dict)
    source_env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # source -> build env here
    build: BuildSettings = field(default_factory=BuildSettings)
    resolutions: Resolutions = field(default_factory=Resolutions)
    artifacts: tuple[str, ...] = ()
    # The spec's indexes this target resolves with (``targets.T.indexes``); None: all of them. ``[]``
    # takes every package from the default index (PyPI), e.g. PyPI's torch where the spec pins torch
    # to the nightly index for the production targets.
    indexes: tuple[str, ...] | None = None
    source_sanity: Mapping[str, SanityCheck] = field(default_factory=dict)  # source -> checks added here
    # Finding code -> why it cannot be fixed here: ``check`` (and ``doctor``) report that code's findings on
    # this target as suppressed, with the reason. Policy text, not a build input (left out of to_dict).
    ignore: Mapping[str, str] = field(default_factory=dict)

    def sanity_for(self, source: Source) -> SanityCheck:
        """The source's own sanity checks, then this target's additions (``targets.T.sanity.<source>``)."""
        extra = self.source_sanity.get(source.name)
        if extra is None:
            return source.sanity
        own = source.sanity
        return SanityCheck(
            imports=(*own.imports, *extra.imports),
            statements=(*own.statements, *extra.statements),
            vllm_models=(*own.vllm_models, *extra.vllm_models),
        )

    def uses_index(self, name: str) -> bool:
        return self.indexes is None or name in self.indexes

    def build_env_for(self, source: Source) -> dict[str, str]:
        """The build environment ``source`` gets on this target: the target's, then the source's own,
        then the target's per-source values (``env.sources.<name>``); later ones win."""
        return {**self.build_env, **source.build_env, **self.source_env.get(source.name, {})}

    @property
    def uses_cuda(self) -> bool:
        return bool(self.toolchain.cuda)

    def base_image(self, platform: str) -> ImageRef:
        return self.base_images[platform]

    def pick_platform(self, platform: str = "") -> str:
        """``platform`` when this target is built for it; "" picks the first. Any other is refused."""
        from megacpp_env.errors import RefusedError

        if not platform:
            return self.platforms[0]
        if platform not in self.platforms:
            raise RefusedError(
                f"target {self.name} is not built for {platform} (platforms: {', '.join(self.platforms)})"
            )
        return platform

    def all_requirements(self) -> tuple[str, ...]:
        """The target's own requirements followed by what the spec adds per source, in spec order (not
        deduplicated). The sources' own requirements are upstream facts: ``megacpp_env.deps.graph``."""
        out = list(self.requirements)
        for src in self.sources:
            out.extend(src.extra_requirements)
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "platforms": list(self.platforms),
            "base_images": {p: img.to_dict() for p, img in sorted(self.base_images.items())},
            "toolchain": self.toolchain.to_dict(),
            "requirements": list(self.requirements),
            "sources": [s.name for s in self.sources],
            "runtime_patches": list(self.runtime_patches),
            "features": list(self.features),
            "gpu": self.gpu.to_dict() if self.gpu else None,
            "serving": self.serving.to_dict() if self.serving else None,
            "build_env": dict(self.build_env),
            "runtime_env": dict(self.runtime_env),
            "source_env": {k: dict(v) for k, v in sorted(self.source_env.items())},
            "build": self.build.to_dict(),
            "resolutions": self.resolutions.to_dict(),
            "artifacts": list(self.artifacts),
            **({"indexes": list(self.indexes)} if self.indexes is not None else {}),
            **({"sanity": {k: v.to_dict() for k, v in self.source_sanity.items()}} if self.source_sanity else {}),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Alignment:
    targets: tuple[str, ...]
    allow_divergence: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotConfig:
    golden_dir: str = ".megacpp/golden"
    ignore: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class Spec:
    path: Path
    project: str
    indexes: Mapping[str, Index]
    toolchains: Mapping[str, Toolchain]
    sources: Mapping[str, Source]
    targets: Mapping[str, Target]
    aligned: tuple[Alignment, ...] = ()
    artifacts: Mapping[str, ArtifactSet] = field(default_factory=dict)
    snapshot: SnapshotConfig = field(default_factory=SnapshotConfig)
    schema_version: int = SCHEMA_VERSION
    lines: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    @property
    def root(self) -> Path:
        """The directory holding stack.yaml; relative paths (overlays/, locks/, images/) hang off it."""
        return self.path.resolve().parent

    def line_of(self, key: str) -> int:
        """The stack.yaml line of a dotted key path (0 when unknown), for findings that point at the spec."""
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key.rpartition(".")[0]
        return 0

    def target(self, name: str) -> Target:
        from megacpp_env.errors import SpecError

        try:
            return self.targets[name]
        except KeyError:
            raise SpecError(
                f"no target {name!r} (targets: {', '.join(self.targets)})", file=str(self.path), key="targets"
            ) from None

    def source(self, name: str) -> Source:
        from megacpp_env.errors import SpecError

        try:
            return self.sources[name]
        except KeyError:
            raise SpecError(
                f"no source {name!r} (sources: {', '.join(self.sources)})", file=str(self.path), key="sources"
            ) from None

    def target_indexes(self, target: Target) -> tuple[Index, ...]:
        """The indexes ``target`` resolves with, by name (``targets.T.indexes``; default all)."""
        return tuple(self.indexes[n] for n in sorted(self.indexes) if target.uses_index(n))

    def index_for(self, package: str, target: Target | None = None) -> Index | None:
        """The explicit index a package is pinned to, if any (names compared canonically); with
        ``target``, only among the indexes that target uses."""
        from packaging.utils import canonicalize_name

        want = canonicalize_name(package)
        for index in self.indexes.values():
            if target is not None and not target.uses_index(index.name):
                continue
            if any(canonicalize_name(p) == want for p in index.packages):
                return index
        return None

    def aligned_with(self, target: str) -> tuple[str, ...]:
        for group in self.aligned:
            if target in group.targets:
                return group.targets
        return (target,)

    def target_view(self, name: str) -> dict[str, Any]:
        """The resolved view of one target (``show``): its fields, its sources, the targets aligned
        with it, the indexes, and a digest over all of that."""
        target = self.target(name)
        view: dict[str, Any] = target.to_dict()
        view["sources"] = [s.to_dict() for s in target.sources]
        view["aligned_with"] = [n for n in self.aligned_with(target.name) if n != target.name]
        view["indexes"] = [i.to_dict() for i in self.indexes.values()]
        view["target_digest"] = canonical_hash(view)
        return view

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "project": self.project,
            "indexes": {k: v.to_dict() for k, v in sorted(self.indexes.items())},
            "toolchains": {k: v.to_dict() for k, v in sorted(self.toolchains.items())},
            "sources": {k: v.to_dict() for k, v in sorted(self.sources.items())},
            "targets": {k: v.to_dict() for k, v in sorted(self.targets.items())},
            "aligned": [a.to_dict() for a in self.aligned],
            "artifacts": {k: v.to_dict() for k, v in sorted(self.artifacts.items())},
            "snapshot": self.snapshot.to_dict(),
        }

    def digest(self) -> str:
        """sha256 of the canonical JSON of the whole spec (independent of YAML formatting and comments)."""
        return canonical_hash(self.to_dict())
