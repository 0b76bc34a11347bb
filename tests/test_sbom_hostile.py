"""`verify-image` treats what an image answers as untrusted input (issue 31, defect 1): the listing its
Python prints, the SBOM baked into it, its labels and the diff its own megacpp-env prints. Each hostile
answer is one error (exit 1), never a traceback and never exit 0.

The answers come from a docker CLI (``$MEGACPP_DOCKER``, a real executable) that prints what a hostile
image would; tests/test_sbom_docker.py has the real image. The SBOM check's verdicts are compared
with the CycloneDX 1.6 schema's (cyclonedx-python-lib) on type-level garbage in every field it reads."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megacpp_env import docker
from megacpp_env import sbom as sbom_module
from megacpp_env.cli import main
from megacpp_env.errors import FormatError, MegacppEnvError
from megacpp_env.sbom import SBOM_LABEL, image_sbom, render_sbom
from megacpp_env.spec import load_spec
from tests.fixtures.spec import REPO_ROOT

DOCKER = """#!{python}
import os, sys, time
args = sys.argv[1:]
log = os.environ.get("FAKE_LOG")
if log:
    with open(log, "a") as fh:
        fh.write(" ".join(args) + "\\n")
def answer(name, default=""):
    path = os.environ.get(name)
    return open(path).read() if path else default
if args[:2] == ["image", "inspect"]:
    sys.stdout.write("sha256:" + "e" * 64 if "{{{{.Id}}}}" in args else answer("FAKE_LABELS", "null"))
elif args[:1] == ["run"]:
    if os.environ.get("FAKE_SLEEP"):
        time.sleep(float(os.environ["FAKE_SLEEP"]))
    if os.environ.get("FAKE_FLOOD"):
        while True:
            sys.stdout.write("x" * 65536)
    entrypoint = args[args.index("--entrypoint") + 1] if "--entrypoint" in args else ""
    if entrypoint == "dpkg-query":
        sys.stdout.write(answer("FAKE_BASE"))
        sys.exit(0)
    if entrypoint.endswith("/python"):
        sys.stdout.write(answer("FAKE_CONTENTS"))
        sys.exit(0)
    if "bash" in args:
        sys.stdout.write(answer("FAKE_DIFF", "{{}}"))
        sys.exit(int(os.environ.get("FAKE_DIFF_RC", "0")))
    if "cat" in args:
        sys.stdout.write(answer("FAKE_SNAPSHOT", "{{}}"))
    else:
        sys.stdout.write(answer("FAKE_DISTS"))
"""


@pytest.fixture(scope="module")
def good_sbom() -> str:
    spec = load_spec(REPO_ROOT / "stack.yaml")
    return render_sbom(image_sbom(spec, spec.targets["smoke"], "linux/amd64"))


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, good_sbom: str):
    """Set what the image answers: ``fake(dists=..., sbom=..., labels=..., diff=...)`` (JSON-able values
    are dumped; a str is given as is)."""
    exe = tmp_path / "docker"
    exe.write_text(DOCKER.format(python=sys.executable))
    exe.chmod(0o755)
    monkeypatch.setenv("MEGACPP_DOCKER", str(exe))
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "calls.log"))

    def set_answers(*, dists: object = None, sbom: object = None, labels: object = None, diff: object = None) -> None:
        sbom_text = good_sbom if sbom is None else sbom
        digest = hashlib.sha256(sbom_text.encode()).hexdigest() if isinstance(sbom_text, str) else ""
        answers = {
            "FAKE_DISTS": dists if dists is not None else {"dists": [], "sbom": sbom_text},
            "FAKE_LABELS": labels if labels is not None else {SBOM_LABEL: digest},
            "FAKE_DIFF": diff if diff is not None else "{}",
        }
        for name, value in answers.items():
            path = tmp_path / name
            path.write_text(value if isinstance(value, str) else json.dumps(value))
            monkeypatch.setenv(name, str(path))

    set_answers()
    return set_answers


def _verify(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    rc = main(["verify-image", "img:1", *extra])
    out, err = capsys.readouterr()
    return rc, out, err


def _one_error(rc: int, err: str) -> None:
    assert rc == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.count("\n") == 1 and err.startswith("megacpp-env verify-image: error: "), err
    assert err[:-1].isprintable(), err  # what the image said reaches the terminal escaped


def test_a_good_answer_passes(fake, capsys) -> None:  # the fake is not failing everything
    rc, out, err = _verify(capsys)
    assert rc == 0, err
    assert "match the SBOM" in out


DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 50_000 + "1" + "}" * 50_000
LISTINGS = {
    "not JSON": "Traceback (most recent call last):\n",
    "a JSON list": [],
    "a JSON string": '"dists"',
    "deeply nested": DEEP,
    "deeply nested object": DEEP_OBJECT,
    "dists a string": {"dists": "x", "sbom": None},
    "a row of three": {"dists": [["a", "1", ""]], "sbom": None},
    "a row that is a dict": {"dists": [{"name": "a"}], "sbom": None},
    "an int name": {"dists": [[5, "1", "", []]], "sbom": None},
    "a list version": {"dists": [["a", ["1"], "", []]], "sbom": None},
    "files a string": {"dists": [["a", "1", "", "a.py"]], "sbom": None},
    "an int file": {"dists": [["a", "1", "", [3]]], "sbom": None},
    "a control character": {"dists": [["a\x1b[2J", "1", "", []]], "sbom": None},
    "a bidi override in a file": {"dists": [["a", "1", "", ["x\u202ey.py"]]], "sbom": None},
}


@pytest.mark.parametrize("case", sorted(LISTINGS))
def test_a_hostile_listing_is_one_error(fake, capsys, case) -> None:
    fake(dists=LISTINGS[case])
    rc, _out, err = _verify(capsys)
    _one_error(rc, err)

# dpkg's listing beside a good baked SBOM (issue 29: verify-image checks the Debian packages too)
DPKG_LISTINGS = {
    "a number": 5,
    "an object": {"apt": "3.3.3"},
    "dpkg-query failed": "failed",
    "a row of three": [["apt", "3.3.3", "amd64"]],
    "a row with a number": [["apt", 3, "amd64", "installed"]],
    "a name with an escape": [["apt\x1b[2J", "1", "amd64", "installed"]],
    "a version with a newline": [["apt", "1\n2", "amd64", "installed"]],
    "a name with a bidi override": [["ap\u202et", "1", "amd64", "installed"]],
    "a name that is a path": [["../../etc", "1", "amd64", "installed"]],
    "a status with a space": [["apt", "1", "amd64", "install ok"]],
}


def test_a_good_dpkg_listing_passes(fake, capsys, good_sbom) -> None:
    fake(dists={"dists": [], "sbom": good_sbom, "debs": None})  # no dpkg in the image, none in the SBOM
    rc, _out, err = _verify(capsys)
    assert rc == 0, err


@pytest.mark.parametrize("case", sorted(DPKG_LISTINGS))
def test_a_hostile_dpkg_listing_is_one_error(fake, capsys, good_sbom, case) -> None:
    fake(dists={"dists": [], "sbom": good_sbom, "debs": DPKG_LISTINGS[case]})
    rc, _out, err = _verify(capsys)
    _one_error(rc, err)



def _component_edit(path: tuple[object, ...], value: object):
    def edit(doc: dict) -> dict:
        node = doc["components"][0]
        for key in path[:-1]:
            node = node[key]
        if value is _DELETE:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        return doc

    return edit


_DELETE = object()
SBOM_EDITS = {
    "components a dict": lambda d: {**d, "components": {}},
    "a component that is a string": lambda d: {**d, "components": ["x", *d["components"]]},
    "specVersion a number": lambda d: {**d, "specVersion": 1.6},
    "name missing": _component_edit(("name",), _DELETE),
    "name a list": _component_edit(("name",), ["a"]),
    "name an int": _component_edit(("name",), 5),
    "version a list": _component_edit(("version",), ["1"]),
    "version an int": _component_edit(("version",), 3),
    "version null": _component_edit(("version",), None),
    "purl an int": _component_edit(("purl",), 7),
    "type missing": _component_edit(("type",), _DELETE),
    "bom-ref a dict": _component_edit(("bom-ref",), {}),
    "externalReferences a string": _component_edit(("externalReferences",), "https://x"),
    "externalReferences an int": _component_edit(("externalReferences",), 3),
    "externalReferences null": _component_edit(("externalReferences",), None),
    "an externalReference a string": _component_edit(("externalReferences",), ["https://x"]),
    "an externalReference without url": _component_edit(("externalReferences", 0, "url"), _DELETE),
    "hashes a dict": _component_edit(("externalReferences", 0, "hashes"), {"alg": "SHA-256", "content": "a" * 64}),
    "hashes an int": _component_edit(("externalReferences", 0, "hashes"), 5),
    "a hash that is a string": _component_edit(("externalReferences", 0, "hashes"), ["a" * 64]),
    "a hash content an int": _component_edit(("externalReferences", 0, "hashes", 0, "content"), 5),
    "a hash content not hex": _component_edit(("externalReferences", 0, "hashes", 0, "content"), "z" * 64),
    "a name with an escape": _component_edit(("name",), "six\x1b]0;pwned\x07"),
}


@pytest.mark.parametrize("case", sorted(SBOM_EDITS))
def test_a_hostile_baked_sbom_is_one_error(fake, capsys, good_sbom, case) -> None:
    fake(sbom=json.dumps(SBOM_EDITS[case](json.loads(good_sbom))))
    rc, _out, err = _verify(capsys)
    _one_error(rc, err)


@pytest.mark.parametrize("text", ["[1]", "{", DEEP, DEEP_OBJECT, '"CycloneDX"', "null"])
def test_an_sbom_that_is_no_document_is_one_error(fake, capsys, tmp_path, text) -> None:
    fake(sbom=text)
    rc, _out, err = _verify(capsys)
    _one_error(rc, err)
    given_file = tmp_path / "given.cdx.json"
    given_file.write_text(text)
    rc, _out, err = _verify(capsys, "--sbom", str(given_file))
    _one_error(rc, err)


@pytest.mark.parametrize("labels", ["abc", "[1]", '"text"', DEEP, DEEP_OBJECT, '{"a": 1}', '{"a": {"b": "c"}}'])
def test_hostile_labels_are_one_error(fake, capsys, labels) -> None:
    fake(labels=labels)
    rc, _out, err = _verify(capsys)
    _one_error(rc, err)


@pytest.mark.parametrize("diff", ["not json", "[]", DEEP, DEEP_OBJECT, '"x"'])
def test_a_hostile_diff_in_json_mode_is_one_error(fake, capsys, diff) -> None:
    fake(diff=diff)
    rc, out, err = _verify(capsys, "--json")
    assert rc == 1 and "Traceback" not in err, err
    assert json.loads(out)["ok"] is False


def test_what_the_image_prints_reaches_the_terminal_escaped(fake, capsys) -> None:
    fake(diff="drift: \x1b]0;pwned\x07 \x1b[2J\u202eevil\n", labels={})
    monkey_rc = _verify(capsys)
    text = monkey_rc[1] + monkey_rc[2]
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text


def test_the_baked_snapshot_is_untrusted(fake, monkeypatch, tmp_path) -> None:
    from megacpp_env.build import read_baked_snapshot

    for text in ("nope", "[1]", DEEP, DEEP_OBJECT):
        (tmp_path / "snap").write_text(text)
        monkeypatch.setenv("FAKE_SNAPSHOT", str(tmp_path / "snap"))
        with pytest.raises(MegacppEnvError):
            read_baked_snapshot("img:1")


def test_an_image_that_never_answers_is_stopped_and_its_container_removed(fake, monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setenv("FAKE_SLEEP", "60")
    monkeypatch.setenv("MEGACPP_ENV_IMAGE_RUN_TIMEOUT", "1")
    started = time.monotonic()
    rc, _out, err = _verify(capsys)
    assert time.monotonic() - started < 30
    _one_error(rc, err)
    assert "did not finish in 1s" in err
    calls = (tmp_path / "calls.log").read_text().splitlines()
    name = calls[0].split("--name ", 1)[1].split()[0]
    assert f"rm -f {name}" in calls


def test_an_image_that_floods_its_output_is_stopped(fake, monkeypatch, capsys) -> None:
    monkeypatch.setenv("FAKE_FLOOD", "1")
    monkeypatch.setattr(docker, "IMAGE_OUTPUT_LIMIT", 1 << 20, raising=False)
    rc, _out, err = _verify(capsys)
    _one_error(rc, err)
    assert "printed more than 1048576 bytes" in err


# ---- the SBOM check against the CycloneDX schema ----------------------------------------------------

VALIDATOR = JsonStrictValidator(SchemaVersion.V1_6)
NOT_STRING = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), st.just([]), st.just({}),
)  # fmt: skip
NOT_ARRAY_OF_TABLES = st.one_of(NOT_STRING.filter(lambda v: v != []), st.text(max_size=5), st.just(["x"]), st.just([1]))
NOT_TABLE = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5), st.just([]), st.just(["x"]))
NOT_HEX = st.one_of(NOT_STRING, st.text(max_size=70).filter(lambda t: not t.isascii() or not t.isalnum()))
REF, HASH = ("externalReferences", 0), ("externalReferences", 0, "hashes", 0)
# each field the check reads, with values of another kind than the schema's (for an enum such as `type`
# or `alg` the check asks only for a string: any other string is the schema's business, not read here)
FIELDS = {
    ("name",): NOT_STRING, ("version",): NOT_STRING, ("purl",): NOT_STRING, ("bom-ref",): NOT_STRING,
    ("type",): NOT_STRING, ("externalReferences",): NOT_ARRAY_OF_TABLES, ("hashes",): NOT_ARRAY_OF_TABLES,
    REF: NOT_TABLE, (*REF, "url"): NOT_STRING, (*REF, "type"): NOT_STRING,
    (*REF, "hashes"): NOT_ARRAY_OF_TABLES, HASH: NOT_TABLE, (*HASH, "content"): NOT_HEX, (*HASH, "alg"): NOT_STRING,
}  # fmt: skip


@st.composite
def mutations(draw: st.DrawFn) -> tuple[tuple[object, ...], object]:
    field = draw(st.sampled_from(sorted(FIELDS, key=str)))
    return field, draw(FIELDS[field])


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(mutation=mutations())
def test_garbage_the_schema_refuses_is_refused_and_only_that(good_sbom, mutation) -> None:
    """A value of another kind in a field the check reads: ``validate_sbom`` refuses it (a FormatError,
    never another exception) exactly when the CycloneDX schema calls the document invalid."""
    field, value = mutation
    doc = json.loads(good_sbom)
    doc["components"] = doc["components"][:1]  # one component with a reference and a hash: a fast schema run
    doc.pop("dependencies")
    node = doc["components"][0]
    for key in field[:-1]:
        node = node[key]
    node[field[-1]] = copy.deepcopy(value)
    schema_error = VALIDATOR.validate_str(json.dumps(doc))
    try:
        sbom_module.validate_sbom(doc, "given")
    except FormatError:
        assert schema_error is not None, f"{field}={value!r}: the schema takes it, the check refused it"
        return
    assert schema_error is None, f"{field}={value!r}: the schema refuses it, the check let it through"


def test_the_shipped_sboms_pass_the_check(good_sbom) -> None:
    sbom_module.validate_sbom(json.loads(good_sbom), "given")
    assert os.environ.get("MEGACPP_DOCKER", "") != "/bin/false"


# ---- a real hostile image ---------------------------------------------------------------------------

HOSTILE_PYTHON = """#!/bin/sh
printf '%s' '{"dists": [["six", "1.17.0", "", ["a\\u001b[2Jb.py"]], ["x", 5, "", []]], "sbom": "[[[[[["}'
"""
HOSTILE_TOOL = """#!/bin/sh
if [ "$1" = snapshot ]; then exit 0; fi
printf 'drift \\033]0;pwned\\007\\n'
exit 1
"""


@pytest.mark.docker
def test_a_real_hostile_image_is_one_error(tmp_path, capsys) -> None:
    """An image built here whose venv Python and megacpp-env answer with garbage and escapes, and whose
    labels are not strings: verify-image runs it for real and says so in one escaped line."""
    from tests.fixtures.docker import skip_or_fail

    if not docker.daemon_ok():
        skip_or_fail("no Docker daemon (run scripts/docker-up.sh)")
    base = "megacpp-base/debian-forky:amd64"
    if not docker.image_exists(base):
        skip_or_fail(f"no {base} (run scripts/make-base-image.sh amd64)")
    (tmp_path / "python").write_text(HOSTILE_PYTHON)
    (tmp_path / "megacpp-env").write_text(HOSTILE_TOOL)
    (tmp_path / "Dockerfile").write_text(
        f"FROM {base}\nCOPY --chmod=755 python /opt/venv/bin/python\n"
        "COPY --chmod=755 megacpp-env /usr/local/bin/megacpp-env\nLABEL io.megacpp.env.sbom-sha256=[1]\n"
    )
    tag = f"megacpp-test/hostile-{os.getpid()}:1"
    built = subprocess.run([docker.binary(), "build", "-q", "-t", tag, str(tmp_path)], capture_output=True,
                           text=True, env=docker.environ(), check=False)  # fmt: skip
    assert built.returncode == 0, built.stderr
    try:
        rc, out, err = _verify_real(capsys, tag)
        _one_error(rc, err)
        assert "\x1b" not in out
    finally:
        docker.remove_image(tag)


def _verify_real(capsys: pytest.CaptureFixture[str], tag: str) -> tuple[int, str, str]:
    rc = main(["verify-image", tag])
    out, err = capsys.readouterr()
    return rc, out, err


# ---- `sbom TARGET --image IMAGE` and the label step: what the image holds, read from it (issue 29) ------------

GOOD_CONTENTS = {
    "os": "ID=debian\nVERSION_CODENAME=forky\n",
    "debs": [["apt", "3.3.3", "amd64", "installed"]],
    "copyrights": {"apt": None},
    "dists": [["six", "1.17.0", "", "", "MIT", []]],
}
CONTENTS_EDITS = {
    "not JSON": lambda c: "Traceback (most recent call last):\n",
    "deeply nested": lambda c: DEEP,
    "deeply nested object": lambda c: DEEP_OBJECT,
    "a list": lambda c: [c],
    "debs an object": lambda c: {**c, "debs": {"apt": "1"}},
    "a dpkg row of five": lambda c: {**c, "debs": [["apt", "3.3.3", "amd64", "installed", "x"]]},
    "a dpkg name with an escape": lambda c: {**c, "debs": [["apt\x1b]0;x\x07", "3.3.3", "amd64", "installed"]]},
    "a dpkg arch with a slash": lambda c: {**c, "debs": [["apt", "3.3.3", "amd64/../x", "installed"]]},
    "dists a string": lambda c: {**c, "dists": "six"},
    "a dist row of five": lambda c: {**c, "dists": [["six", "1", "", "", "MIT"]]},
    "a dist classifier a number": lambda c: {**c, "dists": [["six", "1", "", "", "MIT", [5]]]},
    "a dist name with an escape": lambda c: {**c, "dists": [["six\x1b[2J", "1", "", "", "MIT", []]]},
    "copyrights a list": lambda c: {**c, "copyrights": ["apt"]},
    "a copyright a number": lambda c: {**c, "copyrights": {"apt": 5}},
    "os a number": lambda c: {**c, "os": 5},
}
BASE_ANSWERS = {
    "a base row of two": "apt\t3.3.3\n",
    "a base name with an escape": "apt\x1b[2J\t3.3.3\tamd64\tinstalled\n",
}


def _fake_contents(fake, monkeypatch, tmp_path, contents: object, base: str = "apt\t3.3.3\tamd64\tinstalled\n") -> None:
    fake(labels={"io.megacpp.env.target": "smoke", "org.opencontainers.image.base.name": "base:1"})
    for name, value in (("FAKE_CONTENTS", contents), ("FAKE_BASE", base)):
        path = tmp_path / name
        path.write_text(value if isinstance(value, str) else json.dumps(value))
        monkeypatch.setenv(name, str(path))


def _sbom_image(capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = main(["sbom", "smoke", "--image", "img:1", "--spec", str(REPO_ROOT / "stack.yaml")])
    out, err = capsys.readouterr()
    return rc, out, err


def test_a_good_contents_answer_passes(fake, monkeypatch, tmp_path, capsys) -> None:
    _fake_contents(fake, monkeypatch, tmp_path, GOOD_CONTENTS)
    rc, out, err = _sbom_image(capsys)
    assert rc == 0, err
    assert VALIDATOR.validate_str(out) is None and "pkg:deb/debian/apt@3.3.3?arch=amd64" in out


@pytest.mark.parametrize("case", sorted(CONTENTS_EDITS) + sorted(BASE_ANSWERS))
def test_a_hostile_contents_answer_is_one_error(fake, monkeypatch, tmp_path, capsys, case) -> None:
    if case in BASE_ANSWERS:
        _fake_contents(fake, monkeypatch, tmp_path, GOOD_CONTENTS, BASE_ANSWERS[case])
    else:
        _fake_contents(fake, monkeypatch, tmp_path, CONTENTS_EDITS[case](GOOD_CONTENTS))
    rc, out, err = _sbom_image(capsys)
    assert rc == 1 and out == "", (out, err)
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.count("\n") == 1 and err.startswith("megacpp-env sbom: error: "), err
    assert err[:-1].isprintable(), err


def test_hostile_texts_in_the_image_become_unknown_not_printed(fake, monkeypatch, tmp_path, capsys) -> None:
    """A copyright file's License synopsis, a distribution's License and an os-release value holding escapes:
    each is left out (the license unknown, saying why), and the SBOM stays valid and free of them."""
    header = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\n"
    contents = {
        "os": 'ID=debian\x1b[2J\nPRETTY_NAME="Debian \u202eforky"\nVERSION_ID=13\x07\n',
        "debs": [["apt", "3.3.3", "amd64", "installed"]],
        "copyrights": {"apt": header + "Files: *\nLicense: GPL-2+\x1b]0;pwned\x07\n"},
        "dists": [["six", "1.17.0", "", "MIT\x1b[2J", "", []]],
    }
    _fake_contents(fake, monkeypatch, tmp_path, contents)
    rc, out, err = _sbom_image(capsys)
    assert rc == 0, err
    assert VALIDATOR.validate_str(out) is None
    for bad in ("\\u001b", "\\u202e", "\\u0007", "pwned"):
        assert bad not in out
    doc = json.loads(out)
    by_name = {c["name"]: c for c in doc["components"]}
    assert "unknown: a License synopsis in /usr/share/doc/apt/copyright" in json.dumps(by_name["apt"]["properties"])
    assert "unknown: its License-Expression is not one printable line" in json.dumps(by_name["six"]["properties"])
    os_comp = next(c for c in doc["components"] if c["bom-ref"] == "os")
    assert os_comp["name"] == "unknown" and "version" not in os_comp
