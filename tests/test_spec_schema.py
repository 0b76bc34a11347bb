"""The JSON Schema of stack.yaml: generated from the spec model, shipped current, valid, accepts the
shipped spec, and agrees with the loader on specs that are wrong in shape."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import yaml

from megacpp_env.cli import main
from megacpp_env.errors import SpecError
from megacpp_env.spec import load_spec_text
from megacpp_env.spec.schema import render_schema, stack_schema
from tests.fixtures.spec import REPO_ROOT

SHIPPED = REPO_ROOT / "megacpp_env" / "schemas" / "stack.schema.json"
SPEC = yaml.safe_load((REPO_ROOT / "stack.yaml").read_text())


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SHIPPED.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_shipped_schema_is_what_the_model_generates():
    assert SHIPPED.read_text() == render_schema(), f"{SHIPPED} is stale: megacpp-env schema > {SHIPPED}"


def test_the_schema_verb_prints_it(capsys):
    assert main(["schema"]) == 0
    assert capsys.readouterr().out == SHIPPED.read_text()


def test_the_shipped_spec_is_valid(validator):
    assert [e.message for e in validator.iter_errors(SPEC)] == []


def _first(section):
    return next(iter(SPEC[section]))


def _gpu_target():
    return next(n for n, t in SPEC["targets"].items() if "gpu" in t)


def _pypi_toolchain():
    return next(n for n, t in SPEC["toolchains"].items() if isinstance(t.get("cuda"), dict))


def _set(path, value):
    def edit(doc):
        *parents, last = path
        node = doc
        for key in parents:
            node = node[key]
        if value is DELETE:
            del node[last]
        else:
            node[last] = value

    return edit


DELETE = object()
T, S, TC, IX = _first("targets"), _first("sources"), _first("toolchains"), _first("indexes")
BAD = {
    "unknown top-level key": _set(["extras"], 1),
    "no targets": _set(["targets"], DELETE),
    "empty targets": _set(["targets"], {}),
    "schema_version 2": _set(["schema_version"], 2),
    "invalid target name": lambda d: d["targets"].update({"Bad-Name": d["targets"][T]}),
    "unknown target key": _set(["targets", T, "colour"], "red"),
    "target without toolchain": _set(["targets", T, "toolchain"], DELETE),
    "unknown platform": _set(["targets", T, "platforms"], ["linux/riscv64"]),
    "no platform": _set(["targets", T, "platforms"], []),
    "unknown feature": _set(["targets", T, "features"], ["warp_drive"]),
    "unknown runtime patch": _set(["targets", T, "runtime_patches"], ["no_such_patch"]),
    "unknown env section": _set(["targets", T, "env"], {"test": {}}),
    "max_jobs as a string": _set(["targets", T, "build"], {"max_jobs": "4"}),
    "enforce_eager as a string": _set(["targets", T, "serving"], {"enforce_eager": "yes"}),
    "gpu without archs": lambda d: d["targets"][_gpu_target()]["gpu"].pop("archs"),
    "unknown source key": _set(["sources", S, "branch"], "main"),
    "source without repo": _set(["sources", S, "repo"], DELETE),
    "commit is a branch": _set(["sources", S, "commit"], "main"),
    "install mode": _set(["sources", S, "install"], "egg"),
    "jobs reads an unknown variable": _set(["sources", S, "jobs"], {"reads": ["MAKEFLAGS"]}),
    "gcc as a number": _set(["toolchains", TC, "gcc"], 14),
    "unknown toolchain key": _set(["toolchains", TC, "clang"], "18"),
    "cuda mapping without pypi": lambda d: d["toolchains"][_pypi_toolchain()]["cuda"].pop("pypi"),
    "unknown index key": _set(["indexes", IX, "priority"], 1),
    "index without url": _set(["indexes", IX, "url"], DELETE),
    "unknown snapshot key": _set(["snapshot"], {"golden": "x"}),
    "aligned without targets": _set(["aligned"], [{"allow_divergence": []}]),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_schema_and_loader_both_reject(case, validator):
    doc = copy.deepcopy(SPEC)
    BAD[case](doc)
    assert list(validator.iter_errors(doc)), f"the schema accepts: {case}"
    with pytest.raises(SpecError):
        load_spec_text(yaml.safe_dump(doc, sort_keys=False), REPO_ROOT / "stack.yaml")


GOOD = {
    "the shipped spec": lambda d: None,
    "a base image per platform": lambda d: d["targets"][T].update(
        base_image=dict.fromkeys(d["targets"][T]["platforms"], "debian:forky-slim")
    ),
    "a description": _set(["targets", T, "description"], "another words"),
    "no optional sections": lambda d: [d.pop(k, None) for k in ("snapshot", "aligned", "project")],
}


@pytest.mark.parametrize("case", sorted(GOOD))
def test_schema_and_loader_both_accept(case, validator):
    doc = copy.deepcopy(SPEC)
    GOOD[case](doc)
    assert [e.message for e in validator.iter_errors(doc)] == []
    load_spec_text(yaml.safe_dump(doc, sort_keys=False), REPO_ROOT / "stack.yaml")


def test_every_key_the_loader_allows_is_in_the_schema():
    from megacpp_env.spec import loader as L

    defs = stack_schema()["$defs"]
    assert set(defs["Target"]["properties"]) == set(L.TARGET_KEYS)
    assert set(defs["Source"]["properties"]) == set(L.SOURCE_KEYS)
    assert set(defs["Toolchain"]["properties"]) == set(L.TOOLCHAIN_KEYS)
    assert set(stack_schema()["properties"]) == set(L.TOP_KEYS)
