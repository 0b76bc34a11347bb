"""Where things live: repository paths relative to the spec root, the package's templates, fixed
paths inside images, and the platform names they are spelled with.

Every module that needs one of these paths calls this module, so the conventions exist once.
Standard library only (the runtime patches and ``snapshot`` import it without yaml or packaging).
"""

from __future__ import annotations

import re
from pathlib import Path

PLATFORMS = ("linux/amd64", "linux/arm64")
# One directory name: an overlay (overlays/<name>), a toolchain, an index, the project.
SLUG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # use with fullmatch
PLATFORM_ARCH = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}


def platform_slug(platform: str) -> str:
    """``linux/arm64`` -> ``linux-arm64`` (used in file names)."""
    return platform.replace("/", "-")


def platform_arch(platform: str) -> str:
    """``linux/arm64`` -> ``arm64`` (Docker's TARGETARCH)."""
    return platform.split("/", 1)[1]


# Inside every image.
IMAGE_HOME = "/opt/megacpp-env"  # stack.yaml, overlays/, locks/ copied here; MEGACPP_ENV_HOME
IMAGE_VENV = "/opt/venv"  # the training venv (Python from the toolchain); the tool is installed here too
IMAGE_SRC = "/opt/src"  # pinned source checkouts: /opt/src/<source name with - for _>
IMAGE_SNAPSHOT = "/opt/megacpp-env/snapshot.json"  # the snapshot taken at the end of the build
IMAGE_SPEC = f"{IMAGE_HOME}/stack.yaml"
IMAGE_SRCBUILD = f"{IMAGE_HOME}/srcbuild"  # the tool's source-build closure (PYTHONPATH of source stages)
IMAGE_PLANS = f"{IMAGE_HOME}/sources"  # rendered source build plans: <name>.json
IMAGE_WHEELS = f"{IMAGE_HOME}/wheels"  # built wheels: <name>/*.whl
IMAGE_SOURCE_MIRROR = "/mnt/megacpp-source-mirror"  # where a source stage mounts its part of the mirror
IMAGE_ARTIFACT_MOUNT = "/mnt/megacpp-artifacts"  # where a source stage mounts a verified artifact set: <name>/
IMAGE_ARTIFACTS = f"{IMAGE_HOME}/artifacts"  # the runtime image's copy of each artifact set: <name>/
CUDA_HOME = "/usr/local/cuda"  # every CUDA target's CUDA_HOME (the base image's, or a link to the PyPI prefix)


def image_cuda_prefix(version: str) -> str:
    """Where a toolchain's CUDA wheels are installed (``pip install --target``): ``/opt/cuda-13.2``."""
    return f"/opt/cuda-{version}"


def image_cuda_root(version: str) -> str:
    """The CUDA tree inside that prefix: CUDA 13 wheels unpack to ``nvidia/cu13/{bin,include,lib,nvvm}``."""
    return f"{image_cuda_prefix(version)}/nvidia/cu{version.split('.', 1)[0]}"


# In the repository (the build context).
SOURCE_MIRROR = ".megacpp/source-mirror"
ARTIFACT_MIRROR = ".megacpp/artifacts"  # `mirror-artifacts NAME --to .megacpp/artifacts/NAME`; build reads it

# A build-time fetch redirected by CMake's own override, a cache variable (``-D<name>=<tree>`` appended to
# the build's CMAKE_ARGS) rather than an environment variable: FetchContent upper-cases the content name.
CMAKE_FETCH_OVERRIDE_RE = re.compile(r"FETCHCONTENT_SOURCE_DIR_[A-Z0-9][A-Z0-9_-]*")  # use with fullmatch

# Labels (besides org.opencontainers.image.*).
LABEL_PREFIX = "io.megacpp.env"


def locks_dir(root: Path) -> Path:
    return root / "locks"


LOCK_PREFIX, LOCK_SUFFIX = "pylock.", ".toml"
# PEP 751 allows one name segment without dots: ``pylock.<name>.toml``. Targets are ``[a-z][a-z0-9_]*``
# (no '-'), so ``<target>-<os>-<arch>`` parses back unambiguously.
_LOCK_NAME = re.compile(r"pylock\.(?P<target>[a-z][a-z0-9_]*)-(?P<os>[a-z0-9]+)-(?P<arch>[a-z0-9_]+)\.toml")


def lock_name(target: str, platform: str) -> str:
    """``pylock.smoke-linux-amd64.toml``: a valid PEP 751 name (uv and pip install from it)."""
    return f"{LOCK_PREFIX}{target}-{platform_slug(platform)}{LOCK_SUFFIX}"


def lock_path(root: Path, target: str, platform: str) -> Path:
    """PEP 751 lock of one target and platform: ``locks/pylock.<target>-<os>-<arch>.toml``."""
    return locks_dir(root) / lock_name(target, platform)


def parse_lock_name(filename: str) -> tuple[str, str] | None:
    """(target, platform) of a lock file name (``lock_name`` reversed); None for any other name."""
    m = _LOCK_NAME.fullmatch(filename)
    return (m["target"], f"{m['os']}/{m['arch']}") if m else None


# A toolchain lock: what a target's toolchain installs from an index outside the venv (CUDA from PyPI
# wheels), ``pylock.<target>-<part>-<os>-<arch>.toml``. The arch never holds a '-', so these names never
# parse as a target's lock (``parse_lock_name``) and ``parse_toolchain_lock_name`` reads them back.
_TOOLCHAIN_LOCK_NAME = re.compile(
    r"pylock\.(?P<target>[a-z][a-z0-9_]*)-(?P<part>cuda)-(?P<os>[a-z0-9]+)-(?P<arch>[a-z0-9_]+)\.toml"
)
TOOLCHAIN_PARTS = ("cuda",)


def toolchain_lock_path(root: Path, target: str, part: str, platform: str) -> Path:
    """``locks/pylock.<target>-<part>-<os>-<arch>.toml`` (a valid PEP 751 name), e.g. the CUDA wheels."""
    return locks_dir(root) / f"{LOCK_PREFIX}{target}-{part}-{platform_slug(platform)}{LOCK_SUFFIX}"


def toolchain_export_path(root: Path, target: str, part: str, platform: str) -> Path:
    """The toolchain lock exported for ``pip install --require-hashes``."""
    return locks_dir(root) / f"{target}-{part}.{platform_slug(platform)}.requirements.txt"


def parse_toolchain_lock_name(filename: str) -> tuple[str, str, str] | None:
    """(target, part, platform) of a toolchain lock file name; None for any other name."""
    m = _TOOLCHAIN_LOCK_NAME.fullmatch(filename)
    return (m["target"], m["part"], f"{m['os']}/{m['arch']}") if m else None


def requirements_export_path(root: Path, target: str, platform: str) -> Path:
    """The same lock exported as a pip ``--require-hashes`` requirements file."""
    return locks_dir(root) / f"{target}.{platform_slug(platform)}.requirements.txt"


def resolutions_path(root: Path, target: str) -> Path:
    """``images/<target>/resolutions.json``: the resolutions the post-install dependency check accepts."""
    return images_dir(root) / target / "resolutions.json"


def images_dir(root: Path) -> Path:
    return root / "images"


def dockerfile_path(root: Path, target: str) -> Path:
    return images_dir(root) / target / "Dockerfile"


def source_plans_dir(root: Path, target: str) -> Path:
    """``images/<target>/sources/``: one rendered source build plan per source (``<name>.json``)."""
    return images_dir(root) / target / "sources"


def artifact_mirror_dir(root: Path, name: str) -> Path:
    """Where ``build`` expects artifact set ``name`` (verified offline before Docker runs)."""
    return root / artifact_mirror_rel(name)


def artifact_mirror_rel(name: str) -> str:
    """Artifact set ``name`` in the build context: what a source stage bind-mounts and the image copies."""
    return f"{ARTIFACT_MIRROR}/{name}"


def source_mirror_rel(source: str) -> str:
    """Source ``source``'s part of the source mirror in the build context: what its stage bind-mounts."""
    return f"{SOURCE_MIRROR}/sources/{source}"


def source_mirror_dir(root: Path) -> Path:
    """The source mirror ``build`` fills and bind-mounts into source stages (inside the build context)."""
    return root / SOURCE_MIRROR


def templates_dir() -> Path:
    """The one Jinja template set, shipped inside the package (package data), so an installed tool
    renders and builds from any directory."""
    return Path(__file__).resolve().parent / "templates"


def overlays_dir(root: Path) -> Path:
    return root / "overlays"


def overlay_dir(root: Path, name: str) -> Path:
    return overlays_dir(root) / name


def checkout_dir_name(source_name: str) -> str:
    """A source's checkout directory name: ``megacpp_smoke_ext`` -> ``megacpp-smoke-ext``."""
    return source_name.replace("_", "-")


def image_checkout_dir(source_name: str) -> str:
    return f"{IMAGE_SRC}/{checkout_dir_name(source_name)}"


def host_checkout_dir(root: Path, source_name: str) -> Path:
    """``./.megacpp/src/<name-with-dashes>`` under the spec's directory (on a host)."""
    return Path(root) / ".megacpp" / "src" / checkout_dir_name(source_name)


# The tool's own runtime dependencies ([project].dependencies of pyproject.toml minus uv, which the
# lock pins separately as uv==<toolchain.uv>). Every lock includes them: the image installs
# megacpp-env into the training venv with --no-deps. tests/test_lock_inputs.py keeps them in sync.
TOOL_REQUIREMENTS: tuple[str, ...] = (
    "jinja2>=3.1.4",
    "pyyaml>=6.0.1",
    "packaging>=24.2",
    "tomli-w>=1.1",
    "nvidia-ml-py>=12.560.30",
)
