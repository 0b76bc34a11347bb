"""verify-image --sbom on the real smoke image: the image matches its SBOM; a wheel pip-installed into
it afterwards makes verify-image fail, naming the wheel's distribution."""

from __future__ import annotations

import argparse
import base64
import textwrap

import pytest

from megacpp_env import docker
from megacpp_env.commands import verify_image as verify_cmd
from megacpp_env.sbom import image_sbom, render_sbom
from megacpp_env.spec import load_spec
from tests.fixtures.docker import REPO_ROOT

pytestmark = pytest.mark.docker

# Run inside the image: write a real wheel (METADATA, WHEEL, RECORD with hashes) for pip to install.
MAKE_WHEEL = textwrap.dedent("""
    import base64, hashlib, zipfile
    files = {
        "intruder/__init__.py": b"X = 1\\n",
        "intruder-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\\nName: intruder\\nVersion: 1.0\\n",
        "intruder-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }
    record = []
    with zipfile.ZipFile("/tmp/intruder-1.0-py3-none-any.whl", "w") as whl:
        for path, data in files.items():
            whl.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{path},sha256={digest},{len(data)}")
        whl.writestr("intruder-1.0.dist-info/RECORD", "\\n".join([*record, "intruder-1.0.dist-info/RECORD,,"]) + "\\n")
""")


def _verify(image: str, sbom: str) -> int:
    return verify_cmd.run(argparse.Namespace(image=image, platform="", json=False, sbom=sbom))


def test_verify_image_checks_the_sbom(smoke_image, tmp_path, capsys):
    spec = load_spec(REPO_ROOT / "stack.yaml")
    sbom = tmp_path / "smoke.cdx.json"
    sbom.write_text(render_sbom(image_sbom(spec, spec.targets["smoke"], "linux/amd64")))
    tag = smoke_image.plan.tag
    assert _verify(tag, str(sbom)) == 0, capsys.readouterr()
    capsys.readouterr()

    added = f"megacpp-test/smoke-intruder:{tag.rsplit(':', 1)[1]}"
    script = base64.b64encode(MAKE_WHEEL.encode()).decode()
    dockerfile = (
        f"FROM {tag}\n"
        f"RUN echo {script} | base64 -d | /opt/venv/bin/python - "
        "&& /opt/venv/bin/pip install --no-index --no-deps /tmp/intruder-1.0-py3-none-any.whl\n"
    )
    rc, log = docker.stream(docker.stdin_build_argv(added, "linux/amd64", docker=docker.binary()), stdin=dockerfile)
    assert rc == 0, "\n".join(log.last_lines)
    try:
        assert _verify(added, str(sbom)) == 1
        err = capsys.readouterr().err
        assert f"verify-image: {added}: intruder 1.0 is installed but not in the SBOM {sbom}" in err
    finally:
        docker.remove_image(added)
