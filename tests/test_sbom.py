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
    from megacpp_env.build import VerifyReport, imagecheck

    monkeypatch.setattr(imagecheck, "verify_image", lambda *a, **k: VerifyReport(ok=True, output="", stderr=""))
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
        ('{"dists": [], "sbom": "[1]"}', {}, f"img:1:{IMAGE_SBOM}: expected a JSON object"),
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
    from megacpp_env.build import run as build_run

    seen = {}

    def stream(argv, *, on_line=None, stdin=""):
        context = Path(argv[-1])
        seen.update(argv=argv, stdin=stdin, files={p.name: p.read_text() for p in context.iterdir()})
        return 0, docker.BuildLog()

    monkeypatch.setattr(build_run, "read_baked_snapshot", lambda tag, platform: {"digest": "d" * 64})
    monkeypatch.setattr(docker, "stream", stream)
    monkeypatch.setattr(docker, "binary", lambda: "docker")
    plan = build.plan_build(load_spec(REPO_ROOT / "stack.yaml"), build.BuildOptions(target="smoke"))
    text = render_sbom(plan.sbom)
    assert build_run._label_snapshot(plan, text, None)[0] == "d" * 64
    assert seen["stdin"] == f"FROM {plan.tag}\nCOPY sbom.cdx.json {IMAGE_SBOM}\n"
    assert seen["files"]["sbom.cdx.json"] == text  # (and owned_tempdir's empty .owner marker)
    sha = hashlib.sha256(text.encode()).hexdigest()
    assert seen["argv"][-3:-1] == ["-f", "-"] and f"{SBOM_LABEL}={sha}" in seen["argv"]


def test_the_record_and_the_sbom_are_written_side_by_side(tmp_path):
    from megacpp_env import build

    plan = build.plan_build(load_spec(REPO_ROOT / "stack.yaml"), build.BuildOptions(target="smoke"))
    result = build.BuildResult(plan=replace(plan, spec=replace(plan.spec, path=tmp_path / "stack.yaml")), image_id="sha256:1", snapshot_digest="s", seconds=1.0)
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


# ---- the whole image: OS packages, licenses, purls of sources and fetches (issue 29) ------------------------

def _contents():
    """What a built image holds, as ``sbom.contents.read_contents`` returns it (imported here: the module is
    issue 29's, so that each test of it fails on its own on the code before it)."""
    from megacpp_env.sbom.contents import DebPackage, DistLicenses, ImageContents
    from megacpp_env.sbom.licenses import Licenses

    return ImageContents(
        os_id="debian", os_version="forky", os_name="Debian GNU/Linux forky/sid",
        packages=(
            DebPackage(name="apt", version="3.3.3", arch="amd64", layer="base",
                       licenses=Licenses(names=("GPL-2+", "GPL-2+ and curl"))),
            DebPackage(name="libstdc++6", version="1:15.2.0-4+b1", arch="amd64", layer="apt",
                       licenses=Licenses(unknown="/usr/share/doc/libstdc++6/copyright is not machine-readable")),
            DebPackage(name="libc6", version="2.41-1", arch="i386", layer="apt", status="half-configured",
                       licenses=Licenses(names=("LGPL-2.1+",))),
        ),
        dists=(
            DistLicenses(name="six", version="1.17.0", part="", licenses=Licenses(expression="MIT")),
            DistLicenses(name="megacpp-smoke-ext", version="0.1.0", part="", licenses=Licenses(expression="Apache-2.0")),
            DistLicenses(name="pip", version="26.2.2", part="", licenses=Licenses(names=("MIT License",))),
        ),
    )  # fmt: skip


def test_with_contents_lists_the_debian_packages_with_purls_licenses_and_layers(spec):
    from megacpp_env.sbom import with_contents

    doc = with_contents(image_sbom(spec, spec.targets["smoke"], "linux/amd64"), _contents())
    assert VALIDATOR.validate_str(render_sbom(doc)) is None
    by_ref = {c["bom-ref"]: c for c in doc["components"]}
    apt = by_ref["pkg:deb/debian/apt@3.3.3?arch=amd64"]
    assert apt["purl"] == apt["bom-ref"] and (apt["name"], apt["version"]) == ("apt", "3.3.3")
    assert apt["licenses"] == [{"license": {"name": n, "acknowledgement": "declared"}} for n in ("GPL-2+", "GPL-2+ and curl")]
    assert apt["properties"] == [{"name": "megacpp-env:layer", "value": "base"}]
    libstd = by_ref["pkg:deb/debian/libstdc%2B%2B6@1:15.2.0-4%2Bb1?arch=amd64"]
    assert "licenses" not in libstd and {"name": "megacpp-env:license", "value": "unknown: /usr/share/doc/libstdc++6/"
                                         "copyright is not machine-readable"} in libstd["properties"]  # fmt: skip
    libc = by_ref["pkg:deb/debian/libc6@2.41-1?arch=i386"]
    assert {"name": "megacpp-env:dpkg-status", "value": "half-configured"} in libc["properties"]
    assert by_ref["os"] == {
        "type": "operating-system", "bom-ref": "os", "name": "debian", "version": "forky",
        "properties": [{"name": "megacpp-env:package-manager", "value": "dpkg"},
                       {"name": "megacpp-env:pretty-name", "value": "Debian GNU/Linux forky/sid"}],
    }  # fmt: skip
    six = next(c for c in doc["components"] if c["name"] == "six")
    assert six["licenses"] == [{"expression": "MIT", "acknowledgement": "declared"}]
    assert by_ref["source:megacpp_smoke_ext"]["licenses"] == [{"expression": "Apache-2.0", "acknowledgement": "declared"}]
    assert by_ref["venv:pip"]["licenses"] == [{"license": {"name": "MIT License", "acknowledgement": "declared"}}]
    path_source = {k: v for k, v in by_ref["source:megacpp_smoke_ext"].items() if k != "licenses"}
    path_source["properties"] = [p for p in path_source["properties"] if p["name"] != "megacpp-env:install"]
    path_source["properties"].append({"name": "megacpp-env:install", "value": "path"})
    from megacpp_env.sbom import document

    assert document._licensed(path_source, {})["properties"][-1] == {
        "name": "megacpp-env:license",
        "value": "unknown: a checkout on sys.path (install: path): no distribution metadata declares it",
    }
    idna = next(c for c in doc["components"] if c["name"] == "idna")  # locked, not in these contents
    assert idna["properties"][-1] == {
        "name": "megacpp-env:license", "value": "unknown: not found among the distributions installed in the image"
    }
    deps = {d["ref"]: d["dependsOn"] for d in doc["dependencies"]}
    assert deps["image"] == list(by_ref)
    assert deps["os"] == [p for p in by_ref if p.startswith("pkg:deb/")]
    assert deps["base-image"] == ["pkg:deb/debian/apt@3.3.3?arch=amd64"]
    assert with_contents(doc, _contents()) == doc  # completing a completed SBOM again changes nothing
    assert with_contents(doc, replace(_contents(), packages=()))["serialNumber"] != doc["serialNumber"]  # sealed anew


def test_fetches_are_listed_with_their_purls_in_a_valid_sbom(tmp_path):
    """cloud's vLLM fetches nine pinned sources at build time: each is a component of its own (purl, the
    source and variable that fetch it), and vLLM depends on them. (cloud has no lock here: a copy of the
    repository with smoke's lock in its place, so that the SBOM can be made at all.)"""
    for name in ("stack.yaml", "locks", "overlays", "facts", "images"):
        src = REPO_ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, tmp_path / name)
    shutil.copy2(layout.lock_path(tmp_path, "smoke", "linux/amd64"), layout.lock_path(tmp_path, "cloud", "linux/amd64"))
    spec = load_spec(tmp_path / "stack.yaml")
    vllm = spec.sources["vllm"]
    doc = image_sbom(spec, spec.targets["cloud"], "linux/amd64")
    assert VALIDATOR.validate_str(render_sbom(doc)) is None
    by_ref = {c["bom-ref"]: c for c in doc["components"]}
    assert len(vllm.fetches) == 9
    for variable, name in vllm.fetches.items():
        fetched = by_ref[f"fetch:{name}"]
        src = spec.sources[name]
        owner, repo = src.repo.removeprefix("https://github.com/").removesuffix(".git").split("/")
        assert fetched["purl"] == f"pkg:github/{owner.lower()}/{repo.lower()}@{src.commit}"
        assert {"name": "megacpp-env:fetched-by", "value": f"vllm ({variable})"} in fetched["properties"]
    deps = {d["ref"]: d["dependsOn"] for d in doc["dependencies"]}
    assert deps["source:vllm"] == sorted(f"fetch:{n}" for n in vllm.fetches.values())
    assert by_ref["source:vllm"]["purl"] == f"pkg:github/vllm-project/vllm@{vllm.commit}"


def _fake_docker(monkeypatch, *, contents, base_rows="", labels=None, base_local=True):
    """``run_in_image`` answering the contents script (entrypoint the venv's Python) and dpkg-query in the base."""
    from megacpp_env import docker

    calls = []

    def run_in_image(image, argv, **kw):
        calls.append((image, kw.get("entrypoint", ""), list(argv)))
        out = base_rows if kw.get("entrypoint") == "dpkg-query" else json.dumps(contents)
        return subprocess.CompletedProcess(argv, 0, out, "")

    monkeypatch.setattr(docker, "run_in_image", run_in_image)
    monkeypatch.setattr(docker, "image_exists", lambda ref: base_local)
    monkeypatch.setattr(docker, "image_id", lambda ref: "sha256:" + "e" * 64)
    monkeypatch.setattr(docker, "image_labels", lambda ref: dict(labels or {}))
    return calls


ANSWER = {
    "os": 'PRETTY_NAME="Debian GNU/Linux forky/sid"\nNAME="Debian GNU/Linux"\nVERSION_CODENAME=forky\nID=debian\n',
    "debs": [["apt", "3.3.3", "amd64", "installed"], ["gcc-15", "15.2.0-4", "amd64", "installed"],
             ["oldpkg", "1.0", "amd64", "config-files"]],
    "copyrights": {"apt": (REPO_ROOT / "tests" / "data" / "copyright" / "apt").read_text(), "gcc-15": None},
    "dists": [["six", "1.17.0", "", "", "MIT", ["License :: OSI Approved :: MIT License"]]],
}  # fmt: skip


def test_sbom_verb_with_image_reads_the_image(monkeypatch, tmp_path, capsys):
    labels = {"io.megacpp.env.target": "smoke", "org.opencontainers.image.base.name": "base:1"}
    calls = _fake_docker(monkeypatch, contents=ANSWER, base_rows="apt\t3.3.3\tamd64\tinstalled\n", labels=labels)
    out = tmp_path / "smoke.cdx.json"
    argv = ["sbom", "smoke", "--image", "img:1", "--output", str(out), "--spec", str(REPO_ROOT / "stack.yaml")]
    assert main(argv) == 0, capsys.readouterr().err
    assert VALIDATOR.validate_str(out.read_text()) is None
    doc = json.loads(out.read_text())
    debs = {c["name"]: c for c in doc["components"] if c.get("purl", "").startswith("pkg:deb/")}
    assert sorted(debs) == ["apt", "gcc-15"]  # a package in config-files state has no files: not listed
    assert debs["apt"]["properties"] == [{"name": "megacpp-env:layer", "value": "base"}]
    assert debs["gcc-15"]["properties"] == [{"name": "megacpp-env:layer", "value": "apt"},
                                            {"name": "megacpp-env:license", "value": "unknown: no /usr/share/doc/gcc-15/copyright"}]  # fmt: skip
    assert [c[:2] for c in calls] == [("img:1", "/opt/venv/bin/python"), ("base:1", "dpkg-query")]
    base = next(c for c in doc["components"] if c["bom-ref"] == "base-image")
    assert base["name"] == "base" and base["version"] == "sha256:" + "e" * 64


def test_sbom_verb_refuses_an_image_of_another_target(monkeypatch, capsys):
    _fake_docker(monkeypatch, contents=ANSWER, labels={"io.megacpp.env.target": "cuda_smoke\x1b[2J"})
    assert main(["sbom", "smoke", "--image", "img:1", "--spec", str(REPO_ROOT / "stack.yaml")]) == 1
    err = capsys.readouterr().err
    assert "--image img:1: not an image of smoke (cuda_smoke\\x1b[2J): build it with: megacpp-env build smoke" in err


def test_a_base_image_not_in_the_local_store_leaves_the_layers_unsplit(monkeypatch, spec):
    from megacpp_env.sbom import built_sbom

    calls = _fake_docker(monkeypatch, contents=ANSWER, base_local=False)
    doc = json.loads(built_sbom(image_sbom(spec, spec.targets["smoke"], "linux/amd64"), "base:1", image="img:1"))
    os_comp = next(c for c in doc["components"] if c["bom-ref"] == "os")
    assert {"name": "megacpp-env:layers", "value": "not split by layer: the base image base:1 is not in the local store"} in os_comp["properties"]
    assert all("megacpp-env:layer" not in str(c.get("properties")) for c in doc["components"] if "deb" in c.get("purl", ""))
    assert [c[0] for c in calls] == ["img:1"]
    assert not any(d["ref"] == "base-image" for d in doc["dependencies"])


def test_the_contents_script_reads_this_machine(monkeypatch):
    """The in-image script run for real, on this Debian machine (its dpkg and this venv's Python): the rows
    dpkg-query gives, each package's licenses from its own copyright file, every distribution's licenses."""
    import sys

    from megacpp_env import docker

    if shutil.which("dpkg-query") is None:
        pytest.skip("no dpkg-query on this machine")

    def run_in_image(image, argv, **kw):
        exe = sys.executable if kw["entrypoint"].endswith("python") else kw["entrypoint"]
        return subprocess.run([exe, *argv], capture_output=True, text=True, check=False)

    monkeypatch.setattr(docker, "run_in_image", run_in_image)
    monkeypatch.setattr(docker, "image_exists", lambda ref: True)
    from megacpp_env.sbom import contents as contents_module

    found = contents_module.read_contents("host", base="host")
    listing = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Version} ${Architecture} ${db:Status-Status}\n"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
    rows = {tuple(line.split()[:3]) for line in listing.splitlines() if line.split()[3] not in contents_module.GONE}
    assert {(p.name, p.version, p.arch) for p in found.packages} == rows
    assert {p.layer for p in found.packages} == {"base"}  # the "base" is this machine too
    dpkg = next(p for p in found.packages if p.name == "dpkg")
    assert "GPL-2+" in dpkg.licenses.names  # dpkg's copyright file is machine-readable
    assert found.os_id and found.dpkg
    pytest_dist = next(d for d in found.dists if d.name == "pytest")
    assert pytest_dist.licenses.expression == "MIT" or pytest_dist.licenses.names


def test_the_label_step_reads_the_image_unless_a_remote_builder_built_it(monkeypatch):
    from megacpp_env import build
    from megacpp_env.build import run as build_run

    seen = []
    monkeypatch.setattr(build_run, "built_sbom", lambda sbom, base, **kw: seen.append((base, kw)) or "{}")
    plan = build.plan_build(load_spec(REPO_ROOT / "stack.yaml"), build.BuildOptions(target="smoke"))
    assert build_run._built_sbom(plan) == "{}"
    base, kw = seen[-1]
    assert base == "megacpp-base/debian-forky:amd64" and kw == {"image": plan.tag, "platform": "linux/amd64", "prefixes": {}}
    buildx = replace(plan, request=replace(plan.request, builder="remote", push=True))
    assert buildx.request.needs_buildx
    build_run._built_sbom(buildx)
    assert seen[-1][1]["image"] == ""


# ---- verify-image: the OS packages against the SBOM -------------------------------------------------------


def _with_os(spec, packages):
    from megacpp_env.sbom import with_contents

    return with_contents(image_sbom(spec, spec.targets["smoke"], "linux/amd64"), replace(_contents(), packages=packages))


def test_os_problems_name_each_package_added_removed_or_changed(spec):
    from megacpp_env.sbom import os_problems
    from megacpp_env.sbom.contents import DebPackage

    listed = tuple(DebPackage(name=n, version=v, arch=a) for n, v, a in
                   [("apt", "3.3.3", "amd64"), ("bash", "5.3-4", "amd64"), ("libc6", "2.41-1", "amd64"),
                    ("libc6", "2.41-1", "i386"), ("libstdc++6", "1:15.2.0-4+b1", "amd64")])  # fmt: skip
    sbom = _with_os(spec, listed)
    same = [(p.name, p.version, p.arch, "installed") for p in listed]
    assert os_problems(sbom, same, "S") == []
    image = [*same[:1], ("libc6", "2.41-2", "amd64", "installed"), *same[3:], ("curl", "8.5.0", "amd64", "installed")]
    assert os_problems(sbom, image, "S") == [
        "Debian package bash 5.3-4 (amd64) is in the SBOM S but not installed",
        "Debian package curl 8.5.0 (amd64) is installed but not in the SBOM S",
        "Debian package libc6 (amd64) is 2.41-2 in the image, 2.41-1 in the SBOM S",
    ]
    assert os_problems(sbom, None, "S") == [  # an image without dpkg: everything listed is missing
        f"Debian package {p.name} {p.version} ({p.arch}) is in the SBOM S but not installed" for p in listed
    ]


def test_an_sbom_made_without_the_image_checks_no_os_package(spec):
    from megacpp_env.sbom import os_problems

    plain = image_sbom(spec, spec.targets["smoke"], "linux/amd64")
    assert os_problems(plain, [("apt", "3.3.3", "amd64", "installed")], "S") == [
        "the SBOM S lists no OS packages (it was made without the image): the image's 1 Debian packages are "
        "unchecked (make one that lists them: megacpp-env sbom TARGET --image IMAGE --output FILE)"
    ]
    assert os_problems(plain, None, "S") == [] and os_problems(plain, [], "S") == []


@pytest.mark.parametrize("purl", ["pkg:deb/debian/apt", "pkg:deb/debian/apt@3.3.3?arch=", "pkg:deb/a/b/c@1?arch=x",
                                  "pkg:deb/debian/a%0Ab@1?arch=amd64"])  # fmt: skip
def test_a_malformed_debian_purl_in_the_sbom_is_a_format_error(spec, purl):
    from megacpp_env.errors import FormatError
    from megacpp_env.sbom import os_problems

    sbom = _with_os(spec, _contents().packages)
    index = next(i for i, c in enumerate(sbom["components"]) if c.get("purl", "").startswith("pkg:deb/"))
    sbom["components"][index]["purl"] = purl
    with pytest.raises(FormatError, match=rf"S: components\[{index}\]\.purl: not a Debian package URL"):
        os_problems(sbom, [], "S")


def test_check_image_compares_the_debian_packages(spec, monkeypatch):
    from megacpp_env.sbom.contents import DebPackage

    packages = (DebPackage(name="apt", version="3.3.3", arch="amd64"),)
    text = render_sbom(_with_os(spec, packages))
    debs = [["apt", "3.3.4", "amd64", "installed"], ["gone", "1", "amd64", "config-files"]]
    _fake_image(monkeypatch, json.dumps({"dists": [], "sbom": text, "debs": debs}),
                {SBOM_LABEL: hashlib.sha256(text.encode()).hexdigest()})  # fmt: skip
    found = check_image("img:1")
    assert found.problems == (f"Debian package apt (amd64) is 3.3.4 in the image, 3.3.3 in the SBOM {IMAGE_SBOM}",)
    assert found.to_dict()["os_checked"] == 1
