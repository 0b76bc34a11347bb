"""Source build plans: made from the spec, round-tripped through their committed JSON, validated on read."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from megacpp_env.errors import SpecError
from megacpp_env.sourceplans import mirror_request, plan_of, target_for
from megacpp_env.spec import load_spec
from megacpp_env.srcbuild.mirror import Pin
from megacpp_env.srcbuild.plan import SourcePlan, read_plan
from tests.fixtures.spec import SHIPPED_TARGETS, load_data

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def spec():
    return load_spec(REPO_ROOT / "stack.yaml")


def test_plan_merges_target_and_source_env_and_carries_the_jobs_facts(spec) -> None:
    cloud = spec.target("cloud")
    plan = plan_of(spec, cloud, spec.source("causal_conv1d"))
    assert plan.build_env["CAUSAL_CONV1D_FORCE_BUILD"] == "TRUE"
    assert plan.build_env["TORCH_CUDA_ARCH_LIST"] == cloud.build_env["TORCH_CUDA_ARCH_LIST"]
    # the arch overlay makes setup.py read NVCC_THREADS (upstream hard-codes 4) and the target's archs
    # (from the facts: torch's cpp_extension reads MAX_JOBS; the overlay's setup.py reads NVCC_THREADS)
    assert (plan.jobs.nvcc_threads, plan.jobs.reads, plan.jobs.cuda) == (0, ("MAX_JOBS", "NVCC_THREADS"), True)
    # 4 files compiled (facts: setup.py sources=[...]), each for the 2 archs of MEGACPP_CUDA_ARCHS
    assert (plan.jobs.units, plan.jobs.archs, plan.jobs.divides) == (4, 2, False)
    assert plan.build_env["MEGACPP_CUDA_ARCHS"] == "90a 100a" and plan.overlay == "causal-conv1d-archs"
    assert plan.commit == "9e4ace0b1d53ede275308abf25f64a1fc04c5fd4" and plan.dist == "causal-conv1d"


def test_source_env_wins_over_the_target(stack_data) -> None:
    stack_data["targets"]["cloud"]["env"]["build"]["MAMBA_FORCE_BUILD"] = "FALSE"
    spec = load_data(stack_data)
    assert plan_of(spec, spec.target("cloud"), spec.source("mamba_ssm")).build_env["MAMBA_FORCE_BUILD"] == "TRUE"


def test_round_trip_through_the_committed_text(spec, tmp_path: Path) -> None:
    plan = plan_of(spec, spec.target("smoke"), spec.source("megacpp_smoke_ext"))
    path = tmp_path / "p.json"
    path.write_text(plan.dumps())
    assert read_plan(path) == plan
    assert plan.dumps() == read_plan(path).dumps()
    assert json.loads(plan.dumps())["generated_by"] == "megacpp-env render smoke"


def test_fetches_name_other_pinned_sources(stack_data) -> None:
    stack_data["sources"]["vllm"]["fetches"] = {"VLLM_CUTLASS_SRC_DIR": "flashinfer"}
    spec = load_data(stack_data)
    vllm = spec.source("vllm")
    plan = plan_of(spec, spec.target("cloud"), vllm)
    (fetch,) = plan.fetches
    assert (fetch.env, fetch.name, fetch.commit, fetch.submodules) == (
        "VLLM_CUTLASS_SRC_DIR", "flashinfer", spec.source("flashinfer").commit, True,
    )  # fmt: skip
    flashinfer = spec.source("flashinfer")
    assert mirror_request(spec, vllm).pins == (
        Pin(url=vllm.repo, commit=vllm.commit),
        Pin(url=flashinfer.repo, commit=flashinfer.commit, submodules=True),
    )


@pytest.mark.parametrize(
    ("fetches", "message"),
    [
        ({"X_DIR": "nope"}, "sources.vllm.fetches.X_DIR: unknown source 'nope'"),
        ({"X_DIR": "vllm"}, "sources.vllm.fetches.X_DIR: unknown source 'vllm'"),
        ({"bad-name": "mamba_ssm"}, "sources.vllm.fetches.bad-name: invalid environment variable name 'bad-name'"),
    ],
)
def test_bad_fetches_are_spec_errors(stack_data, fetches, message) -> None:
    stack_data["sources"]["vllm"]["fetches"] = fetches
    with pytest.raises(SpecError) as exc:
        load_data(stack_data)
    assert message in str(exc.value)


def test_a_fetched_source_must_fetch_nothing(stack_data) -> None:
    stack_data["sources"]["vllm"]["fetches"] = {"A_DIR": "flashinfer"}
    stack_data["sources"]["flashinfer"]["fetches"] = {"B_DIR": "mamba_ssm"}
    with pytest.raises(SpecError, match=r"sources\.vllm\.fetches\.A_DIR: source 'flashinfer' has fetches of its own"):
        load_data(stack_data)


def test_a_hand_written_reads_list_is_refused(stack_data) -> None:
    stack_data["sources"]["mamba_ssm"]["jobs"] = {"reads": ["NVCC_THREADS"]}
    with pytest.raises(SpecError, match=r"sources\.mamba_ssm\.jobs\.reads: the parallelism variables a build reads "
                                        r"are not written by hand: they come from its facts"):  # fmt: skip
        load_data(stack_data)


@pytest.mark.parametrize("target", SHIPPED_TARGETS)
def test_every_plans_reads_equal_what_its_facts_say_the_build_reads(spec, target) -> None:
    from megacpp_env.rules.readers import readers, spec_facts
    from megacpp_env.srcbuild.plan import JOBS_ENV

    facts = spec_facts(spec)
    for source in spec.target(target).sources:
        f = facts.get(source.name)
        assert f is not None, source.name
        names = readers(spec, source, f).names
        assert plan_of(spec, spec.target(target), source).jobs.reads == tuple(n for n in sorted(JOBS_ENV) if n in names)
    built = {s.name for s in spec.target(target).sources}
    if "vllm" in built:
        vllm = plan_of(spec, spec.target(target), spec.source("vllm")).jobs
        assert vllm.reads == ("MAX_JOBS", "NVCC_THREADS")  # vllm/envs.py, read by setup.py compute_num_jobs
    if "flashinfer_jit_cache" in built:
        jit = plan_of(spec, spec.target(target), spec.source("flashinfer_jit_cache")).jobs
        assert jit.reads == ("FLASHINFER_NVCC_THREADS", "MAX_JOBS")  # flashinfer/jit/cpp_ext.py


def test_target_for_needs_target_when_ambiguous(spec) -> None:
    builders = [t.name for t in spec.targets.values() if "causal_conv1d" in {s.name for s in t.sources}]
    assert len(builders) > 1
    with pytest.raises(SpecError, match=rf"source causal_conv1d is built by {len(builders)} targets \({', '.join(builders)}\); pass --target"):
        target_for(spec, spec.source("causal_conv1d"))
    only = {s.name: [t.name for t in spec.targets.values() if s in t.sources] for s in spec.sources.values()}
    for name, (builder,) in ((n, b) for n, b in only.items() if len(b) == 1):  # one builder: no --target needed
        assert target_for(spec, spec.source(name)).name == builder
    outsider = next(t for t in spec.targets.values() if spec.source("vllm") not in t.sources)
    with pytest.raises(SpecError, match=f"target {outsider.name} does not build source vllm"):
        target_for(spec, spec.source("vllm"), outsider.name)


def _doc(spec) -> dict:
    return json.loads(plan_of(spec, spec.target("smoke"), spec.source("megacpp_smoke_ext")).dumps())


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("commit"), "p.json: commit: missing (expected a string)"),
        (lambda d: d.update(commit="main"), "p.json: commit: expected a 40-hex commit SHA, got 'main'"),
        (lambda d: d.update(extra=1), "p.json: unknown key(s): extra (known: "),
        (lambda d: d.update(schema_version=2), "p.json: schema_version: unsupported schema_version 2"),
        (lambda d: d.update(install="egg"), "p.json: install: expected 'wheel' or 'path', got 'egg'"),
        (lambda d: d["jobs"].update(reads=["MAKEFLAGS"]),
         "p.json: jobs.reads[0]: expected one of CMAKE_BUILD_PARALLEL_LEVEL, FLASHINFER_NVCC_THREADS, MAX_JOBS, "
         "NVCC_THREADS, got 'MAKEFLAGS'"),
        (lambda d: d["jobs"].update(units=-1), "p.json: jobs.units: expected an integer in [0, 100000], got -1"),
        (lambda d: d["build_env"].update({"A": "x\ny"}), "p.json: build_env.A: control character"),
        (lambda d: d["fetches"].append({"env": "X"}), "p.json: fetches[0].name: missing (expected a string)"),
    ],
)
def test_reader_names_file_and_key(spec, tmp_path: Path, mutate, message) -> None:
    doc = _doc(spec)
    mutate(doc)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecError) as exc:
        read_plan(path)
    assert str(exc.value).startswith(f"{path.parent}/{message}")
    assert "remedy: re-render it" in str(exc.value)


def test_unreadable_plan_files(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="no such plan file"):
        read_plan(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(SpecError, match=r"bad.json: not valid JSON: .* \(remedy: re-render it"):
        read_plan(tmp_path / "bad.json")
    assert SourcePlan.from_dict(_doc(load_spec(REPO_ROOT / "stack.yaml"))).name == "megacpp_smoke_ext"


def test_a_fetch_that_names_a_subdir_points_the_variable_there(stack_data, tmp_path) -> None:
    """vLLM's TRITON_KERNELS_SRC_DIR names python/triton_kernels/triton_kernels inside triton's checkout:
    a fetched source's ``subdir`` reaches the plan (and only then: other plans keep their bytes), and the
    build points the variable at that directory of the verified checkout, or refuses when it is absent."""
    from megacpp_env.errors import VerificationError
    from megacpp_env.srcbuild.build import _fetch
    from tests.fixtures.git_repos import FILE_OK
    from tests.fixtures.srcbuild import make_bare_repo

    repo = make_bare_repo(tmp_path / "kernels.git", {"python/kernels/kernels/__init__.py": "X = 1\n"})
    stack_data["sources"]["kernels_src"] = {"repo": repo.url, "commit": repo.commit, "subdir": "python/kernels/kernels"}
    stack_data["sources"]["vllm"]["fetches"]["KERNELS_SRC_DIR"] = "kernels_src"
    spec = load_data(stack_data)
    plan = plan_of(spec, spec.target("cloud"), spec.source("vllm"))
    fetch = next(f for f in plan.fetches if f.env == "KERNELS_SRC_DIR")
    assert fetch.subdir == "python/kernels/kernels"
    subdirs = {f.env: f.to_dict().get("subdir") for f in plan.fetches if f.env != "KERNELS_SRC_DIR"}
    assert list(subdirs.values()) == [None] * 9  # triton_kernels goes through CMake's override: the root
    path = tmp_path / "plan.json"
    path.write_text(plan.dumps())
    assert read_plan(path) == plan
    got = _fetch(fetch, tmp_path / "src", FILE_OK)
    assert got == (tmp_path / "src" / "kernels-src" / "python" / "kernels" / "kernels").resolve()
    assert (got / "__init__.py").read_text() == "X = 1\n"
    missing = replace(fetch, name="kernels_two", subdir="python/nope")
    with pytest.raises(VerificationError, match=r"kernels_two: no directory 'python/nope' in its checkout at"):
        _fetch(missing, tmp_path / "src", FILE_OK)


def test_cmake_override_fetches_are_appended_to_cmake_args(spec) -> None:
    """FA4 and triton_kernels reach vLLM's CMake as -DFETCHCONTENT_SOURCE_DIR_<NAME>=<checkout> appended to
    the CMAKE_ARGS the stage already sets (setup.py:319-321 splits and appends it); their *_SRC_DIR
    variables, which select vLLM's local-development code, are never set."""
    from megacpp_env.errors import RefusedError
    from megacpp_env.srcbuild.plan import fetch_env

    plan = plan_of(spec, spec.target("cloud"), spec.source("vllm"))
    by_var = {f.env: f for f in plan.fetches}
    assert by_var["FETCHCONTENT_SOURCE_DIR_VLLM-FLASH-ATTN"].via == "cmake_args"
    assert by_var["FMHA_SM100_SRC_DIR"].via == "env"
    paths = {f.env: f"/opt/src/{f.name.replace('_', '-')}" for f in plan.fetches}
    env = fetch_env(plan, dict(plan.build_env), paths)
    assert env["CMAKE_ARGS"] == (
        "-DFETCHCONTENT_FULLY_DISCONNECTED=ON -DFETCHCONTENT_SOURCE_DIR_TRITON_KERNELS=/opt/src/vllm-triton-kernels "
        "-DFETCHCONTENT_SOURCE_DIR_VLLM-FLASH-ATTN=/opt/src/vllm-flash-attn"
    )
    assert env["FMHA_SM100_SRC_DIR"] == "/opt/src/vllm-fmha-sm100"
    assert "VLLM_FLASH_ATTN_SRC_DIR" not in env and "TRITON_KERNELS_SRC_DIR" not in env
    assert not any(k.startswith("FETCHCONTENT") for k in env)
    spaced = {**paths, "FETCHCONTENT_SOURCE_DIR_VLLM-FLASH-ATTN": "/tmp/my src/fa"}
    with pytest.raises(RefusedError, match=r"vllm: the checkout of vllm_flash_attn is at '/tmp/my src/fa', which "
                       r"CMAKE_ARGS cannot carry \(split on whitespace\)"):  # fmt: skip
        fetch_env(plan, dict(plan.build_env), spaced)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda f: f.update(via="cmake"), "fetches[0].via: expected one of env, cmake_args, got 'cmake'"),
        (lambda f: f.update(via="env", env="FETCHCONTENT_SOURCE_DIR_VLLM-FLASH-ATTN"),
         "fetches[0].env: expected an environment variable name"),
        (lambda f: f.update(via="cmake_args", env="VLLM_FLASH_ATTN_SRC_DIR"),
         "fetches[0].env: expected FETCHCONTENT_SOURCE_DIR_<NAME>"),
        (lambda f: f.update(via="cmake_args", env="FETCHCONTENT_SOURCE_DIR_X", subdir="python/x"),
         "fetches[0].subdir: CMake's override names the tree's root"),
    ],
)  # fmt: skip
def test_a_fetch_of_a_plan_file_is_read_by_its_via(spec, tmp_path: Path, mutate, message) -> None:
    doc = json.loads(plan_of(spec, spec.target("cloud"), spec.source("vllm")).dumps())
    doc["fetches"] = doc["fetches"][:1]
    mutate(doc["fetches"][0])
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SpecError) as exc:
        read_plan(path)
    assert message in str(exc.value)
