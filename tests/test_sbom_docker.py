"""The SBOM on the real smoke image: `build` bakes it (with its sha256 as a label) and writes it beside the
build record, with every Debian package of the image (purl, licenses, the layer it came from) and the licenses
of every distribution; `sbom smoke --image TAG` makes the same bytes; `verify-image` checks the baked one by
default (or `--sbom FILE`); a wheel added inside the image, a locked distribution replaced from another
archive, an installed file edited, a Debian package added, removed or changed, a baked SBOM edited or removed:
each fails, named."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import textwrap

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from megacpp_env import build, docker
from megacpp_env.cli import main
from megacpp_env.commands import verify_image as verify_cmd
from megacpp_env.sbom import IMAGE_SBOM, SBOM_LABEL, check_image, target_sbom
from megacpp_env.spec import load_spec
from tests.fixtures.docker import REPO_ROOT, build_smoke

pytestmark = pytest.mark.docker
SITE = "/opt/venv/lib/python3.13/site-packages"

# Run inside the image: write a real wheel (METADATA, WHEEL, RECORD with hashes) for pip to install.
MAKE_WHEEL = textwrap.dedent("""
    import base64, hashlib, sys, zipfile
    name, version = sys.argv[1], sys.argv[2]
    files = {
        f"{name}/__init__.py": b"X = 1\\n",
        f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n".encode(),
        f"{name}-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    record = []
    with zipfile.ZipFile(f"/tmp/{name}-{version}-py3-none-any.whl", "w") as whl:
        for path, data in files.items():
            whl.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        whl.writestr(f"{name}-{version}.dist-info/RECORD", "\\n".join([*record, f"{name}-{version}.dist-info/RECORD,,"]) + "\\n")
""")


def _install_wheel(name: str, version: str) -> str:
    script = base64.b64encode(MAKE_WHEEL.encode()).decode()
    return (
        f"RUN echo {script} | base64 -d | /opt/venv/bin/python - {name} {version} && /opt/venv/bin/pip install "
        f"--no-index --no-deps --force-reinstall /tmp/{name}-{version}-py3-none-any.whl"
    )


@pytest.fixture
def derived(smoke_image):
    """Make ``megacpp-test/smoke-<what>`` from the smoke image plus Dockerfile lines; removed afterwards."""
    made = []

    def make(what: str, *lines: str) -> str:
        tag = f"megacpp-test/smoke-{what}:{smoke_image.plan.tag.rsplit(':', 1)[1]}"
        dockerfile = "".join(f"{line}\n" for line in (f"FROM {smoke_image.plan.tag}", *lines))
        argv = docker.stdin_build_argv(tag, "linux/amd64", docker=docker.binary())
        rc, log = docker.stream([*argv[:2], "--network", "none", *argv[2:]], stdin=dockerfile)
        assert rc == 0, "\n".join(log.last_lines)
        made.append(tag)
        return tag

    yield make
    for tag in made:
        docker.remove_image(tag)


def _verify(image: str, sbom: str = "", *, as_json: bool = False) -> int:
    return verify_cmd.run(argparse.Namespace(image=image, platform="", json=as_json, sbom=sbom))


def test_build_bakes_the_sbom_and_writes_it_beside_the_record(smoke_image):
    # The record is the last build's of smoke on this platform, and other docker tests build smoke too
    # (pushed under other tags): build it again here (all cached) so the record is this build's.
    again = build_smoke("linux/amd64")
    spec = load_spec(REPO_ROOT / "stack.yaml")
    tag, base = again.plan.tag, str(spec.target("smoke").base_image("linux/amd64"))
    assert tag == smoke_image.plan.tag  # the same inputs: the same tag
    record_path, sbom_path = build.record_paths(REPO_ROOT, "smoke", "linux/amd64")
    text = sbom_path.read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    # `megacpp-env sbom smoke --image TAG`: the base image the build really used (its local image id) and what
    # the image holds, read again from the image: the same bytes
    assert text == target_sbom(spec, "smoke", "linux/amd64", None, image=tag)
    by_ref = {c["bom-ref"]: c for c in json.loads(text)["components"]}
    assert by_ref["base-image"]["version"] == docker.image_id(base)
    record = json.loads(record_path.read_text())
    assert record["tag"] == tag and record["sbom"] == sbom_path.name
    assert record["sbom_sha256"] == hashlib.sha256(text.encode()).hexdigest() == docker.image_labels(tag)[SBOM_LABEL]
    baked = docker.run_in_image(tag, ["cat", IMAGE_SBOM])
    assert baked.returncode == 0 and baked.stdout == text


def test_verify_image_checks_the_baked_sbom(smoke_image, capsys):
    tag = smoke_image.plan.tag
    assert _verify(tag) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert f"distributions in {tag} match the SBOM {IMAGE_SBOM}" in out
    assert _verify(tag, as_json=True) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["sbom"]["ok"] and doc["sbom"]["source"] == IMAGE_SBOM and doc["sbom"]["checked"] >= 6


def test_an_added_wheel_fails_naming_it(smoke_image, derived, tmp_path, capsys):
    added = derived("intruder", _install_wheel("intruder", "1.0"))
    assert _verify(added) == 1
    assert (
        f"verify-image: {added}: intruder 1.0 is installed but not in the SBOM {IMAGE_SBOM}" in capsys.readouterr().err
    )
    spec = load_spec(REPO_ROOT / "stack.yaml")
    sbom = tmp_path / "smoke.cdx.json"  # --sbom FILE still works (one made from the image: it lists the OS packages)
    target_sbom(spec, "smoke", "linux/amd64", sbom, image=smoke_image.plan.tag)
    assert _verify(smoke_image.plan.tag, str(sbom)) == 0, capsys.readouterr()
    capsys.readouterr()
    assert _verify(added, str(sbom), as_json=True) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["sbom"]["problems"] == [f"intruder 1.0 is installed but not in the SBOM {sbom}"]


def test_a_locked_version_from_another_archive_or_edited_fails(derived):
    other = derived("six-other", _install_wheel("six", "1.17.0"))
    found = check_image(other)
    assert len(found.problems) == 1, found.problems
    assert found.problems[0].startswith("six 1.17.0 was installed from an archive with sha256 ")
    assert found.problems[0].endswith(f"not one the SBOM {IMAGE_SBOM} lists")
    edited = derived("idna-edited", f"RUN echo '# edited' >> {SITE}/idna/core.py")
    assert check_image(edited).problems == ("idna 3.20: idna/core.py differ from its RECORD",)


def test_an_edited_or_missing_baked_sbom(derived, smoke_image, capsys):
    edited = derived("sbom-edited", f"RUN echo ' ' >> {IMAGE_SBOM}")
    (problem,) = check_image(edited).problems
    label = docker.image_labels(smoke_image.plan.tag)[SBOM_LABEL]
    assert problem.startswith(f"the baked SBOM {IMAGE_SBOM} has sha256 ") and problem.endswith(f"says {label}")
    missing = derived("sbom-missing", f"RUN rm {IMAGE_SBOM}")
    assert main(["verify-image", missing]) == 1
    err = capsys.readouterr().err
    assert f"{missing}: no SBOM baked at {IMAGE_SBOM} (built by megacpp-env): rebuild it with" in err
    assert "--sbom FILE (make it with: megacpp-env sbom TARGET --output FILE)" in err


DPKG = r"${Package}\t${Version}\t${Architecture}\t${db:Status-Status}\n"


def _dpkg(image: str) -> set[tuple[str, str, str]]:
    """(name, version, arch) of every package dpkg lists installed in ``image``, by dpkg itself."""
    proc = docker.run_in_image(image, ["-W", "-f", DPKG], entrypoint="dpkg-query")
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t") for line in proc.stdout.splitlines()]
    return {(n, v, a) for n, v, a, status in rows if status not in ("not-installed", "config-files")}


def test_the_baked_sbom_lists_the_debian_packages_with_licenses_and_purls(smoke_image):
    """Issue 29's 'done when': the smoke image's baked SBOM lists its Debian packages, with licenses and purls:
    each one dpkg lists in the image, at its version and architecture, as pkg:deb/debian/NAME@VERSION?arch=ARCH;
    the ones of the base image (by its own dpkg database) marked so, the apt layer's others; licenses from every
    machine-readable copyright file, and the others unknown, with the reason."""
    from packageurl import PackageURL

    tag = smoke_image.plan.tag
    doc = json.loads(docker.run_in_image(tag, ["cat", IMAGE_SBOM]).stdout)
    debs = [c for c in doc["components"] if c.get("purl", "").startswith("pkg:deb/")]
    listed = {(c["name"], c["version"], PackageURL.from_string(c["purl"]).qualifiers["arch"]) for c in debs}
    assert listed == _dpkg(tag) and len(listed) > 100
    for comp in debs:
        ref = PackageURL.from_string(comp["purl"])
        assert (ref.type, ref.namespace, ref.name, ref.version) == ("deb", "debian", comp["name"], comp["version"])
        assert comp["bom-ref"] == comp["purl"]
    base = _dpkg(str(load_spec(REPO_ROOT / "stack.yaml").target("smoke").base_image("linux/amd64")))
    layer = {c["name"]: next(p["value"] for p in c["properties"] if p["name"] == "megacpp-env:layer") for c in debs}
    assert {n for n, v in layer.items() if v == "base"} == {n for n, _, _ in base & listed}
    assert {"gcc-15", "python3.13", "git"} <= {n for n, v in layer.items() if v == "apt"}  # the toolchain's apt layer
    by_name = {c["name"]: c for c in debs}
    assert by_name["apt"]["licenses"][0] == {"license": {"name": "BSD-3-clause", "acknowledgement": "declared"}}
    assert {"name": "GPL-2+", "acknowledgement": "declared"} in [x["license"] for x in by_name["bash"]["licenses"]]
    licensed = [c for c in debs if "licenses" in c]
    unknown = [next(p["value"] for p in c["properties"] if p["name"] == "megacpp-env:license") for c in debs
               if "licenses" not in c]  # fmt: skip
    assert len(licensed) > len(debs) / 2 and len(licensed) + len(unknown) == len(debs)
    assert all(u.startswith("unknown: /usr/share/doc/") and "not machine-readable" in u for u in unknown), unknown
    os_comp = next(c for c in doc["components"] if c["bom-ref"] == "os")
    assert (os_comp["type"], os_comp["name"]) == ("operating-system", "debian")
    pypi = {c["name"]: c for c in doc["components"] if c.get("purl", "").startswith("pkg:pypi/")}
    assert pypi["six"]["licenses"] == [{"expression": "MIT", "acknowledgement": "declared"}]
    src = next(c for c in doc["components"] if c["bom-ref"] == "source:megacpp_smoke_ext")
    assert src["purl"].startswith("pkg:generic/megacpp_smoke_ext@") and "vcs_url=git%2Bgit://127.0.0.1:9418/" in src["purl"]


# Inside the image, no network: a Debian package added (built there with dpkg-deb), one removed, one replaced
# by another version.
def _deb(name: str, version: str) -> str:
    control = f"Package: {name}\\nVersion: {version}\\nArchitecture: all\\nMaintainer: t <t@example.org>\\nDescription: t\\n"
    return (
        f"RUN mkdir -p /tmp/{name}/DEBIAN && printf '{control}' > /tmp/{name}/DEBIAN/control "
        f"&& dpkg-deb -b /tmp/{name} /tmp/{name}.deb && dpkg -i --force-depends /tmp/{name}.deb && rm -rf /tmp/{name}*"
    )


def test_a_debian_package_added_removed_or_changed_fails_naming_it(smoke_image, derived, capsys):
    doc = json.loads(docker.run_in_image(smoke_image.plan.tag, ["cat", IMAGE_SBOM]).stdout)
    version = {c["name"]: c["version"] for c in doc["components"] if c.get("purl", "").startswith("pkg:deb/")}
    changed = derived(
        "debs",
        _deb("megacpp-intruder", "1.0"),
        "RUN dpkg --remove --force-depends media-types",
        _deb("python3-setuptools-whl", "99.0"),
    )
    found = check_image(changed)
    assert found.problems == (
        f"Debian package media-types {version['media-types']} (all) is in the SBOM {IMAGE_SBOM} but not installed",
        f"Debian package megacpp-intruder 1.0 (all) is installed but not in the SBOM {IMAGE_SBOM}",
        f"Debian package python3-setuptools-whl (all) is 99.0 in the image, {version['python3-setuptools-whl']} in "
        f"the SBOM {IMAGE_SBOM}",
    )
    assert found.os_checked == len(version)  # one added, one removed
    assert _verify(changed, as_json=True) == 1
    assert json.loads(capsys.readouterr().out)["sbom"]["problems"] == list(found.problems)
