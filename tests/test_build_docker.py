"""The smoke image, built for real with Docker (BuildKit) and then exercised.

Needs: a Docker daemon (scripts/docker-up.sh), the base image (scripts/make-base-image.sh amd64;
arm64 + scripts/binfmt-up.sh for the arm64 test). The smoke source server is started by the fixture.
"""

from __future__ import annotations

import argparse
import json
import re
import time

import pytest

from megacpp_env import build, docker, layout, render
from megacpp_env.commands import verify_image as verify_cmd
from megacpp_env.spec import load_spec
from tests.fixtures.docker import REPO_ROOT, build_smoke, skip_or_fail
from tests.fixtures.srcbuild import LIB_FILES, TWO_FILES, make_bare_repo, two_source_spec

pytestmark = pytest.mark.docker

SITE = "/opt/venv/lib/python3.13/site-packages"


def _py(image, code, env=None, platform=""):
    return docker.run_in_image(image, ["python", "-c", code], env=env, platform=platform)


def test_tag_labels_and_baked_snapshot(smoke_image):
    tag = smoke_image.plan.tag
    assert re.fullmatch(r"megacpp/smoke:[0-9a-f]{16}", tag)
    labels = docker.image_labels(tag)
    baked = build.read_baked_snapshot(tag)
    assert labels["io.megacpp.env.snapshot-digest"] == baked["digest"] == smoke_image.snapshot_digest
    assert labels["io.megacpp.env.content-sha256"] == smoke_image.plan.content_hash
    assert labels["org.opencontainers.image.title"] == "megacpp/smoke"
    assert labels["io.megacpp.env.platform"] == "linux/amd64"
    assert labels["io.megacpp.env.lock-sha256"] != "missing"
    assert smoke_image.image_id == docker.image_id(tag)


def test_extension_imports_and_works(smoke_image):
    proc = _py(smoke_image.plan.tag, "import megacpp_smoke_ext as m; assert m.add(2, 3) == 5; print(m._core.__file__)")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith(f"{SITE}/megacpp_smoke_ext/_core.")
    proc = docker.run_in_image(smoke_image.plan.tag, ["gcc", "-dumpversion"])
    assert proc.stdout.strip().split(".")[0] == "15"


def test_overlay_is_present_and_verified(smoke_image):
    tag, dest = smoke_image.plan.tag, layout.image_checkout_dir("megacpp_smoke_ext")
    proc = docker.run_in_image(tag, ["megacpp-env", "overlay", "verify", "smoke-ext", "--to", dest])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = _py(tag, "import megacpp_smoke_ext.overlay_info as o; print(o.__file__)")
    assert proc.returncode == 0 and proc.stdout.strip() == f"{SITE}/megacpp_smoke_ext/overlay_info.py"


def test_ca_bundle_was_a_secret_not_a_layer(smoke_image):
    tag = smoke_image.plan.tag
    assert any(a.startswith("id=ca_bundle,src=") for a in smoke_image.plan.deps_argv) or not build_ca()
    proc = docker.run_in_image(tag, ["bash", "-c", "ls /run/secrets 2>/dev/null; ls /etc/apt/apt.conf.d; env"])
    assert "ca_bundle" not in proc.stdout and "99megacpp-ca" not in proc.stdout
    history = docker.run([docker.binary(), "history", "--no-trunc", "--format", "{{.CreatedBy}}", tag]).stdout
    assert "BEGIN CERTIFICATE" not in history


def test_sanity_runner_in_the_image(smoke_image):
    proc = docker.run_in_image(smoke_image.plan.tag, [
        "python", "-P", "-m", "megacpp_env.sanity", "--source", "megacpp_smoke_ext", "--import", "megacpp_smoke_ext",
        "--statement", "assert megacpp_smoke_ext.add(2, 3) == 5"])
    assert proc.returncode == 0 and proc.stdout.count("ok: ") == 2, proc.stdout


def test_verify_image_passes(smoke_image, capsys):
    assert verify_cmd.run(argparse.Namespace(image=smoke_image.plan.tag, platform="", json=False)) == 0
    assert capsys.readouterr().out.startswith("no drift between /opt/megacpp-env/snapshot.json")


def test_verify_image_detects_an_edited_installed_file(smoke_image):
    tag = smoke_image.plan.tag
    drifted = f"megacpp-test/smoke-drift:{tag.rsplit(':', 1)[1]}"
    dockerfile = f"FROM {tag}\nRUN echo '# edited in place' >> {SITE}/megacpp_smoke_ext/greeting.py\n"
    rc, log = docker.stream(docker.stdin_build_argv(drifted, "linux/amd64", docker=docker.binary()), stdin=dockerfile)
    assert rc == 0, "\n".join(log.last_lines)
    try:
        report = build.verify_image(drifted)
        assert not report.ok
        assert "megacpp_smoke_ext" in report.output
    finally:
        docker.remove_image(drifted)


def test_runtime_patch_switches_on_and_off(smoke_image):
    tag = smoke_image.plan.tag
    code = "from megacpp_smoke_ext import greeting as g; print(g.SHADOW, g.__file__)"
    off = _py(tag, code)
    on = _py(tag, code, env={"MEGACPP_PATCH_SMOKE_SHADOW": "1"})
    assert off.stdout.split() == ["False", f"{SITE}/megacpp_smoke_ext/greeting.py"], off.stderr
    assert on.stdout.split() == ["True", "/opt/megacpp-env/overlays/runtime/smoke_shadow/megacpp_smoke_ext/greeting.py"]
    # Off again in the same container after it was on: the installed file was never touched.
    script = (f"sha256sum {SITE}/megacpp_smoke_ext/greeting.py; "
              f"MEGACPP_PATCH_SMOKE_SHADOW=1 python -c '{code}'; MEGACPP_PATCH_SMOKE_SHADOW=0 python -c '{code}'; "
              f"sha256sum {SITE}/megacpp_smoke_ext/greeting.py")
    lines = docker.run_in_image(tag, ["bash", "-c", script]).stdout.splitlines()
    assert lines[0] == lines[3] and lines[1].startswith("True ") and lines[2].startswith("False ")


def test_rebuild_with_unchanged_inputs_is_fully_cached(smoke_image):
    again = build_smoke("linux/amd64")
    assert again.plan.tag == smoke_image.plan.tag
    assert again.executed == ()  # both docker builds, and the source mirror left byte for byte as it was
    assert again.snapshot_digest == smoke_image.snapshot_digest


def test_the_source_came_from_the_mirror_into_a_build_with_no_network(smoke_image):
    """The smoke source is served on the host's loopback only; the source stage had no network at all."""
    tag, dest = smoke_image.plan.tag, layout.image_checkout_dir("megacpp_smoke_ext")
    assert smoke_image.plan.argv[smoke_image.plan.argv.index("--network") + 1] == "none"
    script = f"git -C {dest} remote get-url origin; git -C {dest} rev-parse HEAD; find /opt/megacpp-env/wheels -type f"
    lines = docker.run_in_image(tag, ["bash", "-c", script]).stdout.splitlines()
    pin = load_spec(REPO_ROOT / "stack.yaml").sources["megacpp_smoke_ext"]
    assert lines[:2] == [pin.repo, pin.commit]  # the pinned URL is recorded; the objects came from the mirror
    assert lines[2:] == []  # the wheels were mounted into the collect step, never copied into a layer


def _stages(result: build.BuildResult) -> set[str]:
    return {re.match(r"\[([\w.-]+)", s)[1] for s in result.executed}


FETCH = "ls /sys/class/net; git ls-remote git://127.0.0.1:9418/megacpp-smoke-ext.git"


def _nonce() -> str:
    """A fresh value for an edit, so BuildKit's cache from an earlier run cannot answer for this one."""
    import uuid

    return uuid.uuid4().hex


def test_a_fetch_in_a_source_step_fails_and_succeeds_with_a_network(docker_daemon, smoke_source_server, repo_copy):
    """The same step, in the same Dockerfile: with the tool's build it sees only `lo` and cannot reach the
    smoke repository on the host's loopback; built by hand with the host's network it fetches fine."""
    text = (repo_copy / "stack.yaml").read_text()
    fetch = f"echo run {_nonce()}; {FETCH}"  # the step must run in both builds below, not come from a cache
    text = text.replace("    overlay: smoke-ext\n", f"    overlay: smoke-ext\n    pre_build: [{json.dumps(fetch)}]\n", 1)
    (repo_copy / "stack.yaml").write_text(text)
    spec = load_spec(repo_copy / "stack.yaml")
    render.write(repo_copy, render.render_all(spec))
    plan = build.plan_build(spec, build.BuildOptions(target="smoke", tag="megacpp-test/smoke:fetch", ca_bundle=build_ca()))
    with pytest.raises(build.BuildFailedError) as exc:
        build.execute(plan)
    assert exc.value.step.startswith("[source-megacpp_smoke_ext 7/7] RUN --mount=type=bind,source=.megacpp/source-mirror")
    log = "\n".join(exc.value.tail)
    assert "megacpp_smoke_ext: pre_build[0] failed" in log
    assert "unable to connect to 127.0.0.1" in log and "Connection refused" in log
    assert "  | lo\n" in str(exc.value) + "\n" and "eth0" not in log  # the step's only network interface
    from dataclasses import replace

    # the whole Dockerfile in one networked build: its lock stage then runs with the host network (another
    # cache key than step 2's), so it needs the CA bundle step 2 gets
    networked = replace(plan.request, network="host", build_args=(), labels=(), secrets=plan.deps_request.secrets,
                        tag="megacpp-test/smoke:networked")
    lines: list[str] = []
    rc, log2 = docker.stream(docker.build_argv(networked, docker=docker.binary()), cwd=str(repo_copy),
                             on_line=lines.append)
    try:
        assert rc == 0, "\n".join(log2.last_lines)
        pin = spec.sources["megacpp_smoke_ext"].commit
        assert any(re.search(rf" {pin}\s+refs/heads/main$", line) for line in lines), "no ls-remote output"
    finally:
        docker.remove_image("megacpp-test/smoke:networked")


def test_only_the_edited_source_rebuilds(docker_daemon, smoke_source_server, repo_copy, tmp_path):
    """Two sources: an overlay edit rebuilds that source's stage only; a tool edit outside the source-build
    closure rebuilds no source stage; nothing changed rebuilds nothing."""
    two = make_bare_repo(tmp_path / "up" / "megacpp-smoke-two.git", TWO_FILES)
    lib = make_bare_repo(tmp_path / "up" / "smoke-two-lib.git", LIB_FILES)
    spec = load_spec(two_source_spec(repo_copy, two, lib))
    render.write(repo_copy, render.render_all(spec))
    tag = "megacpp-test/smoke-two:latest"

    def again() -> build.BuildResult:
        return build.execute(build.plan_build(load_spec(repo_copy / "stack.yaml"),
                                              build.BuildOptions(target="smoke", tag=tag, ca_bundle=build_ca())))

    try:
        again()
        proc = _py(tag, "import megacpp_smoke_two as t, megacpp_smoke_ext as e; print(t.mul(6, 7), e.add(2, 3))")
        assert proc.stdout.split() == ["42", "5"], proc.stderr
        assert again().executed == ()
        _touch_overlay(repo_copy)
        edited = again()
        assert "source-megacpp_smoke_ext" in _stages(edited) and "source-megacpp_smoke_two" not in _stages(edited)
        ui = repo_copy / "megacpp_env" / "ui.py"
        ui.write_text(ui.read_text() + f"# edit {_nonce()}\n")
        tool = again()
        assert tool.executed and not [s for s in _stages(tool) if s.startswith("source-")]
        assert _stages(tool) == {"image"}
    finally:
        docker.remove_image(tag)


def _touch_overlay(root):
    import hashlib

    path = root / "overlays" / "smoke-ext" / "files" / "megacpp_smoke_ext" / "overlay_info.py"
    manifest = root / "overlays" / "smoke-ext" / "manifest.toml"
    old = hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_text(path.read_text() + f"# edited {_nonce()}\n")
    manifest.write_text(manifest.read_text().replace(old, hashlib.sha256(path.read_bytes()).hexdigest()))


def test_lock_hash_mismatch_stops_the_build_naming_step_and_package(docker_daemon, smoke_source_server, repo_copy):
    """A lock whose hash no longer matches the artifact: the build stops at the lock step, naming the package."""
    exports = [repo_copy / "locks" / "smoke.linux-amd64.requirements.txt", repo_copy / "locks" / "pylock.smoke-linux-amd64.toml"]
    text = exports[0].read_text()
    good = re.search(r"^attrs==\S+ \\\n\s+--hash=sha256:([0-9a-f]{64})", text, re.M)[1]
    for path in exports:
        path.write_text(path.read_text().replace(good, "0" * 64))
    spec = load_spec(repo_copy / "stack.yaml")
    plan = build.plan_build(spec, build.BuildOptions(target="smoke", tag="megacpp-test/smoke:bad-lock",
                                                     ca_bundle=build_ca()))
    with pytest.raises(build.BuildFailedError) as exc:
        build.execute(plan)
    assert exc.value.step.startswith("[lock 2/2] RUN ")
    assert re.fullmatch(r"attrs==[0-9.]+", exc.value.package)
    assert "pip hash mismatch: attrs==" in str(exc.value)


def build_ca():
    from tests.fixtures.docker import ca_bundle

    return ca_bundle()


@pytest.mark.arm64
def test_arm64_smoke_image_under_qemu(smoke_image_arm64, capsys):
    tag = smoke_image_arm64.plan.tag
    start = time.monotonic()
    proc = docker.run_in_image(tag, ["python", "-c", "import platform, megacpp_smoke_ext as m; "
                                     "assert m.add(2, 3) == 5; print(platform.machine())"], platform="linux/arm64")
    assert proc.returncode == 0 and proc.stdout.strip() == "aarch64", proc.stderr
    assert build.verify_image(tag, platform="linux/arm64").ok
    with capsys.disabled():
        print(f"\narm64 smoke: build {smoke_image_arm64.seconds:.0f}s "
              f"({len(smoke_image_arm64.executed)} steps run), checks {time.monotonic() - start:.0f}s")


@pytest.mark.network
def test_build_from_a_mirror_only(docker_daemon, smoke_source_server, repo_copy, tmp_path):
    """`build --mirror DIR`: the lock stage installs with --no-index from the served mirror, nothing else."""
    import subprocess
    import sys

    mirror = tmp_path / "mirror"
    proc = subprocess.run([sys.executable, "-m", "megacpp_env", "mirror", "smoke", "--spec",
                           str(repo_copy / "stack.yaml"), "--platform", "linux/amd64", "--to", str(mirror)],
                          capture_output=True, text=True, check=False, cwd=repo_copy)
    if proc.returncode != 0:
        skip_or_fail(f"cannot mirror the smoke lock here: {proc.stderr[-300:]}")
    spec = load_spec(repo_copy / "stack.yaml")
    plan = build.plan_build(spec, build.BuildOptions(target="smoke", mirror=str(mirror), tag="megacpp-test/smoke:mirror"))
    lines: list[str] = []
    result = build.execute(plan, on_line=lines.append)
    log = "\n".join(lines)
    assert f"--find-links http://127.0.0.1:{plan.mirror_port}/" in log or "Looking in links" in log
    assert "Downloading" not in log or f"127.0.0.1:{plan.mirror_port}" in log
    assert "files.pythonhosted.org" not in log
    assert build.verify_image(result.plan.tag).ok
    docker.remove_image(result.plan.tag)


def test_a_project_without_the_tool_source_builds_from_a_staged_context(smoke_image, tmp_path, capsys):
    """A project with only stack.yaml, images/, locks/, overlays/ and facts/ (megacpp-env installed, not
    vendored): build stages the project's files and the running tool's source. The inputs, and so
    the tag, are those of the build from this repository; the image verifies."""
    import shutil

    project = tmp_path / "project"
    project.mkdir()
    for name in ("stack.yaml", "images", "locks", "overlays", "facts"):
        src = REPO_ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, project / name)
    result = build_smoke("linux/amd64", root=project, tag="megacpp/smoke-staged:test")
    assert result.plan.staged and result.plan.content_hash == smoke_image.plan.content_hash
    assert not (project / "megacpp_env").exists() and not (project / "pyproject.toml").exists()
    version = docker.run_in_image(result.plan.tag, ["megacpp-env", "--version"])
    assert version.stdout.strip() == f"megacpp-env {__import__('megacpp_env').__version__}"
    assert verify_cmd.run(argparse.Namespace(image=result.plan.tag, platform="", json=False)) == 0, capsys.readouterr()
