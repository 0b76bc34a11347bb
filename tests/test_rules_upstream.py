"""The rules that read upstream facts, overlays and the dependency graph (megacpp_env/rules), each
called alone on the shipped spec (copied with its facts and overlays) and on mutations of it."""

from __future__ import annotations

import copy
import re
import shutil

import pytest

from megacpp_env.rules.deps import module_owners, requirement_conflicts, resolutions_apply
from megacpp_env.rules.env import (
    exact_switch_values,
    family_arch_in_torch_list,
    flashinfer_arch_list,
    hard_coded_archs,
    ignored_arch_list,
    overlay_archs_cover_target,
    unread_env,
)
from megacpp_env.rules.facts import facts_current, facts_provisional
from megacpp_env.rules.sources import (
    artifact_pins,
    couplings,
    cutlass_content,
    empty_overlays,
    pinned_fetches,
    sanity_can_pass,
    version_override,
)
from tests.fixtures.spec import REPO_ROOT, load_data

ARCH_OVERLAY_SETUP = (
    'import os\nARCHS = os.getenv("MEGACPP_CUDA_ARCHS", "")\nTHREADS = os.getenv("MEGACPP_NVCC_THREADS", "4")\n'
)


@pytest.fixture
def root(tmp_path):
    for name in ("facts", "overlays"):
        shutil.copytree(REPO_ROOT / name, tmp_path / name)
    return tmp_path


def load(data, root):
    return load_data(data, root / "stack.yaml")


def keys(found):
    return [k for k, _m, _r in found]


def messages(found):
    return [m for _k, m, _r in found]


def upstream_only(data):
    """The spec as if causal_conv1d and mamba_ssm had no arch overlay: what upstream's setup.py does."""
    data = copy.deepcopy(data)
    for name in ("causal_conv1d", "mamba_ssm"):
        data["sources"][name].pop("overlay", None)
        data["sources"][name].pop("jobs", None)  # MAX_JOBS (cpp_extension) and --threads 4 come from the facts
        for target in data["targets"].values():
            env = target.get("env", {}).get("sources", {})
            if name in env:
                env[name] = {k: v for k, v in env[name].items() if k != "MEGACPP_CUDA_ARCHS"}
                if not env[name]:
                    del env[name]
    return data


def arch_overlay(root, data, source="causal_conv1d", name="causal-arch"):
    """An overlay whose setup.py reads MEGACPP_CUDA_ARCHS (only its files are scanned by the rules)."""
    files = root / "overlays" / name / "files"
    files.mkdir(parents=True)
    (files / "setup.py").write_text(ARCH_OVERLAY_SETUP)
    data["sources"][source]["overlay"] = name


# ---- UP001: variables upstream does not read --------------------------------------------------------


def test_the_for_vllm_pretend_version_is_flagged_and_the_generic_one_is_not(stack_data, root):
    assert list(unread_env(load(stack_data, root))) == []
    data = copy.deepcopy(stack_data)
    data["sources"]["vllm"]["build_env"]["SETUPTOOLS_SCM_PRETEND_VERSION_FOR_VLLM"] = "0.28.1"
    found = list(unread_env(load(data, root)))
    assert keys(found) == ["sources.vllm.build_env.SETUPTOOLS_SCM_PRETEND_VERSION_FOR_VLLM"]
    assert "vllm does not read SETUPTOOLS_SCM_PRETEND_VERSION_FOR_VLLM" in found[0][1]
    assert "SETUPTOOLS_SCM_PRETEND_VERSION" in found[0][2]  # the remedy names the variable that is read


def test_vllm_gets_its_version_from_upstreams_override_without_a_cuda_suffix(stack_data, root):
    """setup.py:1251 takes VLLM_VERSION_OVERRIDE as the version and returns before it appends +cuNNN
    (nvcc 13.2 differs from VLLM_MAIN_CUDA_VERSION); it equals the release the facts read at the pin."""
    from megacpp_env.rules.readers import spec_facts

    spec = load(stack_data, root)
    facts = spec_facts(spec).facts["vllm"]
    assert facts.verified and facts.distribution.version == "0.29.0"
    assert [e.at for e in facts.env if e.name == "VLLM_VERSION_OVERRIDE"] == [("setup.py:1251",)]
    for target in ("gb10", "cloud"):
        env = spec.target(target).build_env_for(spec.source("vllm"))
        assert env["VLLM_VERSION_OVERRIDE"] == facts.distribution.version
        assert not any(k.startswith("SETUPTOOLS_SCM_PRETEND_VERSION") for k in env)
    assert list(version_override(spec)) == []
    data = copy.deepcopy(stack_data)
    data["sources"]["vllm"]["build_env"]["VLLM_VERSION_OVERRIDE"] = "0.28.1.dev0+gbf8e762"  # the former guess
    found = list(version_override(load(data, root)))
    assert keys(found) == ["sources.vllm.build_env.VLLM_VERSION_OVERRIDE"]
    assert found[0][1] == (
        "VLLM_VERSION_OVERRIDE=0.28.1.dev0+gbf8e762 would name the wheel of vllm 0.28.1.dev0+gbf8e762, but the pin "
        "98dff2a81d74 is the release 0.29.0 (PKG-INFO Version)"
    )
    assert found[0][2] == 'set VLLM_VERSION_OVERRIDE: "0.29.0"'


@pytest.mark.parametrize(
    ("source", "var", "flagged"),
    [
        ("causal_conv1d", "NVCC_THREADS", True),  # --threads 4 is hard-coded (setup.py:127)
        ("causal_conv1d", "MAX_JOBS", False),  # torch's cpp_extension reads it
        ("causal_conv1d", "CAUSAL_CONV1D_SKIP_CUDA_BUILD", False),
        ("flashinfer", "FLASHINFER_ENABLE_AOT", True),  # zero references at v0.6.17
        ("flashinfer", "BUILD_NCCL_EP", False),
        ("flashinfer_jit_cache", "FLASHINFER_NVCC_THREADS", False),  # read through a local variable
        ("vllm", "VLLM_CUTLASS_SRC_DIR", False),  # CMake: $ENV{...}
        ("mamba_ssm", "PIP_NO_INDEX", False),  # read by pip, whatever the source
    ],
)
def test_unread_variables(stack_data, root, source, var, flagged):
    data = upstream_only(stack_data)
    data["sources"][source].setdefault("build_env", {})[var] = "1"
    assert bool(list(unread_env(load(data, root)))) is flagged


def test_an_overlay_adds_readers(stack_data, root):
    data = upstream_only(stack_data)
    data["sources"]["causal_conv1d"]["build_env"]["MEGACPP_CUDA_ARCHS"] = "90a 100a"
    assert keys(unread_env(load(data, root))) == ["sources.causal_conv1d.build_env.MEGACPP_CUDA_ARCHS"]
    arch_overlay(root, data)
    assert list(unread_env(load(data, root))) == []


def test_a_target_variable_no_source_reads(stack_data, root):
    data = copy.deepcopy(stack_data)
    data["targets"]["gb10"]["env"]["build"]["MEGACPP_NOBODY"] = "1"
    assert keys(unread_env(load(data, root))) == ["targets.gb10.env.build.MEGACPP_NOBODY"]


# ---- UP002 / UP003: arch lists --------------------------------------------------------------------


def test_torch_arch_list_on_a_hard_coded_setup_py(stack_data, root):
    data = upstream_only(stack_data)
    data["targets"]["gb10"]["env"]["sources"]["causal_conv1d"] = {"TORCH_CUDA_ARCH_LIST": "12.0"}
    found = list(ignored_arch_list(load(data, root)))
    assert keys(found) == ["targets.gb10.env.sources.causal_conv1d.TORCH_CUDA_ARCH_LIST"]
    assert "12 targets, setup.py:178" in found[0][1] and "MEGACPP_CUDA_ARCHS" in found[0][2]
    arch_overlay(root, data)
    assert list(ignored_arch_list(load(data, root))) == []


def test_hard_coded_archs_warn_until_an_arch_overlay(stack_data, root):
    stack_data = upstream_only(stack_data)
    found = list(hard_coded_archs(load(stack_data, root)))
    assert sorted((k, m.split()[0]) for k, m, _ in found) == [
        ("targets.cloud.sources", "causal_conv1d"), ("targets.cloud.sources", "mamba_ssm"),
        ("targets.cuda_smoke.sources", "causal_conv1d"),
        ("targets.gb10.sources", "causal_conv1d"), ("targets.gb10.sources", "mamba_ssm"),
    ]  # fmt: skip
    assert any("nvcc --threads 4 (setup.py:126)" in m for m in messages(found))
    data = copy.deepcopy(stack_data)
    arch_overlay(root, data)
    arch_overlay(root, data, "mamba_ssm", "mamba-arch")
    # an overlay alone changes nothing: the target must set the variable it reads
    assert sorted(k for k in keys(hard_coded_archs(load(data, root)))) == ["targets.cloud.sources"] * 2 + [
        "targets.cuda_smoke.sources"] + ["targets.gb10.sources"] * 2  # fmt: skip
    data["targets"]["cuda_smoke"]["env"]["sources"]["causal_conv1d"] = {"MEGACPP_CUDA_ARCHS": "90a"}
    for target, archs in (("cloud", "90a 100a"), ("gb10", "121a")):
        for name in ("causal_conv1d", "mamba_ssm"):
            data["targets"][target]["env"]["sources"][name] = {"MEGACPP_CUDA_ARCHS": archs}
    assert list(hard_coded_archs(load(data, root))) == []


def test_the_shipped_arch_overlays_are_read_and_cover_each_target(stack_data, root):
    spec = load(stack_data, root)
    assert list(hard_coded_archs(spec)) == [] and list(overlay_archs_cover_target(spec)) == []
    assert list(unread_env(spec)) == []  # MEGACPP_CUDA_ARCHS and NVCC_THREADS are read by the overlays
    for target in ("cloud", "gb10"):
        for name in ("causal_conv1d", "mamba_ssm"):
            assert "MEGACPP_CUDA_ARCHS" in spec.target(target).build_env_for(spec.source(name))


@pytest.mark.parametrize(
    ("target", "value", "problem"),
    [
        ("cloud", "90a", "runs on sm_100a"),  # B200 left out
        ("gb10", "120", "runs on sm_121a"),  # bare sm_120 SASS does not load on 12.1a's features
        ("gb10", "12.1a", "expected space-separated SMs"),  # TORCH_CUDA_ARCH_LIST spelling
        ("cloud", "90a;100a", "expected space-separated SMs"),
        ("gb10", "", "expected space-separated SMs"),
    ],
)
def test_an_arch_list_that_misses_the_target_or_is_malformed(stack_data, root, target, value, problem):
    data = copy.deepcopy(stack_data)
    data["targets"][target]["env"]["sources"]["causal_conv1d"] = {"MEGACPP_CUDA_ARCHS": value}
    found = list(overlay_archs_cover_target(load(data, root)))
    assert keys(found) == [f"targets.{target}.env.sources.causal_conv1d.MEGACPP_CUDA_ARCHS"]
    assert problem in found[0][1]


@pytest.mark.parametrize(
    ("value", "fixed"),
    [("9.0a;10.0a", "9.0a 10.0a"), ("9.0a  10.0a", "9.0a 10.0a"), ("9.0a,10.0a", "9.0a 10.0a"), ("12.1a ", "12.1a")],
)
def test_flashinfer_arch_list_is_space_separated(stack_data, root, value, fixed):
    assert list(flashinfer_arch_list(load(stack_data, root))) == []
    data = copy.deepcopy(stack_data)
    data["targets"]["cloud"]["env"]["sources"]["flashinfer_jit_cache"]["FLASHINFER_CUDA_ARCH_LIST"] = value
    found = list(flashinfer_arch_list(load(data, root)))
    assert keys(found) == ["targets.cloud.env.sources.flashinfer_jit_cache.FLASHINFER_CUDA_ARCH_LIST"]
    assert found[0][2] == f'write "{fixed}"'


def test_family_arch_in_torch_arch_list(stack_data, root):
    data = copy.deepcopy(stack_data)
    data["targets"]["cloud"]["env"]["build"]["TORCH_CUDA_ARCH_LIST"] = "9.0;10.0;12.0f"
    found = list(family_arch_in_torch_list(load(data, root)))
    assert keys(found) == ["targets.cloud.env.build.TORCH_CUDA_ARCH_LIST"] and "12.0f" in found[0][1]


@pytest.mark.parametrize(("value", "flagged"), [("true", True), ("1", True), ("TRUE", False)])
def test_force_build_is_exactly_true(stack_data, root, value, flagged):
    data = copy.deepcopy(stack_data)
    data["sources"]["mamba_ssm"]["build_env"]["MAMBA_FORCE_BUILD"] = value
    found = list(exact_switch_values(load(data, root)))
    assert bool(found) is flagged
    if flagged:
        assert found[0][1] == f"mamba_ssm compares MAMBA_FORCE_BUILD with 'TRUE' (setup.py:41): {value!r} does nothing"


def test_a_non_boolean_comparison_is_not_a_switch(stack_data, root):
    data = copy.deepcopy(stack_data)
    data["sources"]["causal_conv1d"]["build_env"]["NVIDIA_PRODUCT_NAME"] = "DGX"  # compared with "PyTorch"
    assert list(exact_switch_values(load(data, root))) == []


# ---- facts files -------------------------------------------------------------------------------------


def test_stale_missing_unreadable_and_mismatched_facts(stack_data, root):
    assert list(facts_current(load(stack_data, root))) == []
    data = copy.deepcopy(stack_data)
    data["sources"]["mamba_ssm"]["commit"] = "a14b1dff0454a3bc27d9eb31355dc01e4b2490ed"
    (root / "facts" / "megatron_lm.toml").unlink()
    (root / "facts" / "causal_conv1d.toml").write_text("schema_version = [\n")
    data["sources"]["flashinfer"]["subdir"] = "flashinfer-cubin"
    found = {k: m for k, m, _ in facts_current(load(data, root))}
    assert found["sources.mamba_ssm.commit"] == (
        "stale: facts/mamba_ssm.toml was read at a14b1dff0454a3bc27d9eb31355dc01e4b2490ec, "
        "the pin is a14b1dff0454a3bc27d9eb31355dc01e4b2490ed"
    )
    assert found["sources.megatron_lm.commit"].startswith("missing: no facts/megatron_lm.toml")
    assert (
        found["sources.causal_conv1d.commit"].startswith("unreadable: ")
        and "not valid TOML" in found["sources.causal_conv1d.commit"]
    )
    assert "describes the project in '.', the spec builds 'flashinfer-cubin'" in found["sources.flashinfer.commit"]


def test_provisional_facts_are_a_warning_naming_their_origin(stack_data, root):
    found = list(facts_provisional(load(stack_data, root)))
    fetched = ["vllm_cutlass", "vllm_deepgemm", "vllm_flash_attn", "vllm_flashkda", "vllm_flashmla", "vllm_fmha_sm100",
               "vllm_qutlass", "vllm_tml_fa4", "vllm_triton_kernels"]  # fmt: skip
    # vLLM's facts are verified (the sdist's commit record names the pin) and its fetch pins are read there;
    # triton's v3.5.1 is pinned too (facts/README.md), so no unpinned fetch is left to report
    # vllm_cutlass's facts are verified too: read from a sparse checkout at the pin that leaves out only
    # the one image its snapshot lacks, which the spec declares (unobtainable; facts read_from.absent)
    assert sorted(keys(found)) == []
    data = copy.deepcopy(stack_data)
    data["sources"][fetched[1]]["provisional"] = "not yet re-read"
    found = {k: m for k, m, _ in facts_provisional(load(data, root))}
    assert "is provisional: not yet re-read" in found[f"sources.{fetched[1]}.provisional"]


# ---- CUTLASS, fetches, couplings, artifacts ----------------------------------------------------------


def test_cutlass_is_judged_by_its_version_h(stack_data, root):
    assert list(cutlass_content(load(stack_data, root))) == []  # b46b16d: 4.5.0 by version.h, not a v4.4.2 descendant
    path = root / "facts" / "flashinfer.toml"
    text = path.read_text()
    assert 'name = "cutlass"\nversion = "4.5.0"' in text
    path.write_text(text.replace('name = "cutlass"\nversion = "4.5.0"', 'name = "cutlass"\nversion = "4.4.0"'))
    found = list(cutlass_content(load(stack_data, root)))
    assert keys(found) == ["sources.flashinfer.commit"]
    assert "CUTLASS 4.4.0 (facts/flashinfer.toml: 3rdparty/cutlass/include/cutlass/version.h)" in found[0][1]
    cloud_only = copy.deepcopy(stack_data)
    cloud_only["targets"].pop("gb10")
    cloud_only["aligned"] = []
    assert list(cutlass_content(load(cloud_only, root))) == []  # the floor is an sm_12x rule


def test_a_fetched_cutlass_is_judged_too(stack_data, root):
    path = root / "facts" / "vllm_cutlass.toml"  # v4.4.2: its python package says 4.2.0.0, version.h 4.4.2
    text = path.read_text()
    assert 'name = "nvidia-cutlass"\nversion = "4.2.0.0"' in text and 'name = "cutlass"\nversion = "4.4.2"' in text
    path.write_text(text.replace('name = "cutlass"\nversion = "4.4.2"', 'name = "cutlass"\nversion = "4.4.1"'))
    found = list(cutlass_content(load(stack_data, root)))
    assert keys(found) == ["sources.vllm.commit"]
    assert found[0][1].startswith("vllm (VLLM_CUTLASS_SRC_DIR -> vllm_cutlass) builds against CUTLASS 4.4.1 "
                                  "(facts/vllm_cutlass.toml: include/cutlass/version.h)")  # fmt: skip


def test_every_redirectable_vllm_fetch_must_be_pinned(stack_data, root):
    assert list(pinned_fetches(load(stack_data, root))) == []
    data = copy.deepcopy(stack_data)
    data["sources"]["vllm"].pop("fetches")
    found = list(pinned_fetches(load(data, root)))
    names = sorted(re.match(r"vllm downloads (\S+)", m).group(1) for m in messages(found))
    assert names == [
        "cutlass",
        "deepgemm",
        "flashkda",
        "flashmla",
        "fmha_sm100",
        "qutlass",
        "tml_fa4",
        "triton_kernels",
        "vllm-flash-attn",
    ]  # fmt: skip  (arm_compute, oneDNN: CPU only, no variable)
    assert "vllm downloads flashmla (https://github.com/vllm-project/FlashMLA @ 0397728d511c4e3d94ea3a01d8dda8654525a611)" \
           " at build time (cmake/external_projects/flashmla.cmake:19) unless FLASH_MLA_SRC_DIR" in "\n".join(messages(found))  # fmt: skip
    for var in ("VLLM_CUTLASS_SRC_DIR", "DEEPGEMM_SRC_DIR", "FLASH_KDA_SRC_DIR", "FLASH_MLA_SRC_DIR", "FMHA_SM100_SRC_DIR",
                "QUTLASS_SRC_DIR", "TML_FA4_SRC_DIR", "TRITON_KERNELS_SRC_DIR", "VLLM_FLASH_ATTN_SRC_DIR"):  # fmt: skip
        data["sources"]["vllm"]["build_env"][var] = f"/opt/src/{var.lower()}"
    assert list(pinned_fetches(load(data, root))) == []


def test_a_fetched_source_must_be_pinned_where_the_build_pins_it(stack_data, root):
    data = copy.deepcopy(stack_data)
    data["sources"]["vllm_flashmla"]["commit"] = "a8f794d1251cbfd88a5011445dd5582289c727e4"  # vLLM 0.28.0's pin
    data["sources"]["vllm_cutlass"]["ref"] = "v4.4.1"
    found = list(pinned_fetches(load(data, root)))
    assert keys(found) == ["sources.vllm_cutlass.commit", "sources.vllm_flashmla.commit"]
    assert found[1][1] == ("vllm's build pins flashmla at 0397728d511c4e3d94ea3a01d8dda8654525a611 "
                           "(cmake/external_projects/flashmla.cmake:19); source vllm_flashmla is a8f794d1251c")  # fmt: skip


def test_a_fetched_source_points_where_the_build_expects_it(stack_data, root):
    """TRITON_KERNELS_SRC_DIR names python/triton_kernels/triton_kernels inside triton (SOURCE_SUBDIR in
    vLLM's CMake, facts fetches.subdir): a source given through it must set that subdir. Through CMake's
    own FETCHCONTENT_SOURCE_DIR_TRITON_KERNELS (the shipped spec) it names the root: FetchContent applies
    SOURCE_SUBDIR itself, so a subdir there is the error."""
    assert list(pinned_fetches(load(stack_data, root))) == []
    data = copy.deepcopy(stack_data)
    fetches = data["sources"]["vllm"]["fetches"]
    assert fetches.pop("FETCHCONTENT_SOURCE_DIR_TRITON_KERNELS") == "vllm_triton_kernels"
    fetches["TRITON_KERNELS_SRC_DIR"] = "vllm_triton_kernels"
    assert "subdir" not in data["sources"]["vllm_triton_kernels"]
    found = list(pinned_fetches(load(data, root)))
    assert keys(found) == ["sources.vllm_triton_kernels.subdir"]
    assert found[0][1] == (
        "vllm's build expects TRITON_KERNELS_SRC_DIR to point at python/triton_kernels/triton_kernels inside "
        "triton_kernels (cmake/external_projects/triton_kernels.cmake:22); source vllm_triton_kernels has subdir (none)"
    )
    data["sources"]["vllm_triton_kernels"]["subdir"] = "python/triton_kernels"
    (found,) = pinned_fetches(load(data, root))
    assert found[0] == "sources.vllm_triton_kernels.subdir" and "has subdir python/triton_kernels" in found[1]
    data = copy.deepcopy(stack_data)
    data["sources"]["vllm_triton_kernels"]["subdir"] = "python/triton_kernels/triton_kernels"
    (found,) = pinned_fetches(load(data, root))
    assert found[0] == "sources.vllm_triton_kernels.subdir" and found[2] == "drop sources.vllm_triton_kernels.subdir"
    assert "CMake applies its SOURCE_SUBDIR python/triton_kernels/triton_kernels itself" in found[1]


def test_a_declared_coupling_must_be_built_first(stack_data, root):
    assert list(couplings(load(stack_data, root))) == []
    data = copy.deepcopy(stack_data)
    for t in ("gb10", "cloud"):
        srcs = data["targets"][t]["sources"]
        srcs.remove("causal_conv1d")
        srcs.insert(srcs.index("mamba_ssm") + 1, "causal_conv1d")
    assert messages(couplings(load(data, root))) == [
        "mamba_ssm needs causal_conv1d, which gb10 builds after it",
        "mamba_ssm needs causal_conv1d, which cloud builds after it",
    ]


def test_artifact_set_matches_the_source_pins(stack_data, root):
    assert list(artifact_pins(load(stack_data, root))) == []
    data = copy.deepcopy(stack_data)
    dirs = data["artifacts"]["flashinfer_cubins"]["dirs"]
    first = next(iter(dirs))
    dirs[first] = "0" * 64
    found = list(artifact_pins(load(data, root)))
    assert keys(found) == [f"artifacts.flashinfer_cubins.dirs.{first}"] and "flashinfer/artifacts.py:138" in found[0][1]


# ---- the dependency graph ------------------------------------------------------------------------------


def test_conflicting_pins_name_both_requirers_and_an_override_resolves_them(stack_data, root):
    assert list(requirement_conflicts(load(stack_data, root))) == []
    data = copy.deepcopy(stack_data)
    overrides = data["targets"]["gb10"]["resolutions"]["overrides"]
    data["targets"]["gb10"]["resolutions"]["overrides"] = [o for o in overrides if "tilelang" not in o["requirement"]]
    found = messages(requirement_conflicts(load(data, root)))
    assert len(found) == 1
    assert found[0].startswith("tilelang: mamba_ssm requires tilelang==0.1.8 (facts/mamba_ssm.toml: pyproject.toml "
                               "[project].dependencies) but vllm requires tilelang==0.1.12 (facts/vllm.toml")  # fmt: skip
    assert found[0].endswith("[linux/arm64]")


def test_a_requirement_on_a_source_built_distribution_is_checked_against_its_facts(stack_data, root):
    data = copy.deepcopy(stack_data)
    overrides = data["targets"]["cloud"]["resolutions"]["overrides"]
    data["targets"]["cloud"]["resolutions"]["overrides"] = [
        o for o in overrides if "flashinfer" not in o["requirement"]
    ]
    found = messages(requirement_conflicts(load(data, root)))
    assert found == [
        "flashinfer-python: vllm requires flashinfer-python==0.6.18 (facts/vllm.toml: PKG-INFO Requires-Dist (sdist "
        "metadata; setup.py:1504 install_requires is computed)) but source flashinfer builds flashinfer-python 0.6.17 "
        "(facts/flashinfer.toml distribution.version) [linux/amd64]"
    ]


def test_conflicts_respect_markers_per_platform(stack_data, root):
    data = copy.deepcopy(stack_data)
    data["targets"]["gb10"]["requirements"].append('quack-kernels==0.3.0; platform_machine == "x86_64"')
    assert list(requirement_conflicts(load(data, root))) == []  # gb10 is aarch64: the requirement never applies
    data["targets"]["cloud"]["requirements"] = [*data["targets"]["gb10"]["requirements"]]
    found = messages(requirement_conflicts(load(data, root)))
    assert [m.rsplit("[", 1)[1] for m in found] == ["linux/amd64]", "linux/amd64]"]
    assert sum("mamba_ssm requires quack-kernels>=0.3.4" in m for m in found) == 1
    assert sum("vllm requires quack-kernels==0.6.4" in m for m in found) == 1


def test_triton_and_pytorch_triton_are_never_both_installed(stack_data, root):
    assert list(module_owners(load(stack_data, root))) == []
    data = copy.deepcopy(stack_data)
    data["targets"]["cloud"]["resolutions"]["overrides"].pop(0)  # the triton override
    found = list(module_owners(load(data, root)))
    assert keys(found) == ["targets.cloud.resolutions.overrides"]
    assert "pytorch-triton and triton both install site-packages/triton/" in found[0][1]
    assert "megatron_lm (stack)" in found[0][1] and "mamba_ssm" in found[0][1]
    no_alias = copy.deepcopy(stack_data)
    no_alias["targets"]["cloud"]["resolutions"]["provides"] = []
    assert keys(module_owners(load(no_alias, root))) == ["targets.cloud.resolutions.provides"]


def test_resolutions_must_apply(stack_data, root):
    assert list(resolutions_apply(load(stack_data, root))) == []
    data = copy.deepcopy(stack_data)
    data["targets"]["gb10"]["resolutions"]["overrides"].append(
        {"requirement": "torch>=2.13.0.dev0,<2.14", "reason": "vLLM pins the release"}
    )
    found = list(resolutions_apply(load(data, root)))
    assert keys(found) == ["targets.gb10.resolutions.overrides[5]"]
    assert "uv resolves an overridden requirement without its index" in found[0][1]


# ---- UP011 / UP012: empty overlays, sanity checks that can never pass ----------------------------------


def test_an_empty_overlay_attached_to_a_source_is_a_warning_naming_it(stack_data, root):
    found = list(empty_overlays(load(stack_data, root)))
    assert keys(found) == ["sources.vllm.overlay"]  # overlays/vllm: files = [] until the team's files land
    assert found[0][1] == (
        "overlay vllm of vllm lists no files (overlays/vllm/manifest.toml files = []): it changes nothing in the build"
    )
    assert "megacpp-env overlay new vllm --from <checkout> --force" in found[0][2]


def test_a_sanity_model_the_pinned_registry_lacks_is_an_error_until_the_overlay_registers_it(stack_data, root):
    assert list(sanity_can_pass(load(stack_data, root))) == []  # Qwen3_5ForCausalLM: upstream's registry has it
    data = copy.deepcopy(stack_data)
    data["sources"]["vllm"]["sanity"]["vllm_models"] = ["Qwen3_5ForCausalLM", "Qwen3_5ForCausalLMTextOnly"]
    found = list(sanity_can_pass(load(data, root)))
    assert keys(found) == ["sources.vllm.sanity.vllm_models"]
    assert found[0][1] == (
        "vllm's sanity resolves Qwen3_5ForCausalLMTextOnly, which its registry at 98dff2a81d74 lacks (facts/vllm.toml "
        "models, from vllm/model_executor/models/registry.py:745 _VLLM_MODELS) and overlay vllm adds no file that "
        "names it: the check can never pass"
    )
    # the team's patched registry, once captured into the overlay, provides it
    files = root / "overlays" / "vllm" / "files" / "vllm" / "model_executor" / "models"
    files.mkdir(parents=True)
    (files / "registry.py").write_text('_X = {"Qwen3_5ForCausalLMTextOnly": ("qwen3_5", "Qwen3_5ForCausalLM")}\n')
    assert list(sanity_can_pass(load(data, root))) == []
