"""The JSON Schema of stack.yaml: generated from the spec model, shipped current, valid, accepts the
shipped spec, and agrees with the loader on specs that are wrong in shape."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

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
    "gcc is not a version": _set(["toolchains", TC, "gcc"], "fifteen"),
    "a cuDNN constraint that is no specifier": _set(["toolchains", TC, "cudnn"], "9.13"),
    "an index URL of another scheme": _set(["indexes", IX, "url"], "ftp://example.org/simple"),
    "a repository that is no URL": _set(["sources", S, "repo"], "github.com/x/y"),
    "a requirement that is no PEP 508": lambda d: d["targets"][T]["requirements"].append("torch>>2"),
    "an extra requirement with a space for an operator": _set(["sources", S, "extra_requirements"], ["ninja 1.11"]),
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


# ---- a schema editors can use: descriptions, formats, the modeline, check-jsonschema -----------------



def _properties(node, path=""):
    """Every (path, property schema) in a schema, through $defs, oneOf, items and additionalProperties."""
    if isinstance(node, dict):
        for key, value in node.get("properties", {}).items():
            yield f"{path}.{key}", value
        for key, value in node.items():
            yield from _properties(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _properties(value, f"{path}[{i}]")


def test_every_property_has_a_description_from_the_model():
    props = list(_properties(stack_schema()))
    assert len(props) >= 100
    assert [p for p, v in props if not v.get("description")] == []
    from megacpp_env.spec import model as M
    from megacpp_env.spec.schema import field_docs

    source = stack_schema()["$defs"]["Source"]["properties"]
    assert source["commit"]["description"] == field_docs(M.Source)["commit"]  # the model's own words


def test_a_field_without_a_docstring_fails_generation(monkeypatch):
    from megacpp_env.spec import schema as S_

    real = S_.field_docs
    monkeypatch.setattr(S_, "field_docs", lambda cls: {k: v for k, v in real(cls).items() if k != "subdir"})
    with pytest.raises(TypeError, match=r"Source\.subdir: no attribute docstring"):
        S_.stack_schema()


def test_the_shipped_spec_names_its_schema_for_editors():
    first = (REPO_ROOT / "stack.yaml").read_text().splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    assert (REPO_ROOT / first.split("$schema=", 1)[1]).resolve() == SHIPPED.resolve()


VERSIONS = ["13.2", "15", "v1.0", "1!2.0", "1.0rc1", "1.0-rc.1", "1.0.post1", "1.0-1", "1.0.dev3", "1.0a1.post2.dev3",
            "2.13.0.dev20260413+cu132", "1.0+abc.DEF-1", " 1.0 ", "1.0RC1", "1.0_alpha_2", "1.0r", "1.0-dev",
            "latest", "13.x", "1..0", "1.0+", "+1", "1.0 rc1", "v", "", "1.0-", "1.0.", "1_0", "1.0+abc_", "1.0ab"]  # fmt: skip


@pytest.mark.parametrize("text", VERSIONS)
def test_the_version_pattern_is_pep_440_as_packaging_reads_it(text):
    import re

    from packaging.version import InvalidVersion, Version

    from megacpp_env.spec.fields import VERSION_PATTERN

    try:
        Version(text)
        valid = True
    except InvalidVersion:
        valid = False
    assert bool(re.fullmatch(VERSION_PATTERN, text)) is valid


@given(st.text(alphabet="0123456789.abcdeilnoprstvABCRV+-_! ", max_size=14))
@settings(max_examples=1500, deadline=None)
def test_the_version_pattern_agrees_with_packaging_on_any_text(text):
    import re

    from packaging.version import InvalidVersion, Version

    from megacpp_env.spec.fields import VERSION_PATTERN

    try:
        Version(text)
        valid = True
    except InvalidVersion:
        valid = False
    assert bool(re.fullmatch(VERSION_PATTERN, text)) is valid


@given(st.text(alphabet="torch[]ab,=<>~!.0123 ;'\"()_-*", max_size=24))
@settings(max_examples=1500, deadline=None)
def test_the_requirement_pattern_accepts_every_requirement_packaging_accepts(text):
    """Never stricter than the loader (it may let through what packaging then refuses)."""
    import re

    from packaging.requirements import InvalidRequirement, Requirement

    from megacpp_env.spec.fields import REQUIREMENT_PATTERN, SPECIFIER_PATTERN

    try:
        req = Requirement(text)
    except InvalidRequirement:
        return
    if req.url is None:
        assert re.fullmatch(REQUIREMENT_PATTERN, text), text
        if str(req.specifier):
            assert re.fullmatch(SPECIFIER_PATTERN, str(req.specifier))


@given(st.text(alphabet="=<>~!.0123ab*+ ,", max_size=16))
@settings(max_examples=1500, deadline=None)
def test_the_specifier_pattern_accepts_every_set_packaging_accepts(text):
    import re

    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    from megacpp_env.spec.fields import SPECIFIER_PATTERN

    try:
        parsed = SpecifierSet(text)
    except InvalidSpecifier:
        return
    if len(parsed):  # the loader refuses an empty one
        assert re.fullmatch(SPECIFIER_PATTERN, text), text


CJS_CASES = ["unknown target key", "target without toolchain", "gcc as a number", "commit is a branch",
             "unknown platform", "gcc is not a version", "an index URL of another scheme",
             "a requirement that is no PEP 508", "a repository that is no URL"]  # fmt: skip


def _check_jsonschema(path):
    import subprocess
    import sys
    from pathlib import Path

    exe = Path(sys.executable).parent / "check-jsonschema"
    return subprocess.run([str(exe), "--schemafile", str(SHIPPED), str(path)], capture_output=True, text=True,
                          check=False, timeout=120)  # fmt: skip


@pytest.mark.parametrize("case", CJS_CASES)
def test_check_jsonschema_catches_what_check_catches(case, tmp_path, capsys):
    """check-jsonschema (PyPI), with the shipped schema, fails the specs whose shape `check` fails."""
    doc = copy.deepcopy(SPEC)
    BAD[case](doc)
    path = tmp_path / "stack.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert main(["check", "--spec", str(path), "--json"]) == 1
    codes = {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert codes and all(c.startswith("SP") for c in codes)  # the spec itself is wrong, not a policy
    proc = _check_jsonschema(path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Schema validation errors" in proc.stdout + proc.stderr


def test_check_jsonschema_accepts_the_shipped_spec():
    proc = _check_jsonschema(REPO_ROOT / "stack.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
