"""Every error of a spec in one run: the loader reads on after an error (per field, per entry, per
section) and reports all of them with their file, line, key and code; an entry that failed is not
reported again where another names it."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from megacpp_env.cli import main
from megacpp_env.errors import SpecError, SpecErrors
from megacpp_env.spec import load_spec_text
from tests.fixtures.spec import REPO_ROOT

SPEC = yaml.safe_load((REPO_ROOT / "stack.yaml").read_text())


def errors_of(doc) -> list[SpecError]:
    with pytest.raises(SpecErrors) as info:
        load_spec_text(yaml.safe_dump(doc, sort_keys=False), REPO_ROOT / "stack.yaml")
    return list(info.value.errors)


def test_three_planted_errors_are_all_reported_with_locations(tmp_path, capsys):
    text = (REPO_ROOT / "stack.yaml").read_text()
    text = text.replace("    description: NVIDIA GB10", "    descripton: NVIDIA GB10", 1)  # unknown key (gb10)
    text = text.replace("commit: 98dff2a81d747d1dba01a47f939f48c3526d4206", "commit: main", 1)  # vllm's commit
    text = text.replace("  pytorch-nightly-cu132:\n    url: https://", "  pytorch-nightly-cu132:\n    url: ftp://", 1)
    spec = tmp_path / "stack.yaml"
    spec.write_text(text)
    lines = text.splitlines()
    assert main(["check", "--spec", str(spec), "--json"]) == 1
    found = json.loads(capsys.readouterr().out)["findings"]
    got = {(f["code"], f["key"]) for f in found}
    assert got == {
        ("SP002", "targets.gb10.descripton"),
        ("SP005", "sources.vllm.commit"),
        ("SP005", "indexes.pytorch-nightly-cu132.url"),
    }
    for f in found:  # each names the line that holds its key
        assert f["file"] == str(spec) and f["line"] > 0
        assert f["key"].rsplit(".", 1)[-1] in lines[f["line"] - 1]
    assert main(["check", "--spec", str(spec)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4 and out[-1].endswith("the spec did not load: 3 errors, 0 warnings, 0 suppressed")


def test_a_misspelt_required_key_is_unknown_and_missing(tmp_path):
    doc = copy.deepcopy(SPEC)
    doc["targets"]["gb10"]["platfroms"] = doc["targets"]["gb10"].pop("platforms")
    assert [(e.code, e.key) for e in errors_of(doc)] == [
        ("SP002", "targets.gb10.platfroms"),
        ("SP003", "targets.gb10"),
    ]


def test_other_verbs_say_the_first_and_how_many_more(tmp_path, capsys):
    doc = copy.deepcopy(SPEC)
    doc["sources"]["vllm"]["commit"] = "main"
    doc["toolchains"]["cuda132-ubuntu2404"]["gcc"] = "fifteen"
    (tmp_path / "stack.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    assert main(["show", "gb10", "--spec", str(tmp_path / "stack.yaml")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "toolchains.cuda132-ubuntu2404.gcc: invalid version 'fifteen'" in err[0]
    assert err[0].endswith("(and 1 more error: `megacpp-env check` lists them all)")


def test_a_broken_entry_is_not_reported_again_where_it_is_named():
    doc = copy.deepcopy(SPEC)
    doc["toolchains"]["cuda132-ubuntu2404"]["gcc"] = 15.0  # gb10 and cloud name this toolchain
    doc["sources"]["causal_conv1d"]["repo"] = "not a url"  # gb10, cloud and mamba_ssm name this source
    errors = errors_of(doc)
    assert [(e.code, e.key) for e in errors] == [
        ("SP004", "toolchains.cuda132-ubuntu2404.gcc"),
        ("SP005", "sources.causal_conv1d.repo"),
    ]


@pytest.mark.parametrize("n", [2, 5, 9])
def test_n_independent_errors_give_n_findings(n):
    """One bad field in each of n places of different kinds: n errors, in document order of reading."""
    edits = [
        lambda d: d["toolchains"]["cuda132-ubuntu2404"].__setitem__("uv", "latest"),
        lambda d: d["sources"]["vllm"].__setitem__("submodules", "yes"),
        lambda d: d["sources"]["vllm"].__setitem__("install", "egg"),
        lambda d: d["targets"]["gb10"]["gpu"].__setitem__("sm_count", -1),
        lambda d: d["targets"]["gb10"]["features"].append("warp_drive"),
        lambda d: d["targets"]["cloud"].__setitem__("colour", "red"),
        lambda d: d["targets"]["smoke"]["env"]["runtime"].__setitem__("LD_PRELOAD", "/x.so"),
        lambda d: d["snapshot"].__setitem__("golden_dir", "../out") if "snapshot" in d else d.__setitem__(
            "snapshot", {"golden_dir": "../out"}),
        lambda d: d["indexes"]["pytorch-nightly-cu132"].__setitem__("explicit", "true"),
    ]
    doc = copy.deepcopy(SPEC)
    for e in edits[:n]:
        e(doc)
    errors = errors_of(doc)
    assert len(errors) == n, [str(e) for e in errors]
    assert all(e.line > 0 and e.key and e.code.startswith("SP") for e in errors)


def test_several_errors_in_one_list_and_one_mapping():
    doc = copy.deepcopy(SPEC)
    doc["targets"]["gb10"]["features"] += ["warp_drive", "time_travel"]
    doc["targets"]["gb10"]["env"]["runtime"].update({"1BAD": "x", "LD_PRELOAD": "/evil.so"})
    keys = [e.key for e in errors_of(doc)]
    features = len(SPEC["targets"]["gb10"]["features"])
    assert f"targets.gb10.features[{features}]" in keys and f"targets.gb10.features[{features + 1}]" in keys
    assert "targets.gb10.env.runtime.1BAD" in keys and "targets.gb10.env.runtime.LD_PRELOAD" in keys


def test_a_single_error_reads_as_before():
    doc = copy.deepcopy(SPEC)
    doc["sources"]["vllm"]["commit"] = "main"
    (error,) = errors_of(doc)
    assert str(error).endswith("sources.vllm.commit: expected a 40-hex commit SHA, got 'main' "
                               "(remedy: pin the full SHA: `git rev-parse <ref>` in a checkout)")  # fmt: skip
