"""Every policy rule: one spec that trips it and one that does not."""

from __future__ import annotations

import copy
import re
import shutil

import pytest
import yaml

from megacpp_env.rules import all_rules, run_rules
from tests.fixtures.spec import REPO_ROOT, load_data

RULES = all_rules()


def fired(data, rule_id, tmp_path):
    spec = load_data(data, tmp_path / "stack.yaml")
    return list(run_rules(spec, only=(rule_id,)))


@pytest.fixture
def clean(stack_data, tmp_path):
    """The shipped spec, loaded from a temp dir that holds its overlays and upstream facts."""
    for src in stack_data["sources"].values():
        if "overlay" in src:
            shutil.copytree(
                REPO_ROOT / "overlays" / src["overlay"], tmp_path / "overlays" / src["overlay"], dirs_exist_ok=True
            )
    shutil.copytree(REPO_ROOT / "facts", tmp_path / "facts")
    return stack_data


def gb10(d):
    return d["targets"]["gb10"]


def tc(d):
    return d["toolchains"]["cuda132-ubuntu2404"]


def _unpin(d, key, env=""):
    """Move a pinned build-time fetch of vLLM back into unpinned_fetches (its stage has no network)."""
    vllm = d["sources"]["vllm"]
    vllm.setdefault("unpinned_fetches", {})[env or key] = "unpinned by the test"
    del d["sources"][vllm["fetches"].pop(key)]


def _fa4_through_its_own_variable(d):
    """vLLM's VLLM_FLASH_ATTN_SRC_DIR instead of CMake's override: its local-development branch."""
    fetches = d["sources"]["vllm"]["fetches"]
    fetches["VLLM_FLASH_ATTN_SRC_DIR"] = fetches.pop("FETCHCONTENT_SOURCE_DIR_VLLM-FLASH-ATTN")


def _set_env(d, name, value):
    gb10(d)["env"]["runtime"][name] = value


def edit(data, line):
    """One trip edit of a rule (``Rule.trip``: a ``Trip:`` line of its docstring): "set KEY = VALUE", "add
    KEY = VALUE" (to a list), "drop KEY", "drop KEY = VALUE" (from a list); KEY a dotted key path with [i]
    indices, VALUE YAML."""
    op, _, rest = line.partition(" ")
    path, _, raw = rest.partition(" = ")
    parts = [int(p) if p.isdigit() else p for p in re.split(r"\.|\[(\d+)\]", path) if p]
    node = data
    for part in parts[:-1]:
        node = node[part]
    last = parts[-1]
    value = yaml.safe_load(raw) if raw else None
    if op == "set":
        node[last] = value
    elif op == "add":
        node[last].append(value)
    elif op == "drop" and raw:
        node[last].remove(value)
    elif op == "drop":
        del node[last]
    else:
        raise AssertionError(f"unknown edit {line!r}")


# Rules whose trip is not an edit of the shipped spec: it fires on the spec as shipped (tests below), or it
# needs facts or a move of a fetch (the tests named beside them); `explain` shows their example in words.
TRIPS = {
    "TC005": None,  # trips on the shipped spec (no digests); see test below
    "UP011": None,  # overlays/vllm is empty on the shipped spec; see tests/test_rules_upstream.py
    "UP015": None,  # warns on the shipped spec (trees not read here); see tests/test_rules_fetches.py
    "UP007": None,  # needs a CUTLASS below 4.4.2 in the facts; see tests/test_rules_upstream.py
    "FA003": lambda d: _unpin(d, "FETCHCONTENT_SOURCE_DIR_TRITON_KERNELS", "TRITON_KERNELS_SRC_DIR"),  # every fetch: tests/test_sealed_fetches.py
    "UP016": _fa4_through_its_own_variable,
    "AR001": lambda d: d["artifacts"]["flashinfer_cubins"]["dirs"].popitem(),
}
TRIPS |= {r.code: (lambda d, r=r: [edit(d, e) for e in r.trip]) for r in RULES if r.trip}


def test_every_rule_has_a_trip_case():
    assert {r.code for r in RULES} == set(TRIPS)
    assert len({r.code for r in RULES}) == len(RULES)
    # a rule without trip edits says in words what trips it (`explain` shows it)
    assert [r.code for r in RULES if not r.trip and not r.example] == []


@pytest.mark.parametrize("rule_id", sorted(k for k, v in TRIPS.items() if v))
def test_rule_trips_and_not(rule_id, clean, tmp_path):
    assert fired(clean, rule_id, tmp_path) == [], f"{rule_id} fires on the shipped spec"
    data = copy.deepcopy(clean)
    TRIPS[rule_id](data)
    findings = fired(data, rule_id, tmp_path)
    assert findings, f"{rule_id} did not fire"
    for f in findings:
        assert f.code == rule_id and f.message and f.remedy and f.line > 0


def test_digest_rule(clean, tmp_path):
    bases = sum(len(b) if isinstance(b := t["base_image"], dict) else 1 for t in clean["targets"].values())
    assert len(fired(clean, "TC005", tmp_path)) == bases  # a warning per target and platform: all are tags
    data = copy.deepcopy(clean)
    digest = "@sha256:" + "a" * 64
    for t in data["targets"].values():
        base = t["base_image"]
        t["base_image"] = {p: v + digest for p, v in base.items()} if isinstance(base, dict) else base + digest
    assert fired(data, "TC005", tmp_path) == []


def test_shipped_spec_has_no_errors_once_overlays_exist(clean, tmp_path):
    findings = run_rules(load_data(clean, tmp_path / "stack.yaml"))
    assert [f for f in findings if f.severity == "error"] == []
    # no CUTLASS warning any more (GB012): vLLM's CUTLASS is a pinned source (VLLM_CUTLASS_SRC_DIR)
    # no UP003 either: causal-conv1d and mamba build the target's archs through their arch overlays
    # UP015: the trees of vLLM's fetches that no snapshot here holds are reported unverified, by name
    assert {f.code for f in findings if f.severity == "warning"} == {"TC005", "UP011", "UP015"}


def test_gb10_dead_path_requirement(clean, tmp_path):
    data = copy.deepcopy(clean)
    gb10(data)["requirements"] = [*gb10(data)["requirements"], "flash-attn>=2.7"]
    assert [f.key for f in fired(data, "GB006", tmp_path)] == ["targets.gb10.requirements[9]"]
    cloud_only = copy.deepcopy(clean)
    cloud_only["targets"]["cloud"]["requirements"] = [*cloud_only["targets"]["cloud"]["requirements"], "flash-attn"]
    assert fired(cloud_only, "GB006", tmp_path) == []


def test_torch_local_version_must_match_cuda(clean, tmp_path):
    data = copy.deepcopy(clean)
    gb10(data)["requirements"][0] = "torch==2.13.0.dev20260413+cu130"
    assert any("cu130 build" in f.message for f in fired(data, "TC001", tmp_path))


@pytest.mark.parametrize(
    ("constraint", "admits"),
    [(">=4.4.2", False), (">4.4.2", False), ("==4.5.0", False), ("~=4.4.2", False), (">=4.4.2,<5", False),
     (">4.4.1", True), (">=4.2", True), ("<5", True), ("!=4.4.1", True), ("==4.4.*", True), ("==4.4.1", True)],
)  # fmt: skip
def test_cutlass_floor_is_a_real_lower_bound(clean, tmp_path, constraint, admits):
    data = copy.deepcopy(clean)
    tc(data)["cutlass"] = constraint
    assert bool(fired(data, "GB004", tmp_path)) is admits


@pytest.mark.parametrize("commit", ["0" * 40, "1" * 40, "ab" * 20, "deadbeef" * 5, ("0123456789abcdef" * 3)[:40]])
def test_placeholder_commits_are_refused(clean, tmp_path, commit):
    data = copy.deepcopy(clean)
    data["sources"]["vllm"]["commit"] = commit
    assert fired(data, "TC002", tmp_path)


def test_aligned_targets_build_the_same_sources(clean, tmp_path):
    data = copy.deepcopy(clean)
    data["targets"]["cloud"]["sources"] = data["targets"]["cloud"]["sources"][:-1]
    assert [f.key for f in fired(data, "TC004", tmp_path)] == ["targets.cloud.sources"]


def test_vllm_cutlass_rule(clean, tmp_path):
    assert fired(clean, "GB012", tmp_path) == []  # fetches: VLLM_CUTLASS_SRC_DIR -> vllm_cutlass
    unpinned = copy.deepcopy(clean)
    unpinned["sources"]["vllm"]["fetches"].pop("VLLM_CUTLASS_SRC_DIR")
    assert [f.key for f in fired(unpinned, "GB012", tmp_path)] == ["sources.vllm.build_env"]
    pinned = copy.deepcopy(unpinned)
    pinned["sources"]["vllm"]["build_env"]["VLLM_CUTLASS_SRC_DIR"] = "/opt/src/cutlass"
    assert fired(pinned, "GB012", tmp_path) == []
    cmake = copy.deepcopy(unpinned)
    cmake["sources"]["vllm"]["fetches"]["FETCHCONTENT_SOURCE_DIR_CUTLASS"] = "vllm_cutlass"
    assert fired(cmake, "GB012", tmp_path) == []  # CMake's own override of the same fetch
    cloud_only = copy.deepcopy(unpinned)
    cloud_only["targets"]["gb10"]["env"]["sources"].pop("vllm")
    cloud_only["targets"]["gb10"]["sources"] = [
        "causal_conv1d",
        "mamba_ssm",
        "flashinfer",
        "flashinfer_jit_cache",
        "megatron_lm",
    ]
    cloud_only["targets"]["cloud"]["sources"] = cloud_only["targets"]["gb10"]["sources"]
    assert fired(cloud_only, "GB012", tmp_path) == []


def test_each_rule_is_a_module_attribute_callable_on_a_spec(stack_data, tmp_path):
    """Each rule is found under its own name in its module of megacpp_env.rules and runs alone on a spec."""
    from megacpp_env.rules import rule_modules

    named = {v.code: (m.__name__, k) for m in rule_modules() for k, v in vars(m).items() if v in RULES}
    assert sorted(named) == [r.code for r in RULES]
    assert all(module.startswith("megacpp_env.rules.") for module, _ in named.values())
    data = copy.deepcopy(stack_data)
    gb10(data)["gpu"]["kernel_arch"] = "sm_120"
    spec = load_data(data, tmp_path / "stack.yaml")
    by_code = {r.code: r for r in RULES}
    assert [key for key, _message, _remedy in by_code["GB001"](spec)] == ["targets.gb10.gpu.kernel_arch"]


NEW_RULE = """
from megacpp_env.rules.base import target_rule


@target_rule("ZZ{n}", "warning")
def dropped(spec, t):
    '''a rule dropped into the package'''
    yield (f"targets.{{t.name}}", "seen", "")
"""


@pytest.fixture
def drop_in(tmp_path, monkeypatch):
    """A directory on megacpp_env.rules' package path: a module written there is a module of the package."""
    import sys

    from megacpp_env import rules

    extra = tmp_path / "more_rules"
    extra.mkdir()
    monkeypatch.setattr(rules, "__path__", [*rules.__path__, str(extra)])
    yield extra
    for name in [m for m in sys.modules if m.startswith("megacpp_env.rules.zz_")]:
        del sys.modules[name]


def test_a_rule_module_dropped_into_rules_is_found(drop_in, stack_data, tmp_path):
    (drop_in / "zz_dropped.py").write_text(NEW_RULE.format(n=901))
    found = {r.code: r for r in all_rules()}
    assert found["ZZ901"].scope == "target" and found["ZZ901"].summary == "a rule dropped into the package"
    assert set(found) == {r.code for r in RULES} | {"ZZ901"}
    spec = load_data(stack_data, tmp_path / "stack.yaml")
    assert sorted(f.key for f in run_rules(spec, only=("ZZ901",))) == sorted(f"targets.{t}" for t in spec.targets)


def test_rule_codes_are_unique(drop_in):
    from megacpp_env.errors import MegacppEnvError

    (drop_in / "zz_one.py").write_text(NEW_RULE.format(n=902))
    (drop_in / "zz_two.py").write_text(NEW_RULE.format(n=902))
    with pytest.raises(MegacppEnvError, match=r"megacpp_env\.rules\.zz_two: rule code ZZ902 is used twice"):
        all_rules()


def test_a_rule_takes_its_summary_and_doc_from_its_docstring():
    """The first paragraph is the summary (without its closing period); the rest is the doc; a docstring of
    one paragraph is both; a rule with no docstring has no summary and is refused where it is made."""
    from megacpp_env.rules.base import spec_rule

    def two(spec):
        """the summary line.

        Why it exists,
        over two lines."""
        yield from ()

    def one(spec):
        """One paragraph, both."""
        yield from ()

    made = spec_rule("ZZ903", "error")(two)
    assert (made.summary, made.doc().doc) == ("the summary line", "Why it exists, over two lines.")
    made = spec_rule("ZZ904", "error")(one)
    assert (made.summary, made.doc().doc) == ("One paragraph, both", "One paragraph, both.")
    with pytest.raises(TypeError, match="rule ZZ905: its function has no docstring"):
        spec_rule("ZZ905", "error")(lambda spec: iter(()))


def test_a_rule_takes_its_trip_edits_and_example_from_its_docstring():
    """``Trip:`` lines (one edit each) and an ``Example:`` paragraph are read out of the docstring, wherever
    they stand after the summary, and are not part of the doc; a Trip paragraph with another line in it, a
    Trip line inside prose and a second Example are refused where the rule is made (an edit lost in prose
    would never be tested)."""
    from megacpp_env.rules.base import spec_rule

    def both(spec):
        """the summary.

        Trip: set indexes.a.explicit = false
        Trip: drop sources.b.commit

        Why it exists.

        Example: words that say
        what trips it."""
        yield from ()

    def bad(spec):
        """the summary.

        Trip: set indexes.a.explicit = false
        and then some prose"""
        yield from ()

    made = spec_rule("ZZ906", "error")(both)
    assert made.trip == ("set indexes.a.explicit = false", "drop sources.b.commit")
    assert (made.summary, made.why, made.example) == ("the summary", "Why it exists.", "words that say what trips it.")
    assert made.doc().example.endswith("  drop sources.b.commit\nwords that say what trips it.")
    with pytest.raises(TypeError, match="rule ZZ907: its docstring's Trip paragraph has a line that is not one edit"):
        spec_rule("ZZ907", "error")(bad)

    def buried(spec):
        """the summary.

        Some prose, and then
        Trip: set indexes.a.explicit = false"""
        yield from ()

    def twice(spec):
        """the summary.

        Example: one.

        Example: two."""
        yield from ()

    with pytest.raises(TypeError, match="rule ZZ908: its docstring has a Trip line inside prose"):
        spec_rule("ZZ908", "error")(buried)
    with pytest.raises(TypeError, match="rule ZZ909: its docstring has two Example paragraphs"):
        spec_rule("ZZ909", "error")(twice)
