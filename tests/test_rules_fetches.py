"""UP014, UP015, UP016 and FA001's fetched trees: each fetch of vLLM (taken from facts/vllm.toml, not
listed here) is pinned with the submodules CMake would clone, a tree not read here is reported unverified
by name, and the override keeps upstream's release code path. Called on the shipped spec (copied with
its facts and overlays) and on mutations of it, and through ``check --rule`` as a user runs it."""

from __future__ import annotations

import copy
import shutil
import tomllib

import pytest
import yaml

from megacpp_env.cli import main
from megacpp_env.facts.store import read_facts
from megacpp_env.rules import run_rules
from megacpp_env.rules.fetches import fetch_named, fetch_overrides, fetch_submodules, unread_fetches
from megacpp_env.rules.sources import pinned_fetches
from tests.fixtures.spec import REPO_ROOT, load_data

VLLM_FACTS = read_facts(REPO_ROOT / "facts" / "vllm.toml")


@pytest.fixture
def root(tmp_path):
    for name in ("facts", "overlays"):
        shutil.copytree(REPO_ROOT / name, tmp_path / name)
    return tmp_path


def load(data, root):
    return load_data(data, root / "stack.yaml")


def redirected(data):
    """(variable, fetched source, its Fetch record) for each fetch of vLLM the spec redirects."""
    out = []
    for variable, name in sorted(data["sources"]["vllm"]["fetches"].items()):
        fetch = fetch_named(VLLM_FACTS, variable)
        assert fetch is not None, variable
        out.append((variable, name, fetch))
    return out


def test_the_shipped_spec_follows_cmake_for_every_fetch(stack_data, root):
    assert list(fetch_submodules(load(stack_data, root))) == []
    assert list(fetch_overrides(load(stack_data, root))) == []
    modes = {fetch.name: fetch.submodule_mode for _v, _n, fetch in redirected(stack_data)}
    # read from vLLM 0.29.0's own CMake files: only deepgemm and flashkda name their submodules
    assert modes == {
        "cutlass": "all", "vllm-flash-attn": "all", "flashmla": "all", "qutlass": "all", "deepgemm": "list",
        "flashkda": "list", "fmha_sm100": "all", "tml_fa4": "all", "triton_kernels": "all",
    }  # fmt: skip


@pytest.mark.parametrize("variable", sorted(yaml.safe_load((REPO_ROOT / "stack.yaml").read_text())["sources"]["vllm"]["fetches"]))
def test_a_fetch_pinned_without_the_submodules_cmake_clones_is_an_error(stack_data, root, variable):
    data = copy.deepcopy(stack_data)
    name = data["sources"]["vllm"]["fetches"][variable]
    fetch = fetch_named(VLLM_FACTS, variable)
    data["sources"][name].pop("submodules", None)
    found = list(fetch_submodules(load(data, root)))
    tree = (root / "facts" / f"{name}.toml").is_file()
    if fetch.submodule_mode == "all" and tree and not read_facts(root / "facts" / f"{name}.toml").submodules:
        assert found == []  # CUTLASS: CMake clones every submodule and its tree, read at the pin, has none
        return
    ((key, message, remedy),) = found
    assert key == f"sources.{name}.submodules" and remedy == f"set sources.{name}.submodules: true"
    assert message.startswith(f"vllm's build fetches {fetch.name} ({fetch.command} at {fetch.at}) and CMake clones ")
    if fetch.submodule_mode == "list":
        assert message.endswith(f"CMake clones the submodules {', '.join(fetch.submodules)} (GIT_SUBMODULES); "
                                f"source {name} is pinned without submodules")  # fmt: skip
    else:
        assert message.endswith("its tree is not read here)" if not tree else "its tree has third_party/cutlass)")


def test_check_rule_up014_passes_the_shipped_spec_and_fails_without_msa_submodules(stack_data, root, capsys):
    """As a user runs it: exit 0 on the shipped spec, 1 on a copy without MSA's submodules."""
    (root / "stack.yaml").write_text(yaml.safe_dump(stack_data, sort_keys=False))
    assert main(["check", "--spec", str(root / "stack.yaml"), "--rule", "UP014"]) == 0
    data = copy.deepcopy(stack_data)
    del data["sources"]["vllm_fmha_sm100"]["submodules"]
    (root / "stack.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    capsys.readouterr()
    assert main(["check", "--spec", str(root / "stack.yaml"), "--rule", "UP014"]) == 1
    out = capsys.readouterr().out
    assert "error UP014 sources.vllm_fmha_sm100.submodules: vllm's build fetches fmha_sm100 " in out
    assert "cmake/external_projects/fmha_sm100.cmake:17" in out


def _edit_fetch(root, name, **changes):
    """facts/vllm.toml with the fetch ``name`` changed (what another CMake file would have said)."""
    path = root / "facts" / "vllm.toml"
    text = path.read_text()
    start = text.index(f'[[fetches]]\nname = "{name}"')
    end = text.find("\n[[", start + 1) % (len(text) + 1)  # -1 (the last table) -> the end of the file
    block = text[start:end]
    for key, value in changes.items():
        line = next(ln for ln in block.splitlines() if ln.startswith(f"{key} = "))
        block = block.replace(line, f"{key} = {value}")
    path.write_text(text[:start] + block + text[end:])
    tomllib.loads(path.read_text())  # still a TOML file


def test_none_and_list_modes_against_the_spec_and_the_tree(stack_data, root):
    # GIT_SUBMODULES "": CMake clones none, the spec mirrors them all
    _edit_fetch(root, "fmha_sm100", submodule_mode='"none"')
    (found,) = fetch_submodules(load(stack_data, root))
    assert found[0] == "sources.vllm_fmha_sm100.submodules"
    assert "CMake clones no submodule" in found[1] and "which CMake leaves out" in found[1]
    # a list read against the tree qutlass's facts hold (third_party/cutlass at b2ca083)
    _edit_fetch(root, "qutlass", submodule_mode='"list"', submodules='["other"]')
    found = [f for f in fetch_submodules(load(stack_data, root)) if "qutlass" in f[0]]
    assert [f[1].split("; ", 1)[1] for f in found] == [
        "source vllm_qutlass brings every submodule of its tree (third_party/cutlass): extra third_party/cutlass, "
        "lacking other"
    ]
    _edit_fetch(root, "qutlass", submodules='["third_party/cutlass"]')
    assert [f for f in fetch_submodules(load(stack_data, root)) if "qutlass" in f[0]] == []


def test_every_tree_not_read_here_is_reported_unverified(stack_data, root):
    found = list(unread_fetches(load(stack_data, root)))
    unread = sorted(n for _v, n, _f in redirected(stack_data) if not (root / "facts" / f"{n}.toml").is_file())
    assert sorted(k.removeprefix("sources.").removesuffix(".unread") for k, _m, _r in found) == unread
    assert "vllm_fmha_sm100" in unread and "vllm_triton_kernels" in unread and "vllm_qutlass" not in unread
    msa = next(m for k, m, _r in found if k == "sources.vllm_fmha_sm100.unread")
    assert msa.startswith("unverified: the tree of vllm_fmha_sm100 at 087c161814d4 is not read here (")
    assert "of it CMake clones every submodule, recursively (no GIT_SUBMODULES) at " in msa
    findings = run_rules(load(stack_data, root))
    assert {f.severity for f in findings if f.code == "UP015"} == {"warning"}


def test_a_fetched_tree_neither_read_nor_declared_unread_is_an_error(stack_data, root):
    data = copy.deepcopy(stack_data)
    del data["sources"]["vllm_fmha_sm100"]["unread"]
    found = [f for f in run_rules(load(data, root)) if f.code == "FA001"]
    assert [(f.key, f.severity) for f in found] == [("sources.vllm_fmha_sm100.commit", "error")]
    assert "no facts/vllm_fmha_sm100.toml and no `unread` reason" in found[0].message
    assert "declare sources.vllm_fmha_sm100.unread: <why its tree cannot be read here>" in found[0].remedy
    data = copy.deepcopy(stack_data)
    data["sources"]["vllm_qutlass"]["unread"] = "said by the test"
    found = [f for f in run_rules(load(data, root)) if f.code == "FA001"]
    assert [f.remedy for f in found] == ["drop sources.vllm_qutlass.unread"]


def test_an_override_that_selects_local_development_code_is_an_error(stack_data, root):
    data = copy.deepcopy(stack_data)
    fetches = data["sources"]["vllm"]["fetches"]
    fetches["VLLM_FLASH_ATTN_SRC_DIR"] = fetches.pop("FETCHCONTENT_SOURCE_DIR_VLLM-FLASH-ATTN")
    fetches["TRITON_KERNELS_SRC_DIR"] = fetches.pop("FETCHCONTENT_SOURCE_DIR_TRITON_KERNELS")
    data["sources"]["vllm_triton_kernels"]["subdir"] = "python/triton_kernels/triton_kernels"
    found = list(fetch_overrides(load(data, root)))
    assert [k for k, _m, _r in found] == ["sources.vllm.fetches.TRITON_KERNELS_SRC_DIR",
                                          "sources.vllm.fetches.VLLM_FLASH_ATTN_SRC_DIR"]  # fmt: skip
    fa4 = found[1]
    assert fa4[1] == (
        "VLLM_FLASH_ATTN_SRC_DIR chooses the tree of vllm-flash-attn (cmake/external_projects/vllm_flash_attn.cmake:32) "
        "and also upstream's local-development code (cmake/external_projects/vllm_flash_attn.cmake:95): vllm would "
        "not build as upstream's release does"
    )
    assert fa4[2].endswith("`fetches: {FETCHCONTENT_SOURCE_DIR_VLLM-FLASH-ATTN: vllm_flash_attn}` (appended to CMAKE_ARGS)")
    assert "triton_kernels.cmake:39" in found[0][1]


def test_both_overrides_or_one_cmake_ignores_are_errors(stack_data, root):
    data = copy.deepcopy(stack_data)
    data["sources"]["vllm"]["fetches"]["VLLM_FLASH_ATTN_SRC_DIR"] = "vllm_flash_attn"
    found = list(fetch_overrides(load(data, root)))
    assert [m for _k, m, _r in found if "both" in m] == [
        "both VLLM_FLASH_ATTN_SRC_DIR and FETCHCONTENT_SOURCE_DIR_VLLM-FLASH-ATTN point vllm-flash-attn at a tree; "
        "VLLM_FLASH_ATTN_SRC_DIR wins (cmake/external_projects/vllm_flash_attn.cmake:32)"
    ]
    # qutlass.cmake's FetchContent_Populate takes its own options: CMake ignores FETCHCONTENT_SOURCE_DIR_QUTLASS
    data = copy.deepcopy(stack_data)
    fetches = data["sources"]["vllm"]["fetches"]
    fetches["FETCHCONTENT_SOURCE_DIR_QUTLASS"] = fetches.pop("QUTLASS_SRC_DIR")
    keys = [k for k, _m, _r in pinned_fetches(load(data, root))]
    assert keys == ["sources.vllm", "sources.vllm.fetches.FETCHCONTENT_SOURCE_DIR_QUTLASS"]
    # CMake's own override where vLLM's variable would do as well (CUTLASS): allowed, the release path either way
    data = copy.deepcopy(stack_data)
    fetches = data["sources"]["vllm"]["fetches"]
    fetches["FETCHCONTENT_SOURCE_DIR_CUTLASS"] = fetches.pop("VLLM_CUTLASS_SRC_DIR")
    assert [f for f in run_rules(load(data, root)) if f.severity == "error" and f.code.startswith("UP")] == []


def test_the_spdlog_declaration_names_what_fails_at_run_time_without_it(stack_data):
    """spdlog c3aed4b cannot be had here, so both FlashInfer sources leave it out; FlashInfer then has no
    data/spdlog/include, and the modules JIT-compiled at run time from a source that includes
    flashinfer/logging.h fail (read at the pin a0a6b01: the include closure of csrc/ and include/, and the
    generators in flashinfer/jit/ that list those sources). The declaration says so, not only the AOT part."""
    declaring = {n: s["unobtainable"]["3rdparty/spdlog"] for n, s in stack_data["sources"].items()
                 if "3rdparty/spdlog" in s.get("unobtainable", {})}  # fmt: skip
    assert sorted(declaring) == ["flashinfer", "flashinfer_jit_cache"]
    for reason in declaring.values():
        for what in ("all-reduce fusion and MoE all-reduce fusion (gen_trtllm_comm_module, flashinfer/jit/comm.py:190-199)",
                     "trtllm-gen MoE routing (gen_trtllm_gen_fused_moe_sm100_module", "gen_moe_utils_module",
                     "the logging module (flashinfer/utils.py:772)", "data/spdlog/include (flashinfer/jit/env.py:172)"):  # fmt: skip
            assert what in reason
