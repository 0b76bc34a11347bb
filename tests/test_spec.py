"""The loader: the shipped spec loads; malformed input gets one line naming file, line and key path."""

from __future__ import annotations

import copy

import pytest

from megacpp_env.errors import SpecError
from megacpp_env.spec import load_spec, load_spec_text
from tests.fixtures.spec import SHIPPED_TARGETS, STACK_YAML, load_data


def test_shipped_spec_loads_every_pin():
    spec = load_spec(STACK_YAML)
    assert list(spec.targets) == list(SHIPPED_TARGETS) and {"gb10", "cloud", "smoke", "cuda_smoke"} <= set(spec.targets)
    gb10, cloud, smoke = spec.targets["gb10"], spec.targets["cloud"], spec.targets["smoke"]
    cuda_smoke = spec.targets["cuda_smoke"]
    assert cuda_smoke.toolchain.cuda == "13.2" and cuda_smoke.indexes == ()
    assert cuda_smoke.toolchain.cuda_pypi == ("cuda-toolkit[nvcc,crt,nvvm,cudart,cccl,cuobjdump]==13.2.0",)
    assert spec.index_for("torch", cuda_smoke) is None  # PyPI's torch there, the nightly's elsewhere
    assert gb10.toolchain.cuda_pypi == () and "cuda_pypi" not in gb10.toolchain.to_dict()
    assert gb10.platforms == ("linux/arm64",) and cloud.platforms == ("linux/amd64",)
    assert smoke.platforms == ("linux/amd64", "linux/arm64")
    assert gb10.toolchain is cloud.toolchain or gb10.toolchain == cloud.toolchain
    tc = gb10.toolchain
    assert (tc.gcc, tc.cuda, tc.python, tc.ptx_isa, tc.min_driver) == ("15", "13.2", "3.13", "8.8", "595.45.04")
    assert gb10.gpu is not None and gb10.gpu.kernel_arch == "sm_120f" and gb10.gpu.archs == ("sm_121a",)
    assert gb10.gpu.torch_cuda_arch_list == "9.0;10.0;12.0"
    assert "torch>=2.13.0.dev0,<2.14" in gb10.requirements
    index = spec.index_for("torch")
    assert index is not None and index.explicit and index.url.endswith("/nightly/cu132")
    commits = {s.name: s.commit for s in spec.sources.values()}
    assert commits["mamba_ssm"] == "a14b1dff0454a3bc27d9eb31355dc01e4b2490ec"
    assert commits["causal_conv1d"] == "9e4ace0b1d53ede275308abf25f64a1fc04c5fd4"
    assert commits["flashinfer"] == "a0a6b019b9b27d49d209f85d028a1ae5a9b347d7"
    assert commits["megatron_lm"] == "5be9626709af2722333bf54797c954c09edeada3"
    assert commits["vllm"] == "98dff2a81d747d1dba01a47f939f48c3526d4206"
    assert spec.sources["flashinfer"].submodules
    assert spec.sources["vllm"].overlay == "vllm"
    assert spec.sources["vllm"].sanity.vllm_models == ("Qwen3_5ForCausalLM",)
    assert spec.sources["mamba_ssm"].build_env["MAMBA_FORCE_BUILD"] == "TRUE"
    assert spec.sources["megatron_lm"].install == "path"
    assert smoke.base_image("linux/arm64").tag == "arm64"
    assert gb10.runtime_env["TRITON_PTXAS_PATH"] == "/usr/local/cuda/bin/ptxas"


def test_digest_ignores_formatting_and_comments(stack_text):
    a = load_spec_text(stack_text).digest()
    b = load_spec_text("# a comment\n" + stack_text.replace("schema_version: 1", "schema_version:   1")).digest()
    assert a == b
    c = load_spec_text(stack_text.replace("min_driver: \"595.45.04\"", "min_driver: \"595.45.05\"")).digest()
    assert c != a


def test_error_message_names_file_line_key_and_remedy(stack_text):
    bad = stack_text.replace("commit: a14b1dff0454a3bc27d9eb31355dc01e4b2490ec", "commit: main")
    line = next(i for i, text in enumerate(bad.splitlines(), 1) if "commit: main" in text)
    with pytest.raises(SpecError) as exc:
        load_spec_text(bad, "stack.yaml")
    assert str(exc.value) == (
        f"stack.yaml:{line}: sources.mamba_ssm.commit: expected a 40-hex commit SHA, got 'main' "
        "(remedy: pin the full SHA: `git rev-parse <ref>` in a checkout)"
    )


def test_unknown_key_suggests_the_close_one(stack_text):
    bad = stack_text.replace("    submodules: true", "    submodule: true")
    with pytest.raises(SpecError) as exc:
        load_spec_text(bad, "stack.yaml")
    assert "sources.flashinfer.submodule: unknown key (remedy: did you mean 'submodules'?)" in str(exc.value)


def _set(data, path, value):
    node = data
    for part in path[:-1]:
        node = node[part]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value


_DELETE = object()

# (path into the YAML data, new value, expected key path in the message, expected fragment)
MALFORMATIONS = [
    (("schema_version",), 2, "schema_version", "unsupported schema_version 2"),
    (("schema_version",), "one", "schema_version", "expected an integer"),
    (("targets",), [], "targets", "expected a mapping, got a list"),
    (("targets",), {}, "targets", "at least one target is required"),
    (("targets", "gb10", "platforms"), ["linux/riscv64"], "targets.gb10.platforms[0]", "unknown value 'linux/riscv64'"),
    (("targets", "gb10", "platforms"), [], "targets.gb10.platforms", "at least one platform"),
    (("targets", "gb10", "platforms"), "linux/arm64", "targets.gb10.platforms", "expected a list"),
    (("targets", "gb10", "toolchain"), "cuda13-ubuntu", "targets.gb10.toolchain", "unknown toolchain"),
    (("targets", "gb10", "sources"), ["vllm", "megatron"], "targets.gb10.sources[1]", "did you mean 'megatron_lm'"),
    (("targets", "gb10", "base_image"), "nvidia/cuda", "targets.gb10.base_image", "neither a tag nor a digest"),
    (("targets", "gb10", "base_image"), "Nvidia/CUDA:13", "targets.gb10.base_image", "invalid image reference"),
    (("targets", "gb10", "base_image"), "nvidia/cuda:13@sha256:abc", "targets.gb10.base_image", "invalid image reference"),
    (("targets", "smoke", "base_image"), {"linux/amd64": "a/b:1"}, "targets.smoke.base_image", "no base image for platform linux/arm64"),
    (("targets", "gb10", "gpu", "kernel_arch"), "120f", "targets.gb10.gpu.kernel_arch", "a CUDA arch"),
    (("targets", "gb10", "gpu", "torch_cuda_arch_list"), "9.0,10.0", "targets.gb10.gpu.torch_cuda_arch_list", "expected a list such as"),
    (("targets", "gb10", "gpu", "sm_count"), -1, "targets.gb10.gpu.sm_count", "expected an integer in"),
    (("targets", "gb10", "serving", "gpu_memory_utilization"), 1.5, "targets.gb10.serving.gpu_memory_utilization", "expected a number in (0, 1]"),
    (("targets", "gb10", "serving", "gpu_memory_utilization"), float("nan"), "targets.gb10.serving.gpu_memory_utilization", "expected a number"),
    (("targets", "gb10", "features"), ["warp_specialize"], "targets.gb10.features[0]", "unknown value"),
    (("targets", "gb10", "runtime_patches"), ["triton_ptxaz"], "targets.gb10.runtime_patches[0]", "did you mean 'triton_ptxas'"),
    (("targets", "gb10", "requirements"), ["torch>=>2"], "targets.gb10.requirements[0]", "invalid requirement"),
    (("targets", "gb10", "requirements"), ["torch @ https://x/y.whl"], "targets.gb10.requirements[0]", "direct URL requirements are not allowed"),
    (("targets", "gb10", "requirements"), ["numpy", "numpy"], "targets.gb10.requirements[1]", "duplicate entry"),
    (("targets", "gb10", "env", "runtime", "TRITON_PTXAS_PATH"), True, "targets.gb10.env.runtime.TRITON_PTXAS_PATH", 'quote it: "True"'),
    (("targets", "gb10", "env", "runtime"), {"1BAD": "x"}, "targets.gb10.env.runtime.1BAD", "invalid environment variable name"),
    (("targets", "gb10", "env", "compile"), {}, "targets.gb10.env.compile", "unknown key"),
    (("targets", "gb10", "toolchain"), _DELETE, "targets.gb10", "missing required key 'toolchain'"),
    (("sources", "vllm", "commit"), "bf8e762", "sources.vllm.commit", "expected a 40-hex commit SHA"),
    (("sources", "vllm", "commit"), "BF8E76246223E2C5E9C4DF0C72E24250E9F1DB36", "sources.vllm.commit", "40-hex"),
    (("sources", "vllm", "repo"), "https://user:tok@github.example/v.git", "sources.vllm.repo", "credentials in a URL"),
    (("sources", "vllm", "repo"), "not a url", "sources.vllm.repo", "expected a URL"),
    (("sources", "vllm", "install"), "egg", "sources.vllm.install", "unknown value 'egg'"),
    (("sources", "vllm", "submodules"), "yes", "sources.vllm.submodules", "expected true or false"),
    (("sources", "vllm", "sanity", "imports"), ["vllm; import os"], "sources.vllm.sanity.imports[0]", "a dotted module name"),
    (("sources", "Bad-Name"), {"repo": "https://x/y.git", "commit": "a" * 40}, "sources.Bad-Name", "invalid name"),
    (("toolchains", "cuda132-ubuntu2404", "gcc"), "fifteen", "toolchains.cuda132-ubuntu2404.gcc", "invalid version"),
    (("toolchains", "cuda132-ubuntu2404", "cutlass"), "4.4.2", "toolchains.cuda132-ubuntu2404.cutlass", "invalid version specifier"),
    (("toolchains", "cuda132-ubuntu2404", "apt_packages"), ["gcc-15; rm -rf /"], "toolchains.cuda132-ubuntu2404.apt_packages[0]", "a Debian package name"),
    (("toolchains", "cuda132-ubuntu2404", "uv"), _DELETE, "toolchains.cuda132-ubuntu2404", "missing required key 'uv'"),
    (("indexes", "pytorch-nightly-cu132", "url"), "ftp://x", "indexes.pytorch-nightly-cu132.url", "expected a URL"),
    (("indexes", "pytorch-nightly-cu132", "packages"), ["torch", "to rch"], "indexes.pytorch-nightly-cu132.packages[1]", "invalid package name"),
    (("aligned",), [{"targets": ["gb10"]}], "aligned[0].targets", "at least two targets"),
    (("aligned",), [{"targets": ["gb10", "clowd"]}], "aligned[0].targets[1]", "did you mean 'cloud'"),
    (("snapshot", "golden"), "x", "snapshot.golden", "did you mean 'golden_dir'"),
]


@pytest.mark.parametrize(("path", "value", "key", "fragment"), MALFORMATIONS, ids=[".".join(map(str, m[0])) + f"={m[1]!r}"[:30] for m in MALFORMATIONS])
def test_malformation_is_one_line_spec_error(stack_data, path, value, key, fragment):
    data = copy.deepcopy(stack_data)
    _set(data, path, value)
    with pytest.raises(SpecError) as exc:
        load_data(data)
    message = str(exc.value)
    assert "\n" not in message
    assert exc.value.key == key, message
    assert exc.value.line > 0, message
    assert fragment in message
    assert message.startswith(f"{load_data.__defaults__[0]}:{exc.value.line}: {key}: ")


TEXT_MALFORMATIONS = [
    ("", "the spec is empty"),
    ("- a\n- b\n", "expected a mapping, got a list"),
    ("schema_version: 1\ntargets: {a: 1\n", "invalid YAML"),
    ("schema_version: 1\nschema_version: 1\ntargets: {}\n", "duplicate key"),
    ("schema_version: 1\n1: x\ntargets: {}\n", "keys must be strings"),
    ("schema_version: 1\ntargets: &a [*a]\n", "too deeply nested"),
    ("schema_version: 1\ntargets: \"\t\"\n", "expected a mapping"),
    ("\tschema_version: 1\n", "invalid YAML"),
]


@pytest.mark.parametrize(("text", "fragment"), TEXT_MALFORMATIONS)
def test_text_malformations(text, fragment):
    with pytest.raises(SpecError) as exc:
        load_spec_text(text, "x.yaml")
    assert fragment in str(exc.value)
    assert str(exc.value).startswith("x.yaml")


def test_billion_laughs_is_refused():
    text = "schema_version: 1\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):
        text += f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]\n"
    text += "targets: {}\n"
    with pytest.raises(SpecError) as exc:
        load_spec_text(text, "bomb.yaml")
    assert "too large" in str(exc.value) or "unknown key" in str(exc.value)


def test_missing_file_names_remedy(tmp_path):
    with pytest.raises(SpecError) as exc:
        load_spec(tmp_path / "nope.yaml")
    assert "spec file not found" in str(exc.value) and "--spec" in str(exc.value)


@pytest.mark.parametrize(
    ("repo", "ok"),
    [
        ("ssh://git@github.example/org/repo.git", True),
        ("git@github.example:org/repo.git", True),
        ("ssh://git:hunter2secret@github.example/org/repo.git", False),
        ("https://token@github.example/org/repo.git", False),
        ("https://user:pw@github.example/org/repo.git", False),
    ],
)
def test_repo_urls_never_carry_credentials(stack_data, repo, ok):
    stack_data["sources"]["vllm"]["repo"] = repo
    if ok:
        assert load_data(stack_data).sources["vllm"].repo == repo
    else:
        with pytest.raises(SpecError, match="credentials in a URL"):
            load_data(stack_data)


@pytest.mark.parametrize("url", ["git://host/simple", "ssh://git@host/simple", "ftp://host/simple"])
def test_index_urls_are_http_or_file(stack_data, url):
    stack_data["indexes"]["pytorch-nightly-cu132"]["url"] = url
    with pytest.raises(SpecError, match=r"indexes.pytorch-nightly-cu132.url: expected a URL \(https://, http://, file://\)"):
        load_data(stack_data)


def test_spec_digest_is_the_canonical_hash_of_its_view():
    from megacpp_env.fsutil import canonical_hash, canonical_json

    spec = load_spec(STACK_YAML)
    assert spec.digest() == canonical_hash(spec.to_dict())
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"\\u00e9","b":1}'
