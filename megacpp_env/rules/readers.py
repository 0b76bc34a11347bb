"""Who reads an environment variable during a source's build: the source's own build files (facts),
the files its overlay lays over them, the build tools the facts show it uses (each with the variables
that tool reads, from its source at the versions the stack pins), and what every build reads."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from megacpp_env.facts import cmake, pyscan
from megacpp_env.facts.model import SourceFacts
from megacpp_env.facts.store import FactsSet, load_facts
from megacpp_env.layout import overlay_dir
from megacpp_env.spec.model import Source, Spec

# torch 2.13 torch/utils/cpp_extension.py: MAX_JOBS (:2832), TORCH_CUDA_ARCH_LIST (:2657, ignored when an
# nvcc flag already names an arch), CUDA_HOME/CUDA_PATH (:158), CC/CXX (:882, :481), ... ; torch's CMake
# (share/cmake/Caffe2/public/utils.cmake:315) reads TORCH_CUDA_ARCH_LIST; setuptools-scm reads
# SETUPTOOLS_SCM_PRETEND_VERSION, and the _FOR_<DIST> form only when it knows the distribution name.
TOOL_READS: dict[str, tuple[str, ...]] = {
    "torch.utils.cpp_extension": (
        "MAX_JOBS",
        "TORCH_CUDA_ARCH_LIST",
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDNN_HOME",
        "CC",
        "CXX",
        "PYTORCH_NVCC",
        "TORCH_DONT_CHECK_COMPILER_ABI",
        "TORCH_EXTENSIONS_DIR",
        "TORCH_NVCC_FLAGS",
        "ROCM_HOME",
        "HIP_HOME",
    ),
    "cmake:find_package(Torch)": ("TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDACXX", "TORCH_NVCC_FLAGS"),
    "setuptools_scm.get_version": ("SETUPTOOLS_SCM_PRETEND_VERSION",),
}
# Read by every build whatever the source: the toolchain, ccache, CMake's own switches, pip and uv.
GENERIC = frozenset(
    {
        "PATH",
        "HOME",
        "TMPDIR",
        "CC",
        "CXX",
        "CFLAGS",
        "CXXFLAGS",
        "CPPFLAGS",
        "LDFLAGS",
        "CUDAHOSTCXX",
        "CUDA_HOME",
        "CUDACXX",
        "LD_LIBRARY_PATH",
        "LIBRARY_PATH",
        "CPATH",
        "PKG_CONFIG_PATH",
        "MAKEFLAGS",
        "NVCC_PREPEND_FLAGS",
        "NVCC_APPEND_FLAGS",
        "CCACHE_DIR",
        "CMAKE_C_COMPILER_LAUNCHER",
        "CMAKE_CXX_COMPILER_LAUNCHER",
        "CMAKE_CUDA_COMPILER_LAUNCHER",
        "CMAKE_BUILD_PARALLEL_LEVEL",
        "CMAKE_GENERATOR",
        "SOURCE_DATE_EPOCH",
        "PYTHONHASHSEED",
    }
)
GENERIC_PREFIXES = ("PIP_", "UV_", "CCACHE_")
ARCH_VAR_RE = re.compile(r"ARCH")


@dataclass(frozen=True, kw_only=True, slots=True)
class Readers:
    """Every variable read during one source's build, and by whom (``where`` for messages)."""

    names: dict[str, str]  # variable -> where it is read ("setup.py:43", "overlay causal-conv1d: setup.py:130")
    overlay: dict[str, str]  # the subset read by the overlay's files

    def reads(self, name: str) -> bool:
        return name in self.names or name in GENERIC or name.startswith(GENERIC_PREFIXES)


def spec_facts(spec: Spec) -> FactsSet:
    return load_facts(spec.root, tuple(spec.sources))


def overlay_reads(spec: Spec, src: Source) -> dict[str, str]:
    """Variables the files of the source's overlay read (they replace upstream files in the build)."""
    if not src.overlay:
        return {}
    files = overlay_dir(spec.root, src.overlay) / "files"
    out: dict[str, str] = {}
    if not files.is_dir():
        return out
    for path in sorted(p for p in files.rglob("*") if p.is_file()):
        rel = path.relative_to(files).as_posix()
        if path.suffix == ".py":
            for hit in pyscan.scan_file(path, rel).env:
                out.setdefault(hit.name, f"overlay {src.overlay}: {rel}:{hit.line}")
        elif path.suffix == ".cmake" or path.name == "CMakeLists.txt":
            for name, line in cmake.scan_cmake(path, rel).env:
                out.setdefault(name, f"overlay {src.overlay}: {rel}:{line}")
    return out


def readers(spec: Spec, src: Source, facts: SourceFacts) -> Readers:
    names: dict[str, str] = {}
    for tool in facts.tools:
        for name in TOOL_READS.get(tool.name, ()):
            names.setdefault(name, f"{tool.name} ({tool.at})")
        if tool.name == "setuptools_scm.get_version" and tool.detail.startswith("dist_name given"):
            dist = re.sub(r"[-_.]+", "_", facts.distribution.name).upper()
            names.setdefault(f"SETUPTOOLS_SCM_PRETEND_VERSION_FOR_{dist}", f"{tool.name} ({tool.at})")
    for read in facts.env:
        names[read.name] = ", ".join(read.at[:3])
    over = overlay_reads(spec, src)
    for name, where in over.items():
        names.setdefault(name, where)
    return Readers(names=names, overlay=over)


def overlay_arch_var(spec: Spec, src: Source) -> str:
    """A variable the overlay reads that selects CUDA archs (MEGACPP_CUDA_ARCHS), or ''. Variables the
    upstream build files already read (HIP_ARCHITECTURES in a replaced setup.py) do not count: only
    what the overlay adds can narrow the hard-coded list."""
    facts = spec_facts(spec).get(src.name)
    upstream = {r.name for r in facts.env} if facts is not None else set()
    added = sorted(name for name in overlay_reads(spec, src) if name not in upstream)
    return next((name for name in added if ARCH_VAR_RE.search(name) and "CUDA" in name), "")


def source_env_key(spec: Spec, target_name: str, src: Source, var: str) -> str:
    target = spec.targets[target_name]
    if var in target.source_env.get(src.name, {}):
        return f"targets.{target_name}.env.sources.{src.name}.{var}"
    return f"sources.{src.name}.build_env.{var}"


def facts_file(src: Source) -> Path:
    return Path("facts") / f"{src.name}.toml"
