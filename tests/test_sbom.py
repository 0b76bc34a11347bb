"""`sbom`: the CycloneDX SBOM of a target's image, validated by cyclonedx-python-lib's strict JSON
validator (the CycloneDX 1.6 schema), and complete against the committed locks and the spec."""

from __future__ import annotations

import json
import shutil

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from megacpp_env import layout
from megacpp_env.cli import main
from megacpp_env.lock.pylock import read_pylock
from megacpp_env.sbom import image_sbom, installed_names, overlay_digest, render_sbom
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
