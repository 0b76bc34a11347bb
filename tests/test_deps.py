"""The requirer graph, interval disjointness and the lock-time checks (megacpp_env/deps)."""

from __future__ import annotations

import shutil

import pytest
from packaging.specifiers import SpecifierSet

from megacpp_env.deps.conflicts import find_conflicts
from megacpp_env.deps.graph import target_deps
from megacpp_env.deps.intervals import disjoint
from megacpp_env.deps.lockcheck import after_resolution, preflight, requirers_of, wrong_origin
from megacpp_env.spec import load_spec
from tests.fixtures.spec import REPO_ROOT


@pytest.mark.parametrize(
    ("a", "b", "never"),
    [
        ("==0.1.8", "==0.1.12", True),
        ("<=0.1.9", "==0.1.11", True),
        (">=0.1.10", "<=0.1.9", True),
        ("==0.1.8", "!=0.1.8", True),
        ("~=1.5", ">=2", True),
        ("==1.5.*", "==1.6", True),
        (">=0.1.6,!=0.1.8,!=0.1.8.post0,<0.2", "<=0.1.9", False),
        (">1.0", "<1.1", False),  # 1.0.1 fits between
        ("==2.13.0", ">=2.13.0.dev0,<2.14", False),
        ("==0.6.17", "==0.6.17+cu132", False),  # local labels are compared away: never a false conflict
        ("==1.5.*", "==1.5.3", False),
        ("", "==1", False),
        ("===1.0", "==2", False),  # arbitrary equality is never judged
    ],
)
def test_disjoint_only_when_proven(a, b, never):
    assert disjoint(SpecifierSet(a), SpecifierSet(b)) is never
    assert disjoint(SpecifierSet(b), SpecifierSet(a)) is never


@pytest.fixture(scope="module")
def spec():
    return load_spec(REPO_ROOT / "stack.yaml")


def test_the_graph_names_every_requirer(spec):
    deps = target_deps(spec, spec.targets["gb10"])
    assert deps.missing_facts == ()
    assert {n.requirer for n in deps.on("tilelang")} == {"mamba_ssm", "vllm"}
    assert {n.requirer for n in deps.on("triton")} == {"mamba_ssm", "megatron_lm (stack)"}
    assert [n.where for n in deps.on("causal-conv1d")] == [
        "stack.yaml sources.mamba_ssm.needs.causal_conv1d (the fused path asserts causal_conv1d_cuda "
        "(mamba_ssm/ops/selective_scan_interface.py:195); upstream declares it only as the extra [causal-conv1d]); "
        "version from facts/mamba_ssm.toml extras"
    ]
    assert [n.requirement for n in deps.on("causal-conv1d")] == ["causal-conv1d>=1.2.0"]
    assert deps.on("torch") and all(n.requirer != "vllm" for n in deps.on("torch"))  # dropped: use_existing_torch
    assert sorted(deps.built) == ["causal-conv1d", "flashinfer-jit-cache", "flashinfer-python", "mamba-ssm",
                                  "megatron-core", "vllm"]  # fmt: skip
    assert not any(n.kind == "build" and n.requirer.startswith("megatron_lm") for n in deps.needs)  # install: path
    names = {r.split(";")[0].split("=")[0].split(">")[0].split("<")[0] for r in deps.lock_requirements()}
    assert "flashinfer-python" not in names and "vllm" not in names


def test_the_shipped_targets_have_no_conflict_and_pass_preflight(spec):
    for target in spec.targets.values():
        deps = target_deps(spec, target)
        assert find_conflicts(deps) == [] and preflight(deps) == []


def test_missing_facts_refuse_the_lock(spec, tmp_path):
    shutil.copy(REPO_ROOT / "stack.yaml", tmp_path / "stack.yaml")
    copied = load_spec(tmp_path / "stack.yaml")
    problems = preflight(target_deps(copied, copied.targets["smoke"]))
    assert problems == [
        "smoke: source megacpp_smoke_ext has no upstream facts (facts/megacpp_smoke_ext.toml): its requirements "
        "are unknown; run `megacpp-env facts extract megacpp_smoke_ext --from CHECKOUT`"
    ]


def test_requirers_of_a_resolver_error(spec):
    deps = target_deps(spec, spec.targets["gb10"])
    lines = requirers_of([deps], "Because tilelang==0.1.8 depends on apache_tvm_ffi>=0.1.2 ...")
    assert "  gb10: override tilelang==0.1.8 (mamba_ssm pins 0.1.8" in "\n".join(lines)
    assert any(line.startswith("  gb10: vllm requires apache-tvm-ffi==0.1.11") for line in lines)
    assert requirers_of([deps], "no package named here") == []


def test_after_resolution(spec):
    deps = target_deps(spec, spec.targets["gb10"])
    ok = {"pytorch-triton": "3.7.0+git8f3a4b2c", "torch": "2.13.0.dev20261101+cu132"}
    assert after_resolution(deps, "linux/arm64", ok) == []
    old = after_resolution(deps, "linux/arm64", {"pytorch-triton": "3.4.0+gitabc"})
    assert old == ["gb10 linux/arm64: mamba_ssm requires triton>=3.5.0 (facts/mamba_ssm.toml: pyproject.toml "
                   "[project].dependencies), but pytorch-triton 3.4.0+gitabc provides triton 3.4.0"]  # fmt: skip
    both = after_resolution(deps, "linux/arm64", {**ok, "triton": "3.7.1"})
    assert len(both) == 1 and "both pytorch-triton and triton are locked" in both[0]
    built = after_resolution(deps, "linux/arm64", {**ok, "flashinfer-python": "0.6.18"})
    assert built == ["gb10 linux/arm64: flashinfer-python 0.6.18 was resolved from an index, but source flashinfer "
                     "builds it (0.6.17); a package requires it that no override covers"]  # fmt: skip


def test_wrong_origin():
    index = "https://download.pytorch.org/whl/nightly/cu132"
    good = {"torch": ["https://download.pytorch.org/whl/nightly/cu132/torch-2.13.0.dev1%2Bcu132-cp313-cp313-x.whl"]}
    assert wrong_origin({"torch": index}, good) == []
    bad = {"torch": ["https://files.pythonhosted.org/packages/11/18/x/torch-2.13.0-cp313-cp313-manylinux_2_28_aarch64.whl"]}
    assert wrong_origin({"torch": index}, bad) == [
        f"torch was resolved to {bad['torch'][0]}, not from its explicit index {index}: nothing may replace "
        "a requirement on an explicit-index package (no override of it)"
    ]
