"""vLLM 0.29.0's own CMake files, run by the real CMake (PyPI's ``cmake<4``; no CUDA), with the fetches
wired exactly as the rendered cloud stage wires them.

A project ``include()``s ``cmake/external_projects/fmha_sm100.cmake`` and ``vllm_flash_attn.cmake`` from
the PyPI sdist (its sha256 checked against facts/vllm.toml, tests/fixtures/upstream.py). The fetched trees
are checked out by the recipe's own code (``checkout.checkout_source`` with the rendered plan's fetch:
its ``submodules`` flag) and handed over by ``srcbuild.plan.fetch_env``, the function a source stage runs,
from images/cloud/sources/vllm.json: environment variables and CMAKE_ARGS (split as setup.py:319-321
splits it). Then ``cmake --install . --component fmha_sm100`` and ``--component _vllm_fa4_cutedsl_C``,
as setup.py:376-385 runs them.

MSA @ 087c161 and flash-attention @ 06bdd47 cannot be read here (no snapshot holds either pin), so each
is a minimal tree shaped like upstream's, labelled so in its ``MINIMAL_TREE.md``: the files vLLM's CMake
installs from it, and the submodule it has upstream (MSA's README: NVIDIA CUTLASS at
python/fmha_sm100/cutlass; flash-attention's csrc/cutlass). flash-attention's own CMakeLists.txt needs
CUDA and torch, so the minimal tree's is a labelled stand-in that declares nothing.

What a full configure of vLLM would need and cannot have here: CUDA (its CMakeLists.txt enables the
language and finds torch), the trees of MSA, flash-attention, FlashMLA, DeepGEMM, FlashKDA, tml-fa4 and
triton at their pins; so only these two files run, which are the two that defects 1 and 3 live in.
"""

from __future__ import annotations

import os
import re
import subprocess
import tarfile
from dataclasses import replace
from pathlib import Path

import pytest

from megacpp_env.checkout import checkout_source
from megacpp_env.srcbuild.plan import fetch_env, read_plan
from tests.fixtures.git_repos import FILE_OK, make_repo
from tests.fixtures.spec import REPO_ROOT
from tests.test_cmake_engine import cmake_bin

FILES = ("fmha_sm100.cmake", "vllm_flash_attn.cmake")
LABEL = (
    "MINIMAL TREE: not {repo} @ {commit}, which no snapshot here holds. It has the files vLLM 0.29.0's "
    "{cmake} installs from that tree and the submodule the tree has upstream ({why}); made by "
    "tests/test_vllm_cmake.py.\n"
)
CUTE = {  # FA4's CuTe-DSL package, whose imports vLLM rewrites (flash_attn.cute -> vllm.vllm_flash_attn.cute)
    "flash_attn/cute/__init__.py": "from flash_attn.cute.interface import flash_attn_func\n",
    "flash_attn/cute/interface.py": "from flash_attn.cute import utils\nimport flash_attn.cute.mask as mask\n",
    "flash_attn/cute/utils.py": "X = 1\n",
    "flash_attn/cute/mask.py": "Y = 2\n",
    "flash_attn/cute/sm100/fwd.py": "from flash_attn.cute.utils import X\n",
}


@pytest.fixture(scope="module")
def vllm_cmake(vllm_sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """vLLM's two CMake files, as the sdist ships them."""
    out = tmp_path_factory.mktemp("vllm-cmake")
    with tarfile.open(vllm_sdist) as tar:
        for name in FILES:
            member = tar.getmember(f"vllm-0.29.0/cmake/external_projects/{name}")
            data = tar.extractfile(member)
            assert data is not None
            (out / name).write_bytes(data.read())
    return out


@pytest.fixture(scope="module")
def upstreams(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    """fetched source name -> (url, commit) of its minimal tree (a real repository with its submodule)."""
    root = tmp_path_factory.mktemp("upstream")
    cutlass = root / "cutlass"
    make_repo(cutlass, {"include/cutlass/cutlass.h": "#pragma once\n", "tools/util/include/cutlass/util/x.hpp": "//\n"})
    msa, fa = root / "msa", root / "flash-attention"
    py = "python/fmha_sm100"
    msa_files = {f"{py}/{n}.py": f"# {n}\n" for n in ("__init__", "api", "bench_utils", "jit", "sparse",
                                                       "sparse_fmha_adapter")}  # fmt: skip
    msa_files |= {f"{py}/csrc/fmha.cuh": "//\n", f"{py}/cute/interface.py": "#\n"}
    msa_files["MINIMAL_TREE.md"] = LABEL.format(
        repo="vllm-project/MSA", commit="087c161", cmake="cmake/external_projects/fmha_sm100.cmake",
        why=f"its README: the NVIDIA CUTLASS submodule at {py}/cutlass",
    )  # fmt: skip
    msa_sha = make_repo(msa, msa_files, submodules={f"{py}/cutlass": cutlass.as_uri()})
    fa_files = {
        **CUTE,
        "vllm_flash_attn/__init__.py": "#\n",
        "vllm_flash_attn/flash_attn_interface.py": "#\n",
        "vllm_flash_attn/layers/rotary.py": "#\n",
        "CMakeLists.txt": 'message(STATUS "stand-in for flash-attention\'s CMakeLists.txt (it needs CUDA and torch)")\n',
        "MINIMAL_TREE.md": LABEL.format(
            repo="vllm-project/flash-attention", commit="06bdd47", cmake="cmake/external_projects/vllm_flash_attn.cmake",
            why="csrc/cutlass, as on every readable commit",
        ),
    }  # fmt: skip
    fa_sha = make_repo(fa, fa_files, submodules={"csrc/cutlass": cutlass.as_uri()})
    return {"vllm_fmha_sm100": (msa.as_uri(), msa_sha), "vllm_flash_attn": (fa.as_uri(), fa_sha)}


def configure(tmp_path: Path, vllm_cmake: Path, upstreams, *, submodules: dict[str, bool] | None = None,
              extra_env: dict[str, str] | None = None) -> tuple[Path, dict[str, str]]:  # fmt: skip
    """Check the fetched trees out as the rendered cloud plan says (its submodule flags, unless
    ``submodules`` overrides one), wire them with ``fetch_env`` and configure vLLM's two files."""
    plan = read_plan(REPO_ROOT / "images" / "cloud" / "sources" / "vllm.json")
    fetches, paths = [], {}
    for fetch in plan.fetches:
        if fetch.name in upstreams:
            url, sha = upstreams[fetch.name]
            flag = (submodules or {}).get(fetch.name, fetch.submodules)
            fetch = replace(fetch, repo=url, commit=sha, submodules=flag)  # noqa: PLW2901
            dest = tmp_path / "src" / fetch.name.replace("_", "-")
            checkout_source(fetch, dest, git_config=FILE_OK)
            paths[fetch.env] = str(dest)
        else:
            paths[fetch.env] = str(tmp_path / "src" / "not-used-here" / fetch.name)
        fetches.append(fetch)
    plan = replace(plan, fetches=tuple(fetches))
    env = fetch_env(plan, {**os.environ, **plan.build_env, **(extra_env or {})}, paths)
    project = tmp_path / "project"
    project.mkdir()
    includes = "".join(f"include({vllm_cmake / name})\n" for name in FILES)
    (project / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.26)\nproject(vllm_fetch_wiring LANGUAGES NONE)\ninclude(FetchContent)\n"
        '# no CUDA here: VLLM_GPU_LANG is not "CUDA", so vllm_flash_attn.cmake skips its arch list\n'
        f'set(VLLM_GPU_LANG "NONE")\n{includes}'
    )
    build = tmp_path / "build"
    argv = [str(cmake_bin()), "-S", str(project), "-B", str(build), f"-DFETCHCONTENT_BASE_DIR={build}/.deps",
            *env.get("CMAKE_ARGS", "").split()]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return build, env


def install(build: Path, component: str, prefix: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [str(cmake_bin()), "--install", ".", "--prefix", str(prefix), "--component", component]
    return subprocess.run(argv, cwd=build, capture_output=True, text=True, env=env, check=False)


def test_the_stage_wiring_installs_msa_with_its_cutlass_and_fa4_as_rewritten_copies(tmp_path, vllm_cmake, upstreams):
    build, env = configure(tmp_path, vllm_cmake, upstreams)
    assert "VLLM_FLASH_ATTN_SRC_DIR" not in env and "-DFETCHCONTENT_FULLY_DISCONNECTED=ON" in env["CMAKE_ARGS"]
    prefix = tmp_path / "wheel"
    proc = install(build, "fmha_sm100", prefix, env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    msa = prefix / "vllm" / "third_party" / "fmha_sm100"
    assert (msa / "cutlass" / "include" / "cutlass" / "cutlass.h").is_file()
    assert (msa / "cutlass" / "tools" / "util" / "include" / "cutlass" / "util" / "x.hpp").is_file()
    proc = install(build, "_vllm_fa4_cutedsl_C", prefix, env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    cute = prefix / "vllm" / "vllm_flash_attn" / "cute"
    assert cute.is_dir() and not cute.is_symlink()
    written = {p.relative_to(cute).as_posix(): p for p in cute.rglob("*.py")}
    assert sorted(written) == sorted(k.removeprefix("flash_attn/cute/") for k in CUTE)
    for rel, path in written.items():
        assert not path.is_symlink()
        text = path.read_text()
        assert text == CUTE[f"flash_attn/cute/{rel}"].replace("flash_attn.cute", "vllm.vllm_flash_attn.cute")
        assert "from flash_attn." not in text and "import flash_attn." not in text


def test_without_msa_submodule_the_install_fails_as_a_real_build_would(tmp_path, vllm_cmake, upstreams):
    """The checkout the plan gave before MSA was marked with submodules (defect 1): configure passes,
    the install step fails after the compile, as setup.py:376-385 would."""
    build, env = configure(tmp_path, vllm_cmake, upstreams, submodules={"vllm_fmha_sm100": False})
    proc = install(build, "fmha_sm100", tmp_path / "wheel", env)
    assert proc.returncode != 0
    assert "file INSTALL cannot find" in proc.stderr and "python/fmha_sm100/cutlass/include" in proc.stderr


def test_through_vllm_flash_attn_src_dir_fa4_is_a_symlink_with_upstream_imports(tmp_path, vllm_cmake, upstreams):
    """What the stage did before (defect 3): VLLM_FLASH_ATTN_SRC_DIR takes vllm_flash_attn.cmake's
    local-development branch, a symlink to the checkout whose files keep ``flash_attn.cute`` imports (a
    wheel copies the files behind it, unrewritten: the import fails on B200)."""
    fa = tmp_path / "src" / "vllm-flash-attn"
    build, env = configure(tmp_path, vllm_cmake, upstreams, extra_env={"VLLM_FLASH_ATTN_SRC_DIR": str(fa)})
    proc = install(build, "_vllm_fa4_cutedsl_C", tmp_path / "wheel", env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cute = tmp_path / "wheel" / "vllm" / "vllm_flash_attn" / "cute"
    assert cute.is_symlink() and cute.resolve() == (fa / "flash_attn" / "cute").resolve()
    assert "from flash_attn.cute import utils" in (cute / "interface.py").read_text()


# ---- each target's arch list through vLLM's own arch handling -------------------------------------------

SUPPORTED_START = "# Supported NVIDIA architectures."
ARCH_PROJECT = """cmake_minimum_required(VERSION 3.26)
project(vllm_archs LANGUAGES C)
include({utils})
set(CMAKE_CUDA_COMPILER_VERSION {cuda})
{supported}
# vLLM's CMakeLists.txt:231-232: the target archs filtered by the supported ones
cuda_archs_loose_intersection(CUDA_ARCHS "${{CUDA_SUPPORTED_ARCHS}}" "{archs}")
message(STATUS "CUDA_ARCHS=${{CUDA_ARCHS}}")
# no torch, no nvcc here: an extension target is an empty object library, so qutlass.cmake's own
# target_compile_definitions and source properties apply to it as they would
function(define_extension_target NAME)
  add_library(${{NAME}} OBJECT ${{CMAKE_CURRENT_SOURCE_DIR}}/stub.c)
endfunction()
set(CUTLASS_INCLUDE_DIR {cutlass})
set(VLLM_GPU_LANG CUDA)
include({qutlass})
message(STATUS "QUTLASS_ARCHS=${{QUTLASS_ARCHS}} QUTLASS_TARGET_CC=${{QUTLASS_TARGET_CC}}")
"""


def _supported_block(cmakelists: str) -> str:
    """vLLM's own `if(... CMAKE_CUDA_COMPILER_VERSION ...) set(CUDA_SUPPORTED_ARCHS ...)` block, verbatim."""
    start = cmakelists.index(SUPPORTED_START)
    end = cmakelists.index("\nendif()", start) + len("\nendif()")
    block = cmakelists[start:end]
    assert block.count("set(CUDA_SUPPORTED_ARCHS") == 4, block
    return block


def _vllm_targets() -> list[str]:
    from megacpp_env.spec import load_spec

    spec = load_spec(REPO_ROOT / "stack.yaml")
    return [t.name for t in spec.targets.values() if any(s.name == "vllm" for s in t.sources)]


@pytest.mark.parametrize("target", _vllm_targets())
def test_each_target_arch_list_gets_vllm_and_qutlass_kernels_for_its_gpus(vllm_sdist, tmp_path, target):
    """The TORCH_CUDA_ARCH_LIST vLLM's stage builds with (the rendered plan), through vLLM's own code run by
    CMake with the toolchain's CUDA: the supported-arch filter (CMakeLists.txt:114-132, 231-232) keeps an
    arch of each GPU family the target runs, and QuTLASS, which compiles every source for one
    TARGET_CUDA_ARCH (qutlass.cmake:56-85), picks the family of the target's GPUs. On gb10 the shared list
    9.0;10.0;12.0 made QuTLASS SM100-only (no kernel for GB10's SM121)."""
    from megacpp_env.spec import load_spec

    spec = load_spec(REPO_ROOT / "stack.yaml")
    t = spec.target(target)
    assert t.gpu is not None and t.toolchain.cuda
    plan = read_plan(REPO_ROOT / "images" / target / "sources" / "vllm.json")
    archs = plan.build_env["TORCH_CUDA_ARCH_LIST"].replace(" ", ";")
    src = tmp_path / "vllm"
    with tarfile.open(vllm_sdist) as tar:
        for name in ("CMakeLists.txt", "cmake/utils.cmake", "cmake/external_projects/qutlass.cmake"):
            data = tar.extractfile(tar.getmember(f"vllm-0.29.0/{name}"))
            assert data is not None
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes(data.read())
    cutlass = tmp_path / "cutlass" / "include"
    (cutlass / "cutlass").mkdir(parents=True)
    (cutlass / "cutlass" / "cutlass.h").write_text("#pragma once\n")
    qutlass = tmp_path / "qutlass"  # minimal: QUTLASS_SRC_DIR only has to be a directory
    qutlass.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    (project / "stub.c").write_text("int stub;\n")
    (project / "CMakeLists.txt").write_text(ARCH_PROJECT.format(
        utils=src / "cmake/utils.cmake", cuda=t.toolchain.cuda, archs=archs, cutlass=cutlass,
        qutlass=src / "cmake/external_projects/qutlass.cmake",
        supported=_supported_block((src / "CMakeLists.txt").read_text()),
    ))  # fmt: skip
    proc = subprocess.run([str(cmake_bin()), "-S", str(project), "-B", str(tmp_path / "b")], capture_output=True,
                          text=True, env={**os.environ, "QUTLASS_SRC_DIR": str(qutlass)}, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    archs_line = re.search(r"^-- CUDA_ARCHS=(.*)$", proc.stdout, re.MULTILINE)
    cc = re.search(r"QUTLASS_TARGET_CC=(\d*)", proc.stdout)
    assert archs_line is not None and cc is not None, proc.stdout[-2000:]
    cuda_archs = archs_line.group(1).split(";")
    families = {int(re.match(r"sm_(\d+)", a).group(1)) // 10 for a in t.gpu.archs}  # type: ignore[union-attr]
    for family in families:  # vLLM builds kernels for every GPU family the target runs
        assert any(a.startswith(f"{family}.") for a in cuda_archs), (target, family, cuda_archs)
    qutlass_families = {10, 12} & families
    if qutlass_families:  # QuTLASS serves one family: it must be the target's
        assert cc.group(1) and {int(cc.group(1)) // 10} == qutlass_families, (target, cc.group(1), t.gpu.archs)
