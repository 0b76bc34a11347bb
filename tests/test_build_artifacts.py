"""Artifact sets in the image build (issue 17): the cloud target's verified FlashInfer cubin mirror is
bound into the jit-cache stage (built with no network) as FLASHINFER_CUBIN_DIR and copied into the
runtime image with the same variable; `build` refuses before Docker runs when the mirror is missing or
does not verify. The set's real files are not reachable here, so the refusal and pass cases use a set of
this test's own, pinned the same way (checksums.txt by sha256, each file by that list)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from megacpp_env import build, docker, layout, render
from megacpp_env.errors import StaleError
from megacpp_env.spec import load_spec
from tests.conftest import REPO_ROOT

CUBINS = "/mnt/megacpp-artifacts/flashinfer_cubins"


def _stage(dockerfile: str, name: str) -> str:
    """The text of stage ``source-<name>`` (up to the next FROM)."""
    start = dockerfile.index(f" AS source-{name}\n")
    end = dockerfile.find("\nFROM ", start)
    return dockerfile[start:end]


@pytest.fixture(scope="module")
def cloud() -> str:
    spec = load_spec(REPO_ROOT / "stack.yaml")
    return render.render_target(spec, "cloud")[0].content.decode()


def test_jit_cache_stage_mounts_the_cubin_mirror_and_points_the_build_at_it(cloud: str) -> None:
    stage = _stage(cloud, "flashinfer_jit_cache")
    assert f"--mount=type=bind,source=.megacpp/artifacts/flashinfer_cubins,target={CUBINS} \\" in stage
    assert f"FLASHINFER_CUBIN_DIR={CUBINS} \\" in stage
    # the mount and the variable belong to the one RUN that builds the source
    run = stage[stage.index("RUN --mount") :]
    assert run.index(CUBINS) < run.index("-m megacpp_env.srcbuild build")
    for other in ("flashinfer", "vllm", "causal_conv1d"):  # only the AOT build reads the cubins
        assert "artifacts" not in _stage(cloud, other)


def test_the_stage_is_built_without_network(cloud: str) -> None:
    """Step 3 (every source stage) runs with --network none; the deps step never reaches the sources."""
    spec = load_spec(REPO_ROOT / "stack.yaml")
    plan = build.plan_build(spec, build.BuildOptions(target="cloud"))
    final = list(plan.argv)
    assert final[final.index("--network") + 1] == "none"
    assert "--target" not in final  # the image stage, which depends on every source stage
    deps = list(plan.deps_argv)
    assert deps[deps.index("--target") + 1] == "deps"
    assert cloud.index("AS deps") < cloud.index("AS source-flashinfer_jit_cache")


def test_runtime_image_carries_the_cubins_and_the_variable(cloud: str) -> None:
    image = cloud[cloud.index(" AS image\n") :]
    assert "COPY .megacpp/artifacts/flashinfer_cubins /opt/megacpp-env/artifacts/flashinfer_cubins\n" in image
    env = image[image.index("\nENV ") :]
    assert 'FLASHINFER_CUBIN_DIR="/opt/megacpp-env/artifacts/flashinfer_cubins"' in env
    assert 'FLASHINFER_NO_DOWNLOAD="1"' in env  # a cubin missing from the copy is an error, never a download


def test_targets_without_artifacts_are_unchanged() -> None:
    spec = load_spec(REPO_ROOT / "stack.yaml")
    without = [t.name for t in spec.targets.values() if not t.artifacts]
    assert "smoke" in without and "cloud" not in without
    for target in without:
        text = render.render_target(spec, target)[0].content.decode()
        assert "megacpp-artifacts" not in text and "FLASHINFER_CUBIN_DIR" not in text


def test_build_cloud_refuses_before_docker_when_the_mirror_is_missing(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from megacpp_env.cli import main

    def no_docker(*_a: object, **_k: object) -> None:
        raise AssertionError("docker ran")

    monkeypatch.setattr(docker, "binary", lambda: "docker")
    monkeypatch.setattr(build, "execute", no_docker)
    assert not (REPO_ROOT / layout.ARTIFACT_MIRROR / "flashinfer_cubins").exists()
    assert main(["build", "cloud", "--spec", str(REPO_ROOT / "stack.yaml")]) == 1
    err = capsys.readouterr().err
    assert re.search(
        r"artifact set flashinfer_cubins \(FLASHINFER_CUBIN_DIR\) is not mirrored at \.megacpp/artifacts/flashinfer_cubins: "
        r"\S+/checksums\.txt: missing and 12 more \(run `megacpp-env mirror-artifacts flashinfer_cubins --to "
        r"\.megacpp/artifacts/flashinfer_cubins`",
        err,
    ), err


def _pinned_set(root: Path) -> None:
    """A spec copy whose cloud target uses an artifact set of two files, mirrored and verified."""
    files = {"a.cubin": b"\x7fELF cubin a", "sub/b.cubin": b"\x7fELF cubin b"}
    mirror = root / layout.ARTIFACT_MIRROR / "flashinfer_cubins" / "d1/"
    listing = "".join(f"{hashlib.sha256(data).hexdigest()}  {rel}\n" for rel, data in files.items())
    for rel, data in files.items():
        (mirror / rel).parent.mkdir(parents=True, exist_ok=True)
        (mirror / rel).write_bytes(data)
    (mirror / "checksums.txt").write_text(listing)
    text = (root / "stack.yaml").read_text()
    start = text.index("    dirs:\n", text.index("  flashinfer_cubins:"))
    end = text.index("\n\n", start)
    pinned = hashlib.sha256(listing.encode()).hexdigest()
    (root / "stack.yaml").write_text(text[:start] + f"    dirs:\n      d1/: {pinned}" + text[end:])


def test_preflight_passes_on_a_verified_mirror_and_names_a_tampered_file(repo_copy: Path) -> None:
    _pinned_set(repo_copy)
    spec = load_spec(repo_copy / "stack.yaml")
    assert build.artifact_problems(spec, "cloud") == []
    (repo_copy / layout.ARTIFACT_MIRROR / "flashinfer_cubins/d1/sub/b.cubin").write_bytes(b"not the pinned cubin")
    problems = build.artifact_problems(spec, "cloud")
    assert problems == [
        "artifact set flashinfer_cubins (FLASHINFER_CUBIN_DIR) is not mirrored at .megacpp/artifacts/flashinfer_cubins: "
        "d1/sub/b.cubin: sha256 differs from checksums.txt (run `megacpp-env mirror-artifacts flashinfer_cubins "
        "--to .megacpp/artifacts/flashinfer_cubins`, or copy a verified mirror there)"
    ]
    with pytest.raises(StaleError, match="artifact set flashinfer_cubins"):
        build.refuse_if_stale(spec, "cloud", "linux/amd64")
