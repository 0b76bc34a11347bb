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
from megacpp_env.records import HIDDEN, Record, as_dict
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
class Index(Record):
    name: str
    url: str
    """The index's simple-API URL (https, http or file)."""
    explicit: bool = False
    """Used only by the packages listed under it (uv's explicit index): none of them can come from anywhere else."""
    packages: tuple[str, ...] = ()
    """Packages pinned to this index (a package may be pinned to one index only)."""
    prerelease: bool = False
    """Pre-releases are allowed for the packages of this index."""
    reachable_here: bool = True
    """false: `lock check` reports the lock as unlocked (index unreachable here) instead of trying."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Toolchain:
    name: str
    gcc: str
    """GCC version of the image (a PEP 440 version such as "15")."""
    python: str
    """Python version of the venv (e.g. "3.13")."""
    uv: str
    """uv version the image installs and locks with."""
    cuda: str = ""
    """CUDA release: a version (the base image's CUDA) or {version, pypi} (CUDA from PyPI wheels)."""
    # CUDA from PyPI wheels (``cuda: {version, pypi}``): these requirements are locked into the target's
    # toolchain lock and installed by hash into their own prefix, not the venv. Empty: CUDA comes with
    # the base image (or there is none).
    cuda_pypi: tuple[str, ...] = ()
    """CUDA from PyPI: the wheels' requirements, locked into the target's toolchain lock."""
    ptx_isa: str = ""
    """PTX ISA version the toolchain emits (sm_121a needs 8.8 or later)."""
    min_driver: str = ""
    """Oldest NVIDIA driver the pinned CUDA supports (a version such as "580.65")."""
    cudnn: str = ""
    """cuDNN the stack expects (a PEP 440 specifier)."""
    cutlass: str = ""
    """CUTLASS the stack expects (a PEP 440 specifier; 4.4.2 or later on sm_12x)."""
    tensorrt_llm: str = ""
    """TensorRT-LLM the stack expects (a PEP 440 specifier)."""
    apt_repositories: tuple[str, ...] = ()
    """Ubuntu PPAs added before apt installs (ppa:owner/name)."""
    apt_packages: tuple[str, ...] = ()
    """Debian packages installed into the image (name, optional =version)."""
    apt_options: tuple[str, ...] = ()
    """apt options (Name=value), e.g. APT::Install-Recommends=false."""

    def to_dict(self) -> dict[str, Any]:
        out = as_dict(self)
        if not self.cuda_pypi:  # absent when unused: toolchains without it keep their digest
            del out["cuda_pypi"]
        return out


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceJobs(Record):
    """How a source's build parallelises, beyond its facts. What the build reads (MAX_JOBS,
    NVCC_THREADS, ...), the files it compiles and a hard-coded ``--threads`` come from its facts
    (``sourceplans.jobs_inputs``); ``nvcc_threads`` is only for a source without facts: the
    ``nvcc --threads`` its build passes whatever the environment says."""

    nvcc_threads: int = 0
    """For a source without facts only: the nvcc --threads its build passes whatever the environment says."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Source(Record):
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
    """The git repository (https, git, ssh or file URL; no credentials)."""
    commit: str
    """The pinned commit: 40 lowercase hex digits."""
    ref: str = ""
    """The tag or branch the commit was taken from (informational)."""
    submodules: bool = False
    """Check submodules out at the commits the pin records."""
    install: Install = "wheel"
    """wheel: built with pip wheel --no-build-isolation; path: the checkout on sys.path by a .pth."""
    overlay: str = ""
    """The overlay (a directory under overlays/) laid over the checkout before the build."""
    pre_build: tuple[str, ...] = ()
    """Commands run in the checkout before the build."""
    build_env: Mapping[str, str] = field(default_factory=dict)
    """Environment variables of the source's build."""
    extra_requirements: tuple[str, ...] = ()
    """PEP 508 requirements the stack adds to the source's own (its upstream facts)."""
    drop_requirements: Mapping[str, str] = field(default_factory=dict)  # package -> why the build drops it
    """Requirements of the facts that the source's own build removes: package -> why."""
    needs: Mapping[str, str] = field(default_factory=dict)
    """Other sources it cannot run without although its metadata does not say so: source -> why."""
    subdir: str = ""
    """Build the distribution in this subdirectory of the checkout."""
    provisional: str = ""
    """Why the pin itself is not verified yet (reported as a warning)."""
    sanity: SanityCheck = field(default_factory=SanityCheck)
    """Checks run in the image after install: imports, statements, vLLM models."""
    # Build-time fetches made hermetic: env var the build reads -> name of another pinned source whose
    # checkout it points at (e.g. VLLM_CUTLASS_SRC_DIR: cutlass instead of CMake's FetchContent), or CMake's
    # own FETCHCONTENT_SOURCE_DIR_<NAME>, appended to CMAKE_ARGS as -D<NAME>=<checkout>.
    fetches: Mapping[str, str] = field(default_factory=dict)
    """Build-time fetches made hermetic: variable (or FETCHCONTENT_SOURCE_DIR_<NAME>) -> the pinned source whose
    checkout it points at."""
    # Build-time fetches the spec cannot pin yet: env var -> why (reported; the sealed build fails on them).
    unpinned_fetches: Mapping[str, str] = field(default_factory=dict)
    """Build-time fetches the spec cannot pin yet: variable -> why (a sealed build fails on them)."""
    jobs: SourceJobs = field(default_factory=SourceJobs)
    """How the source's build parallelises, beyond its facts."""
    # build_env variable -> why the build needs it, where no facts show the build reading it (UP001).
    # Policy text, not a build input: left out of to_dict, so it changes no rendered input digest.
    build_env_reasons: Mapping[str, str] = field(default_factory=dict, metadata=HIDDEN)
    """A build_env variable no facts show the build reading -> why the build needs it (rule UP001 accepts it then)."""
    # Declared exceptions to verification: a path of the checkout (a submodule, or a file inside the
    # source or a submodule) whose pinned object cannot be obtained -> why. Such a path is left out,
    # never stood in for, and `verify-checkout` reports it (a present path is still judged by content).
    unobtainable: Mapping[str, str] = field(default_factory=dict)
    """Paths of the checkout whose pinned object cannot be obtained -> why (left out, never stood in for)."""
    # Why this source's tree cannot be read here (no snapshot holds its pin): what the facts would say of
    # it (its submodules, the files a build reads from it) is unverified, and `check` says so (UP015).
    # Policy text, not a build input.
    unread: str = field(default="", metadata=HIDDEN)
    """Why this source's tree cannot be read here (no snapshot holds its pin): UP015 reports it unverified."""
    # Finding code -> why it cannot be fixed here: ``check`` reports that code's findings on this source as
    # suppressed, with the reason (``megacpp_env.suppress``). Policy text, not a build input.
    ignore: Mapping[str, str] = field(default_factory=dict, metadata=HIDDEN)
    """Finding code -> why it cannot be fixed here: check reports that code's findings on this source as suppressed,
    with the reason."""

    @property
    def dist_dir_name(self) -> str:
        """The directory name a checkout of this source gets by default (``/opt/src/<this>``)."""
        return checkout_dir_name(self.name)


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuSpec(Record):
    archs: tuple[str, ...]
    """The CUDA archs the target runs on (sm_121a, sm_90a, ...)."""
    kernel_arch: str
    """The arch kernels are tuned and validated for."""
    torch_cuda_arch_list: str
    """TORCH_CUDA_ARCH_LIST of the builds (e.g. "9.0;10.0;12.0")."""
    sm_count: int = 0
    """Streaming multiprocessors of the GPU (0: unknown)."""
    peak_bf16_tflops: float = 0.0
    """Dense BF16 peak of the GPU, what MFU divides by (0: unknown)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Serving(Record):
    enforce_eager: bool = True
    """vLLM serves without CUDA graphs."""
    gpu_memory_utilization: float = 0.9
    """The fraction of GPU memory vLLM may take (0 < x <= 1)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildSettings(Record):
    """Parallelism for source builds. 0 means: derive from the build machine's memory."""

    max_jobs: int = 0
    """MAX_JOBS of source builds (0: derived from the build machine's memory)."""
    nvcc_threads: int = 0
    """NVCC_THREADS of source builds (0: derived)."""
    mem_per_job_gib: int = 4
    """GiB of memory one compile job is allowed when MAX_JOBS is derived."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Override(Record):
    """A reviewed resolution: ``requirement`` replaces every requirement on its package (uv's
    ``override-dependencies``); ``sys_platform == 'never'`` as marker removes them."""

    requirement: str
    """The requirement that replaces every requirement on its package (uv override); a never-true marker drops them."""
    reason: str
    """Why the override is right (reviewed)."""
    requirers: tuple[str, ...] = ()  # distributions whose own requirement it overrules (post-install check)
    """Distributions whose own requirement it overrules (the post-install check accepts only these)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Provides(Record):
    """A distribution that supplies another one's modules under a different name (pytorch-triton
    provides triton): a requirement on ``provides`` is met by ``provider`` at the provider's version."""

    provider: str
    """The distribution that supplies the modules (pytorch-triton)."""
    provides: str
    """The distribution it stands for (triton)."""
    reason: str
    """Why (reviewed)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Resolutions(Record):
    overrides: tuple[Override, ...] = ()
    """Reviewed resolutions that replace requirements (uv's override-dependencies)."""
    provides: tuple[Provides, ...] = ()
    """Distributions that supply another's modules under a different name."""
    prereleases: Mapping[str, str] = field(default_factory=dict)  # package -> why a pre-release is allowed
    """Packages allowed a pre-release: package -> why."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ArtifactSet:
    """Prebuilt artifacts a build or run needs that no index serves (FlashInfer's cubins): files listed
    in one ``checksums.txt`` per directory under ``url``, each ``checksums.txt`` pinned by its sha256.
    ``env`` is the variable that points the consumer at a local copy; ``source`` the pinned source whose
    facts pin the same directories."""

    name: str
    url: str
    """Where the files live (https, http or file URL), one checksums.txt per directory."""
    env: str
    """The variable that points the consumer at a local copy."""
    dirs: Mapping[str, str]  # directory (relative to url) -> sha256 of its checksums.txt
    """Directory (relative to url, ending in /) -> sha256 of its checksums.txt."""
    source: str = ""
    """The pinned source whose facts pin the same directories."""
    reachable_here: bool = True
    """false: the files cannot be fetched from here (mirror-artifacts says so instead of trying)."""

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
    """What the target is for."""
    platforms: tuple[str, ...]
    """The platforms the target is built for (linux/amd64, linux/arm64)."""
    base_images: Mapping[str, ImageRef]  # platform -> image
    """The base image: one reference for every platform, or platform -> reference (name:tag[@sha256:digest])."""
    toolchain: Toolchain
    """The toolchain (a name under toolchains)."""
    requirements: tuple[str, ...] = ()
    """The target's own PEP 508 requirements."""
    sources: tuple[Source, ...] = ()
    """The sources the target builds (names under sources), in build order."""
    runtime_patches: tuple[str, ...] = ()
    """Import-time patches the runtime hook applies (megacpp_env/runtime)."""
    features: tuple[str, ...] = ()
    """Features the target enables (the policy rules check what each needs)."""
    gpu: GpuSpec | None = None
    """The target's GPUs."""
    serving: Serving | None = None
    """vLLM serving settings."""
    build_env: Mapping[str, str] = field(default_factory=dict)
    """env.build: environment of every source build of the target."""
    runtime_env: Mapping[str, str] = field(default_factory=dict)
    """env.runtime: environment of the image at run time."""
    source_env: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # source -> build env here
    """env.sources: source -> environment of that source's build on this target."""
    build: BuildSettings = field(default_factory=BuildSettings)
    """Parallelism of source builds."""
    resolutions: Resolutions = field(default_factory=Resolutions)
    """Reviewed dependency resolutions: overrides, provides, pre-releases."""
    artifacts: tuple[str, ...] = ()
    """Artifact sets the target needs (names under artifacts)."""
    # The spec's indexes this target resolves with (``targets.T.indexes``); None: all of them. ``[]``
    # takes every package from the default index (PyPI), e.g. PyPI's torch where the spec pins torch
    # to the nightly index for the production targets.
    indexes: tuple[str, ...] | None = None
    """The spec's indexes this target resolves with (default: all of them; [] takes every package from PyPI)."""
    source_sanity: Mapping[str, SanityCheck] = field(default_factory=dict)  # source -> checks added here
    """sanity: source -> checks added to that source's own on this target only."""
    # Finding code -> why it cannot be fixed here: ``check`` (and ``doctor``) report that code's findings on
    # this target as suppressed, with the reason. Policy text, not a build input (left out of to_dict).
    ignore: Mapping[str, str] = field(default_factory=dict)
    """Finding code -> why it cannot be fixed here: check and doctor report that code's findings on this target as
    suppressed, with the reason."""

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
class Alignment(Record):
    targets: tuple[str, ...]
    """Targets that must resolve to the same stack (names under targets; at least two)."""
    allow_divergence: tuple[str, ...] = ()
    """Packages allowed to resolve differently in the group."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotConfig(Record):
    golden_dir: str = ".megacpp/golden"
    """Where golden snapshots live, relative to the spec and inside the repository."""
    ignore: tuple[str, ...] = ()
    """diff patterns (fnmatch on a finding's key and its prefixes) left out of golden checks."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Spec:
    path: Path
    project: str
    """The project's name (a slug), used in labels."""
    indexes: Mapping[str, Index]
    """Extra Python package indexes by name (PyPI is implicit)."""
    toolchains: Mapping[str, Toolchain]
    """Compilers, Python, CUDA and system packages, by name."""
    sources: Mapping[str, Source]
    """Pinned git sources built from source, by name."""
    targets: Mapping[str, Target]
    """What gets rendered, locked and built, by name."""
    aligned: tuple[Alignment, ...] = ()
    """Groups of targets that must resolve to the same stack."""
    artifacts: Mapping[str, ArtifactSet] = field(default_factory=dict)
    """Pinned prebuilt files no index serves, by name."""
    snapshot: SnapshotConfig = field(default_factory=SnapshotConfig)
    """Where golden snapshots live and what golden checks ignore."""
    schema_version: int = SCHEMA_VERSION
    """The layout of this file: 1."""
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
        """The target a command line names; an unknown name is a usage error (exit 2) with the closest one."""
        from megacpp_env.errors import unknown_name

        try:
            return self.targets[name]
        except KeyError:
            raise unknown_name("target", name, list(self.targets), file=str(self.path)) from None

    def source(self, name: str) -> Source:
        """The source a command line names; an unknown name is a usage error (exit 2) with the closest one."""
        from megacpp_env.errors import unknown_name

        try:
            return self.sources[name]
        except KeyError:
            raise unknown_name("source", name, list(self.sources), file=str(self.path)) from None

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
