"""Property tests: random YAML and random mutations of the real spec give a Spec or a SpecError, never a crash."""

from __future__ import annotations

import copy

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megacpp_env.errors import SpecError
from megacpp_env.spec import Spec, load_spec_text
from tests.fixtures.spec import STACK_YAML

STACK = yaml.safe_load(STACK_YAML.read_text())

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
    st.sampled_from(["linux/arm64", "sm_120", "sm_121a", "a" * 40, "13.2", ">=4.4.2", "torch>=2.13.0.dev0", "wheel"]),
)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)


def _accepts(text: str) -> None:
    try:
        spec = load_spec_text(text, "fuzz.yaml")
    except SpecError as exc:
        assert str(exc).startswith("fuzz.yaml")
        assert "\n" not in str(exc)
    else:
        assert isinstance(spec, Spec)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_random_text(text):
    _accepts(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_random_documents(doc):
    _accepts(yaml.safe_dump(doc))


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*prefix, i))


PATHS = [p for p in _paths(STACK) if p]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(PATHS), st.one_of(values, st.just("__delete__"))), min_size=1, max_size=3))
def test_random_mutations_of_the_real_spec(mutations):
    data = copy.deepcopy(STACK)
    for path, value in mutations:
        node = data
        try:
            for part in path[:-1]:
                node = node[part]
            if value == "__delete__":
                del node[path[-1]]
            else:
                node[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    _accepts(yaml.safe_dump(data))
