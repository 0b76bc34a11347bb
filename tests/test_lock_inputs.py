"""The exact inputs of a lock and their hash."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from megacpp_env.layout import TOOL_REQUIREMENTS
from megacpp_env.lock.inputs import lock_inputs, lock_requirements
from megacpp_env.spec import load_spec, load_spec_text

ROOT = Path(__file__).resolve().parent.parent


def test_tool_requirements_match_pyproject_minus_uv():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert sorted(TOOL_REQUIREMENTS) == sorted(d for d in deps if Requirement(d).name != "uv")


def test_inputs_of_the_real_spec():
    spec = load_spec(ROOT / "stack.yaml")
    smoke = lock_inputs(spec, spec.targets["smoke"], "linux/arm64")
    assert smoke.requirements == (  # sorted by canonical name: stack.yaml order does not matter
        "attrs>=24.2",
        "idna>=3.7",
        "jinja2>=3.1.4",
        "nvidia-ml-py>=12.560.30",
        "packaging>=24.2",
        "pyyaml>=6.0.1",
        "setuptools>=69",
        "six>=1.16",
        "tomli-w>=1.1",
        "uv==0.13.9",
        "wheel",
    )
    assert smoke.needed_indexes() == ()
    gb10 = lock_inputs(spec, spec.targets["gb10"], "linux/arm64")
    assert [i.name for i in gb10.needed_indexes()] == ["pytorch-nightly-cu132"]
    # the nightly's packages, and the one PyPI package the target allows pre-releases of (resolutions)
    assert gb10.prerelease_packages() == ("opentelemetry-semantic-conventions", "pytorch-triton", "torch", "torchvision")
    reqs = lock_requirements(spec, spec.targets["gb10"])
    assert len(reqs) == len(set(reqs)) and set(TOOL_REQUIREMENTS) <= set(reqs)
    assert list(reqs) == sorted(reqs, key=lambda r: (canonicalize_name(Requirement(r).name), r))
    # the sources' own requirements come from their facts; what vLLM's build strips is not there; what the
    # target builds from source is never resolved from an index
    assert {"tilelang==0.1.8", "tilelang==0.1.12", "triton>=3.5.0", "apache-tvm-ffi<=0.1.9"} <= set(reqs)
    assert "torch==2.13.0" not in reqs and "torchaudio==2.11.0" not in reqs
    names = {canonicalize_name(Requirement(r).name) for r in reqs}
    assert not names & {"flashinfer-python", "mamba-ssm", "causal-conv1d", "vllm", "megatron-core"}
    assert "triton; sys_platform == \"never\"" in gb10.overrides and "overrides" in gb10.to_dict()
    assert "overrides" not in smoke.to_dict()  # no resolutions: the hash of the committed smoke locks stays


def test_hash_is_stable_and_sensitive():
    spec = load_spec(ROOT / "stack.yaml")
    a = lock_inputs(spec, spec.targets["smoke"], "linux/amd64")
    assert a.digest() == lock_inputs(spec, spec.targets["smoke"], "linux/amd64").digest()
    assert a.digest() != lock_inputs(spec, spec.targets["smoke"], "linux/arm64").digest()
    from dataclasses import replace

    assert replace(a, requirements=(*a.requirements, "idna")).digest() != a.digest()
    assert replace(a, python="3.12").digest() != a.digest()


def test_committed_smoke_lock_records_current_inputs():
    spec = load_spec(ROOT / "stack.yaml")
    data = tomllib.loads((ROOT / "locks" / "pylock.smoke-linux-amd64.toml").read_text())
    tool = data["tool"]["megacpp-env"]
    assert tool["inputs-hash"] == lock_inputs(spec, spec.targets["smoke"], "linux/amd64").digest()
    assert tool["uv-version"] == "0.13.9"


def test_requirement_order_does_not_change_the_hash():
    path = ROOT / "stack.yaml"
    text = path.read_text()
    line = "    requirements: [attrs>=24.2, six>=1.16, idna>=3.7]\n"
    assert text.count(line) == 1
    reordered = load_spec_text(text.replace(line, "    requirements: [idna>=3.7, six>=1.16, attrs>=24.2]\n"), path)
    spec = load_spec(path)
    for platform in ("linux/amd64", "linux/arm64"):
        a = lock_inputs(spec, spec.targets["smoke"], platform)
        b = lock_inputs(reordered, reordered.targets["smoke"], platform)
        assert a.requirements == b.requirements and a.digest() == b.digest()
    from dataclasses import replace

    assert replace(a, requirements=a.requirements[::-1]).digest() == a.digest()  # built by hand, too
