"""FA003 and the refusals of ``render`` and ``build``: a source built without network (every
``install: wheel`` source of a target) whose build still downloads a tree (``unpinned_fetches``) is an
error in ``check``, and ``render`` / ``build --dry-run`` refuse the target before writing or running
anything, naming the fetch."""

from __future__ import annotations

import copy
import shutil

import pytest
import yaml

from megacpp_env.cli import main
from megacpp_env.render import render_target
from megacpp_env.rules import run_rules
from tests.fixtures.spec import REPO_ROOT, load_data

# (the spec's key, the *_SRC_DIR variable vLLM's CMake reads): FA4 and triton_kernels go through CMake's
# own FETCHCONTENT_SOURCE_DIR_<NAME> (their variable also selects local-development code: UP016)
VLLM_FETCHES = [("VLLM_CUTLASS_SRC_DIR",) * 2, ("FETCHCONTENT_SOURCE_DIR_VLLM-FLASH-ATTN", "VLLM_FLASH_ATTN_SRC_DIR"),
                ("FLASH_MLA_SRC_DIR",) * 2, ("QUTLASS_SRC_DIR",) * 2, ("DEEPGEMM_SRC_DIR",) * 2,
                ("FLASH_KDA_SRC_DIR",) * 2, ("FMHA_SM100_SRC_DIR",) * 2, ("TML_FA4_SRC_DIR",) * 2,
                ("FETCHCONTENT_SOURCE_DIR_TRITON_KERNELS", "TRITON_KERNELS_SRC_DIR")]  # fmt: skip
# triton's v3.5.1 tag, as facts/README.md ("triton_kernels") says how it was tied
TRITON_V351 = "0add68262ab0a2e33b84524346cb27cbb2787356"


def unpin(data, key, env=""):
    data = copy.deepcopy(data)
    vllm = data["sources"]["vllm"]
    name = vllm["fetches"].pop(key)
    del data["sources"][name]
    vllm["unpinned_fetches"] = {env or key: "moved here by the test"}
    return data


@pytest.fixture
def project(tmp_path):
    for name in ("facts", "overlays", "images", "locks"):
        if (REPO_ROOT / name).is_dir():
            shutil.copytree(REPO_ROOT / name, tmp_path / name)
    return tmp_path


def errors(data, root, rule="FA003"):
    return [f for f in run_rules(load_data(data, root / "stack.yaml")) if f.code == rule]


def test_the_shipped_spec_pins_every_fetch_of_vllm(stack_data, project):
    vllm = stack_data["sources"]["vllm"]
    assert "unpinned_fetches" not in vllm and sorted(vllm["fetches"]) == sorted(k for k, _ in VLLM_FETCHES)
    triton = stack_data["sources"][vllm["fetches"]["FETCHCONTENT_SOURCE_DIR_TRITON_KERNELS"]]
    assert {k: triton[k] for k in ("repo", "ref", "commit")} == {
        "repo": "https://github.com/triton-lang/triton.git", "ref": "v3.5.1", "commit": TRITON_V351,
    }  # fmt: skip
    assert "subdir" not in triton  # CMake's override names the root; FetchContent applies SOURCE_SUBDIR
    assert errors(stack_data, project) == [] and errors(stack_data, project, "UP008") == []
    spec = load_data(stack_data, project / "stack.yaml")
    assert render_target(spec, spec.target("cloud")) and render_target(spec, spec.target("gb10"))


def test_an_unpinned_fetch_is_an_error_naming_the_fetch_and_the_remedy(stack_data, project):
    (found,) = errors(unpin(stack_data, "FETCHCONTENT_SOURCE_DIR_TRITON_KERNELS", "TRITON_KERNELS_SRC_DIR"), project)
    assert found.severity == "error" and found.key == "sources.vllm.unpinned_fetches.TRITON_KERNELS_SRC_DIR"
    assert found.message.startswith(
        "vllm is built without network in gb10, cloud, but its build downloads triton_kernels "
        "(https://github.com/triton-lang/triton.git @ v3.5.1, cmake/external_projects/triton_kernels.cmake:22) "
        "unless TRITON_KERNELS_SRC_DIR points at a pinned tree (moved here by the test)"
    )
    assert (
        found.remedy
        == "declare a pinned source for it and move it to `fetches: {FETCHCONTENT_SOURCE_DIR_TRITON_KERNELS: <that source>}`"
    )


@pytest.mark.parametrize(("fetch", "env"), VLLM_FETCHES)
def test_moving_a_fetch_into_unpinned_fetches_fails_check_render_and_build(stack_data, project, capsys, fetch, env):
    data = unpin(stack_data, fetch, env)
    (project / "stack.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    spec = str(project / "stack.yaml")
    key = f"sources.vllm.unpinned_fetches.{env}"
    assert main(["check", "--spec", spec]) == 1
    out = capsys.readouterr()
    assert f"error FA003 {key}: vllm is built without network in gb10, cloud" in out.out + out.err
    for argv in (["render", "--check", "--spec", spec], ["build", "cloud", "--dry-run", "--spec", spec]):
        assert main(argv) == 1, argv
        out = capsys.readouterr()
        assert f"target cloud: {key}: vllm is built without network" in out.err, argv
        assert "docker" not in out.out  # refused before any command line is printed
