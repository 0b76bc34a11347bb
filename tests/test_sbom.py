"""`sbom`: the CycloneDX SBOM of a target's image, validated by cyclonedx-python-lib's strict JSON
validator (the CycloneDX 1.6 schema), and complete against the committed locks and the spec."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from megacpp_env import layout
from megacpp_env.cli import main
from megacpp_env.lock.pylock import read_pylock
from megacpp_env.sbom import (
    IMAGE_SBOM,
    SBOM_LABEL,
    check_image,
    image_sbom,
    installed_names,
    overlay_digest,
    render_sbom,
    with_base,
)
from megacpp_env.spec import load_spec
from tests.fixtures.spec import REPO_ROOT

VALIDATOR = JsonStrictValidator(SchemaVersion.V1_6)
CASES = [("smoke", "linux/amd64"), ("smoke", "linux/arm64"), ("cuda_smoke", "linux/amd64")]


@pytest.fixture(scope="module")
def spec():
    return load_spec(REPO_ROOT / "stack.yaml")


@pytest.mark.parametrize(("name", "platform"), CASES)
def test_the_sbom_is_valid_cyclonedx(spec, name, platform):
    text = render_sbom(image_sbom(spec, spec.targets[name], platform))
    assert VALIDATOR.validate_str(text) is None
    assert render_sbom(image_sbom(spec, spec.targets[name], platform)) == text  # deterministic


def test_the_validator_is_real(spec):
    doc = image_sbom(spec, spec.targets["smoke"], "linux/amd64")
    doc["components"][0]["externalReferences"][0]["hashes"][0]["content"] = "not-a-sha256"
    assert VALIDATOR.validate_str(json.dumps(doc)) is not None


@pytest.mark.parametrize(("name", "platform"), CASES)
def test_every_locked_file_every_source_and_the_base_are_listed(spec, name, platform):
    target = spec.targets[name]
    doc = image_sbom(spec, target, platform)
    by_ref = {c["bom-ref"]: c for c in doc["components"]}
    locks = [(layout.lock_path(spec.root, name, platform), "")]
    locks += [(layout.toolchain_lock_path(spec.root, name, "cuda", platform), "cuda")]
    for path, part in locks:
        if not path.is_file():
            continue
        for pkg in read_pylock(path).packages:
            ref = f"pkg:pypi/{pkg.name}@{pkg.version}" + (f"?lock={part}" if part else "")
            hashes = {h["content"] for e in by_ref[ref]["externalReferences"] for h in e["hashes"]}
            assert hashes == {a.sha256 for a in pkg.artifacts}, ref
    for src in target.sources:
        comp = by_ref[f"source:{src.name}"]
        props = {p["name"]: p["value"] for p in comp["properties"]}
        assert comp["version"] == props["megacpp-env:commit"] == src.commit
        assert comp["externalReferences"][0]["url"] == src.repo
        if src.overlay:
            assert props["megacpp-env:overlay-sha256"] == overlay_digest(layout.overlay_dir(spec.root, src.overlay))
    base = target.base_images[platform]
    assert by_ref["base-image"]["name"] == base.name
    if base.digest:
        assert by_ref["base-image"]["hashes"] == [{"alg": "SHA-256", "content": base.digest.removeprefix("sha256:")}]
    assert doc["dependencies"] == [{"ref": "image", "dependsOn": list(by_ref)}]


def test_an_overlay_edit_changes_the_sbom(tmp_path):
    for name in ("stack.yaml", "locks", "overlays", "facts", "images"):
        src = REPO_ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, tmp_path / name)
    spec = load_spec(tmp_path / "stack.yaml")
    before = image_sbom(spec, spec.targets["smoke"], "linux/amd64")
    overlay = next(s.overlay for s in spec.targets["smoke"].sources if s.overlay)
    readme = layout.overlay_dir(tmp_path, overlay) / "files" / "EXTRA.txt"
    readme.write_text("an extra file\n")
    after = image_sbom(spec, spec.targets["smoke"], "linux/amd64")
    assert before["serialNumber"] != after["serialNumber"]


def test_installed_names_are_the_locked_distributions(spec):
    doc = image_sbom(spec, spec.targets["smoke"], "linux/amd64")
    locked = read_pylock(layout.lock_path(spec.root, "smoke", "linux/amd64")).packages
    assert installed_names(doc) == {(p.name, p.version) for p in locked}


def test_the_verb_writes_the_file_and_refuses_an_unlocked_target(tmp_path, capsys):
    out = tmp_path / "smoke.cdx.json"
    assert main(["sbom", "smoke", "--output", str(out), "--spec", str(REPO_ROOT / "stack.yaml")]) == 0
    assert VALIDATOR.validate_str(out.read_text()) is None
    assert main(["sbom", "gb10", "--spec", str(REPO_ROOT / "stack.yaml")]) == 1
    assert "gb10 linux/arm64: no lock (locks/pylock.gb10-linux-arm64.toml)" in capsys.readouterr().err


def test_unlisted_names_what_the_sbom_does_not_list(spec):
    from megacpp_env.sbom import unlisted

    doc = image_sbom(spec, spec.targets["smoke"], "linux/amd64")
    locked = sorted(installed_names(doc))
    image = [*locked, ("megacpp-env", "0.1.0"), ("megacpp-smoke-ext", "0.1.0"), ("pip", "26.2.2")]
    assert unlisted(doc, image) == []  # the locks, the built source, the tool and the venv's pip
    name, version = locked[0]
    extra = [("intruder", "1.0"), (name, version + ".post1")]  # a locked name at another version is not it
    assert unlisted(doc, [*image, *extra]) == sorted(f"{n} {v}" for n, v in extra)


def test_verify_image_refuses_a_missing_sbom(capsys, monkeypatch):
    from megacpp_env import build
    from megacpp_env.build import VerifyReport

    monkeypatch.setattr(build, "verify_image", lambda *a, **k: VerifyReport(ok=True, output="", stderr=""))
    assert main(["verify-image", "img:1", "--sbom", "/nonexistent/smoke.cdx.json"]) == 1
    assert "--sbom /nonexistent/smoke.cdx.json: no such file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("ref", "image_id", "version", "props"),
    [
        ("megacpp-base/debian-forky:amd64", "sha256:" + "a" * 64, "sha256:" + "a" * 64, 2),  # local: the image id
        ("reg:5000/x/y:1@sha256:" + "b" * 64, "sha256:" + "c" * 64, "sha256:" + "b" * 64, 2),  # pinned: the digest
        ("reg:5000/x/y:1", "", "1", 1),  # not in the local store: the tag, no hash
    ],
)
def test_with_base_records_the_base_the_build_used(spec, ref, image_id, version, props):
    doc = with_base(image_sbom(spec, spec.targets["smoke"], "linux/amd64"), ref, image_id)
    assert VALIDATOR.validate_str(render_sbom(doc)) is None
    base = next(c for c in doc["components"] if c["bom-ref"] == "base-image")
    assert base["name"] == ref.partition("@")[0].rsplit(":", 1)[0] and base["version"] == version
    assert len(base["properties"]) == props and base.get("hashes", [{}])[0].get("content") == (
        version.removeprefix("sha256:") if version.startswith("sha256:") else None
    )
    assert doc["serialNumber"] != image_sbom(spec, spec.targets["smoke"], "linux/amd64")["serialNumber"]


def _fake_image(monkeypatch, stdout, labels=None):
    from megacpp_env import docker

    monkeypatch.setattr(
        docker, "run_in_image", lambda image, argv, **kw: subprocess.CompletedProcess(argv, 0, stdout, "")
    )
    monkeypatch.setattr(docker, "image_labels", lambda image: dict(labels or {}))


def test_check_image_names_each_disagreement(spec, monkeypatch):
    text = render_sbom(image_sbom(spec, spec.targets["smoke"], "linux/amd64"))
    six = next(c for c in json.loads(text)["components"] if c["name"] == "six")
    dists = [
        ["six", six["version"], "f" * 64, []],  # from an archive the SBOM does not list
        ["idna", "3.20", "", ["idna/core.py", "idna/a.py", "idna/b.py", "idna/c.py"]],  # edited after install
        ["intruder", "1.0", "", []],
        ["pip", "26.2.2", "", ["pip/x.py"]],  # not locked: no RECORD check against the SBOM
    ]
    _fake_image(monkeypatch, json.dumps({"dists": dists, "sbom": text}), {SBOM_LABEL: "0" * 64})
    found = check_image("img:1")
    assert found.problems == (
        f"the baked SBOM {IMAGE_SBOM} has sha256 {hashlib.sha256(text.encode()).hexdigest()}, its label "
        f"{SBOM_LABEL} says {'0' * 64}",
        f"intruder 1.0 is installed but not in the SBOM {IMAGE_SBOM}",
        f"six {six['version']} was installed from an archive with sha256 {'f' * 64}, not one the SBOM {IMAGE_SBOM} lists",
        "idna 3.20: idna/core.py, idna/a.py, idna/b.py and 1 more differ from its RECORD",
    )
    assert found.to_dict()["checked"] == 4 and not found.ok


@pytest.mark.parametrize(
    ("stdout", "labels", "message"),
    [
        ('{"dists": [], "sbom": null}', {"io.megacpp.env.content-sha256": "x"},
         f"img:1: no SBOM baked at {IMAGE_SBOM} (built by megacpp-env): rebuild it with `megacpp-env build TARGET`"),
        ('{"dists": [], "sbom": null}', {}, "(not built by megacpp-env (no io.megacpp.env.content-sha256 label))"),
        ('{"dists": [], "sbom": "[1]"}', {}, f"img:1:{IMAGE_SBOM}: not a CycloneDX SBOM (bomFormat, components)"),
        ('{"dists": [], "sbom": "{"}', {}, f"img:1:{IMAGE_SBOM}: not JSON"),
        ('{"dists": [["a"]], "sbom": null}', {}, "listing the distributions in img:1: unexpected output"),
        ("Traceback", {}, "listing the distributions in img:1: unreadable output"),
        ("[]", {}, "listing the distributions in img:1: unexpected output"),
    ],
)  # fmt: skip
def test_check_image_refuses_a_missing_or_hostile_sbom(monkeypatch, stdout, labels, message):
    from megacpp_env.errors import MegacppEnvError

    _fake_image(monkeypatch, stdout, labels)
    with pytest.raises(MegacppEnvError) as exc:
        check_image("img:1")
    assert message in str(exc.value)


def test_the_label_step_bakes_the_sbom_from_a_one_file_context(monkeypatch, tmp_path):
    from megacpp_env import build, docker

    seen = {}

    def stream(argv, *, on_line=None, stdin=""):
        context = Path(argv[-1])
        seen.update(argv=argv, stdin=stdin, files={p.name: p.read_text() for p in context.iterdir()})
        return 0, docker.BuildLog()

    monkeypatch.setattr(build, "read_baked_snapshot", lambda tag, platform: {"digest": "d" * 64})
    monkeypatch.setattr(docker, "stream", stream)
    monkeypatch.setattr(docker, "binary", lambda: "docker")
    plan = build.plan_build(load_spec(REPO_ROOT / "stack.yaml"), build.BuildOptions(target="smoke"))
    text = render_sbom(plan.sbom)
    assert build._label_snapshot(plan, text, None)[0] == "d" * 64
    assert seen["stdin"] == f"FROM {plan.tag}\nCOPY sbom.cdx.json {IMAGE_SBOM}\n"
    assert seen["files"]["sbom.cdx.json"] == text  # (and owned_tempdir's empty .owner marker)
    sha = hashlib.sha256(text.encode()).hexdigest()
    assert seen["argv"][-3:-1] == ["-f", "-"] and f"{SBOM_LABEL}={sha}" in seen["argv"]


def test_the_record_and_the_sbom_are_written_side_by_side(tmp_path):
    from megacpp_env import build

    plan = build.plan_build(load_spec(REPO_ROOT / "stack.yaml"), build.BuildOptions(target="smoke"))
    result = build.BuildResult(plan=replace(plan, root=tmp_path), image_id="sha256:1", snapshot_digest="s", seconds=1.0)
    build.write_record(result, "{}\n")
    record, sbom = build.record_paths(tmp_path, "smoke", "linux/amd64")
    assert (record.name, sbom.name) == ("smoke.linux-amd64.json", "smoke.linux-amd64.sbom.cdx.json")
    assert sbom.read_text() == "{}\n" and record.parent == tmp_path / ".megacpp" / "builds"
    doc = json.loads(record.read_text())
    assert doc["sbom"] == sbom.name and doc["sbom_sha256"] == hashlib.sha256(b"{}\n").hexdigest()
    assert not [p for p in record.parent.iterdir() if p not in (record, sbom)]  # no temp file left


def test_built_sbom_keeps_the_pinned_digest_when_the_base_is_not_local(spec, monkeypatch):
    from megacpp_env import docker
    from megacpp_env.errors import ToolError
    from megacpp_env.sbom import built_sbom

    def missing(ref):
        raise ToolError(f"no such image: {ref}")

    monkeypatch.setattr(docker, "image_id", missing)
    pinned = "reg:5000/x/y:1@sha256:" + "b" * 64
    doc = json.loads(built_sbom(image_sbom(spec, spec.targets["smoke"], "linux/amd64"), pinned))
    base = next(c for c in doc["components"] if c["bom-ref"] == "base-image")
    assert base["version"] == "sha256:" + "b" * 64 and base["properties"] == [
        {"name": "megacpp-env:ref", "value": pinned}
    ]
