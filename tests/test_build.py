"""build: exact command lines (dry run), content-addressed tags, refusal of stale inputs, log parsing.

No daemon needed here; tests/test_build_docker.py builds and runs the smoke image for real.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import pytest

from megacpp_env import build, buildlog, docker, layout
from megacpp_env.build import imagecheck
from megacpp_env.build import run as build_run
from megacpp_env.commands import build as build_cmd
from megacpp_env.errors import RefusedError, StaleError
from megacpp_env.spec import load_spec

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def spec():
    return load_spec(REPO_ROOT / "stack.yaml")


def _args(target, **kw):
    base = {
        "spec": str(REPO_ROOT / "stack.yaml"), "target": target, "platform": "", "base_image": "", "tag": "",
        "push": False, "builder": "", "cache_from": [], "cache_to": [], "network": "", "ca_bundle": "",
        "mirror": "", "dry_run": True, "no_cache": False, "json": False, "registry": "", "skip_base_check": False,
        "source_from": [], "source_mirror": "",
    }
    base.update(kw)
    return argparse.Namespace(**base)


def _dry_run(capsys, target, **kw):
    """The final (no-network) build's argv and the notes; the steps before it are checked here."""
    argv, _steps, notes = _dry_run_steps(capsys, target, **kw)
    return argv, notes


def _dry_run_steps(capsys, target, **kw):
    assert build_cmd.run(_args(target, **kw)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"# cd {REPO_ROOT}"
    assert out[1].startswith("# 1. ") and out[3].startswith("# 2. ") and out[5].startswith("# 3. ")
    return shlex.split(out[6]), {"mirror": shlex.split(out[2]), "deps": shlex.split(out[4])}, out[7:]


def _labels(argv):
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--label")


@pytest.mark.parametrize(("target", "platform", "base"), [
    ("gb10", "linux/arm64", "nvidia/cuda:13.2.0-cudnn-devel-ubuntu24.04"),
    ("cloud", "linux/amd64", "nvidia/cuda:13.2.0-cudnn-devel-ubuntu24.04"),
])
def test_dry_run_prints_the_full_buildkit_command(capsys, spec, target, platform, base):
    argv, steps, notes = _dry_run_steps(capsys, target)
    digest = build.content_hash(spec, spec.target(target), platform)
    deps_tag = f"megacpp/{target}-deps:{build.deps_digest(spec, spec.target(target), platform)[:16]}"
    assert steps["mirror"] == ["megacpp-env", "mirror-sources", target, "--to", ".megacpp/source-mirror"]
    assert steps["deps"][1:] == ["build", "--progress=plain", "--platform", platform, "-f",
                                 f"images/{target}/Dockerfile", "-t", deps_tag, "--target", "deps", "."]
    # the deps build gets Docker's default network (it downloads the locked wheels); the sources none at all
    assert Path(argv[0]).name == "docker"
    assert argv[1:12] == ["build", "--progress=plain", "--platform", platform, "-f", f"images/{target}/Dockerfile",
                          "-t", f"megacpp/{target}:{digest[:16]}", "--network", "none", "--build-arg"]
    assert argv[12] == f"DEPS_IMAGE={deps_tag}"
    assert argv[-1] == "."
    assert _labels(argv) == {
        "org.opencontainers.image.version": digest[:16],
        "org.opencontainers.image.base.name": base,
        "io.megacpp.env.platform": platform,
        "io.megacpp.env.spec-sha256": spec.digest(),
        "io.megacpp.env.lock-sha256": "missing",
        "io.megacpp.env.content-sha256": digest,
    }
    assert notes[0] == (f"# a real build would refuse: unlocked: {target} {platform}: index pytorch-nightly-cu132 "
                        f"(https://download.pytorch.org/whl/nightly/cu132) unreachable here; lock it where it is "
                        f"reachable and commit locks/pylock.{target}-{platform.replace('/', '-')}.toml")
    # cloud also uses the FlashInfer cubin set, which is not mirrored here (tests/test_build_artifacts.py)
    assert notes[1:] == ([] if target == "gb10" else [
        "# a real build would refuse: artifact set flashinfer_cubins (FLASHINFER_CUBIN_DIR) is not mirrored at "
        ".megacpp/artifacts/flashinfer_cubins: 10f64528a1172dae8e29601a3b99ab9dc78d37be/gemm-91e0ba0-2710384/"
        "checksums.txt: missing and 12 more (run `megacpp-env mirror-artifacts flashinfer_cubins --to "
        ".megacpp/artifacts/flashinfer_cubins`, or copy a verified mirror there)"])


def test_dry_run_secrets_cache_and_buildx(capsys, tmp_path):
    ca = tmp_path / "corp-ca.pem"
    ca.write_text("not a real certificate\n")
    argv, notes = _dry_run(capsys, "cloud", ca_bundle=str(ca), builder="remote-bk",
                           cache_from=["type=registry,ref=cache/cloud"], cache_to=["type=registry,ref=cache/cloud,mode=max"],
                           push=True, registry="reg.example:5000", base_image="nvidia/cuda:13.2.1-cudnn-devel-ubuntu24.04")
    assert argv[1:3] == ["buildx", "build"]
    assert argv[argv.index("-t") + 1].startswith("reg.example:5000/megacpp/cloud:")
    joined = shlex.join(argv)
    deps = shlex.join(build.plan_build(load_spec(REPO_ROOT / "stack.yaml"), build.BuildOptions(
        target="cloud", ca_bundle=str(ca), builder="remote-bk", push=True, cache_to=("type=registry,ref=c",),
        registry="reg.example:5000", base_image="nvidia/cuda:13.2.1-cudnn-devel-ubuntu24.04")).deps_argv)
    assert f"--secret id=ca_bundle,src={ca}" in deps and "ca_bundle" not in joined  # no network, no CA needed
    assert "--builder remote-bk" in joined and "--builder remote-bk" in deps
    assert "--cache-from type=registry,ref=cache/cloud --cache-to type=registry,ref=cache/cloud,mode=max --push ." in joined
    assert "--build-arg BASE_IMAGE_AMD64=nvidia/cuda:13.2.1-cudnn-devel-ubuntu24.04" in deps
    assert deps.endswith(" --push .")  # a remote builder pulls the deps image in the second build
    assert " -t reg.example:5000/megacpp/cloud-deps:" in deps
    assert "--load" not in argv and "not a real certificate" not in joined
    assert notes[0] == "# --builder/--cache-to need `docker buildx build` (the classic `docker build` lacks them)"
    assert not any("docker push" in n for n in notes)  # buildx pushes itself; no cache image of its own


def test_classic_build_push_and_load(spec):
    plan = build.plan_build(spec, build.BuildOptions(target="gb10", push=True, registry="127.0.0.1:5000",
                                                     cache_from=("127.0.0.1:5000/megacpp/gb10:cache-arm64",)))
    assert plan.argv[1] == "build" and "--cache-from" in plan.argv
    digest = build.content_hash(spec, spec.target("gb10"), "linux/arm64")
    assert plan.tag == f"127.0.0.1:5000/megacpp/gb10:{digest[:16]}"
    assert plan.cache_ref == "127.0.0.1:5000/megacpp/gb10:cache-arm64"
    assert plan.deps_tag.startswith("megacpp/gb10-deps:")  # the local daemon builds step 3: no push needed
    assert "--build-arg BUILDKIT_INLINE_CACHE=1" in shlex.join(plan.argv)  # the pushed image can serve as a cache
    assert "BUILDKIT_INLINE_CACHE" not in shlex.join(build.plan_build(spec, build.BuildOptions(target="gb10")).argv)
    assert plan.notes == (
        f"then: docker tag {plan.tag} {plan.cache_ref} (the build's image, with its inline cache)",
        f"then: docker push {plan.cache_ref}; docker push {plan.tag} (after the snapshot label)",
        f"then: docker tag {plan.deps_tag} {plan.cache_ref}-deps (the deps image, with its inline cache)",
        f"then: docker push {plan.cache_ref}-deps (before the image)",
    )
    pushed_only = build.plan_build(spec, build.BuildOptions(target="gb10", push=True, registry="127.0.0.1:5000"))
    assert "--build-arg BUILDKIT_INLINE_CACHE=1" in shlex.join(pushed_only.argv)
    plan = build.plan_build(spec, build.BuildOptions(target="gb10", builder="bk"))
    assert plan.argv[-2:] == ("--load", ".")


def test_push_needs_a_registry(spec):
    with pytest.raises(RefusedError) as exc:
        build.plan_build(spec, build.BuildOptions(target="smoke", push=True))
    assert str(exc.value).startswith("--push: megacpp/smoke:")
    assert "it would go to Docker Hub (remedy: --registry HOST[:PORT] or $MEGACPP_REGISTRY" in str(exc.value)
    with pytest.raises(RefusedError, match=r"--registry 'a/b': expected HOST\[:PORT\]"):
        build.plan_build(spec, build.BuildOptions(target="smoke", push=True, registry="a/b"))
    explicit = build.plan_build(spec, build.BuildOptions(target="smoke", push=True, tag="me/smoke:1"))
    assert explicit.cache_ref == "me/smoke:cache-amd64"  # an explicit --tag says where to push


def test_sources_never_get_a_network_and_the_pip_mirror_is_served_to_the_deps_build(spec, tmp_path):
    plan = build.plan_build(spec, build.BuildOptions(target="smoke", platform="linux/arm64"))
    assert "--network" not in plan.deps_argv  # its loopback source is mirrored on the host, not fetched in the build
    assert plan.argv[plan.argv.index("--network"):plan.argv.index("--network") + 2] == ("--network", "none")
    assert plan.argv[plan.argv.index("--platform") + 1] == "linux/arm64"
    assert _labels(plan.argv)["org.opencontainers.image.base.name"] == "megacpp-base/debian-forky:arm64"
    assert _labels(plan.deps_argv) == {}
    plan = build.plan_build(spec, build.BuildOptions(target="gb10", mirror=str(tmp_path), network="bridge"))
    assert f"PIP_MIRROR_URL=http://127.0.0.1:{plan.mirror_port}/" in plan.deps_argv
    assert "PIP_MIRROR_URL" not in shlex.join(plan.argv)
    assert plan.deps_argv[plan.deps_argv.index("--network"):][:2] == ("--network", "bridge")
    assert plan.argv[plan.argv.index("--network"):][:2] == ("--network", "none")


def test_source_rewrites_from_flags_and_from_another_mirror(spec, smoke_mirror, tmp_path):
    bundle = tmp_path / "x.bundle"
    bundle.write_text("")
    plan = build.plan_build(spec, build.BuildOptions(target="smoke", source_from=(f"https://h.example/x.git={bundle}",),
                                                     source_mirror=str(smoke_mirror)))
    mirrored = smoke_mirror / "sources" / "megacpp_smoke_ext" / "git"
    (repo,) = mirrored.iterdir()
    assert dict(plan.source_rewrites) == {
        f"url.{bundle}.insteadOf": "https://h.example/x.git",
        f"url.{repo.resolve().as_uri()}.insteadOf": "git://127.0.0.1:9418/megacpp-smoke-ext.git",
    }
    assert plan.mirror_argv()[5:] == ["--from", f"https://h.example/x.git={bundle}",
                                      "--from", f"git://127.0.0.1:9418/megacpp-smoke-ext.git={repo.resolve()}"]
    with pytest.raises(RefusedError, match="no mirror of source megacpp_smoke_ext in"):
        build.plan_build(spec, build.BuildOptions(target="smoke", source_mirror=str(tmp_path)))


def test_platform_not_in_target_is_refused(spec):
    with pytest.raises(RefusedError, match=r"target gb10 is not built for linux/amd64 \(platforms: linux/arm64\)"):
        build.plan_build(spec, build.BuildOptions(target="gb10", platform="linux/amd64"))


def test_tag_is_content_addressed(repo_copy):
    spec = load_spec(repo_copy / "stack.yaml")
    smoke = spec.target("smoke")
    h = build.content_hash(spec, smoke, "linux/amd64")
    assert h == build.content_hash(spec, smoke, "linux/amd64")
    assert h != build.content_hash(spec, smoke, "linux/arm64")
    assert h != build.content_hash(spec, smoke, "linux/amd64", "other/base:1")
    overlay_file = next(p for p in (repo_copy / "overlays" / "smoke-ext" / "files").rglob("*.py"))
    overlay_file.write_text(overlay_file.read_text() + "# touched\n")
    h2 = build.content_hash(spec, smoke, "linux/amd64")
    assert h2 != h
    (repo_copy / "locks" / "smoke.linux-amd64.requirements.txt").write_text("# touched\n")
    h3 = build.content_hash(spec, smoke, "linux/amd64")
    assert h3 != h2
    plan_file = repo_copy / "images" / "smoke" / "sources" / "megacpp_smoke_ext.json"
    plan_file.write_text(plan_file.read_text().replace('"pre_build": []', '"pre_build": ["true"]'))
    assert build.content_hash(spec, smoke, "linux/amd64") != h3


def test_tool_caches_are_not_build_inputs(repo_copy):
    """``ruff check megacpp_env`` writes megacpp_env/_project/.ruff_cache (that directory has its own
    pyproject.toml): the tag and the context must not change with it, nor with any other tool cache."""
    spec = load_spec(repo_copy / "stack.yaml")
    smoke = spec.target("smoke")
    before = build.content_hash(spec, smoke, "linux/amd64")
    for cache in (".ruff_cache", ".mypy_cache", ".pytest_cache", ".hypothesis", "__pycache__"):
        for where in ("megacpp_env/_project", "megacpp_env/lock", "overlays/smoke-ext/files"):
            junk = repo_copy / where / cache / "0.9" / "entry"
            junk.parent.mkdir(parents=True, exist_ok=True)
            junk.write_bytes(b"cache")
    assert build.content_hash(spec, smoke, "linux/amd64") == before
    assert not any(".ruff_cache" in rel for rel in build.context_files(spec, smoke, "linux/amd64"))


def test_the_cuda_toolchain_lock_is_a_build_input(repo_copy):
    spec = load_spec(repo_copy / "stack.yaml")
    cuda = spec.target("cuda_smoke")
    before = (build.content_hash(spec, cuda, "linux/amd64"), build.deps_digest(spec, cuda, "linux/amd64"))
    export = layout.toolchain_export_path(repo_copy, "cuda_smoke", "cuda", "linux/amd64")
    assert export.relative_to(repo_copy).as_posix() in build.context_files(spec, cuda, "linux/amd64")
    export.write_text(export.read_text() + "# touched\n")
    after = (build.content_hash(spec, cuda, "linux/amd64"), build.deps_digest(spec, cuda, "linux/amd64"))
    assert after[0] != before[0] and after[1] != before[1]


def test_preflight_refuses_stale_render_and_lock(repo_copy):
    spec = load_spec(repo_copy / "stack.yaml")
    assert build.preflight(spec, spec.target("smoke"), "linux/amd64") == []
    dockerfile = layout.dockerfile_path(repo_copy, "smoke")
    dockerfile.write_text(dockerfile.read_text() + "# edited by hand\n")
    layout.requirements_export_path(repo_copy, "smoke", "linux/amd64").unlink()
    problems = build.preflight(spec, spec.target("smoke"), "linux/amd64")
    assert problems[0] == "images/smoke/Dockerfile is stale (run `megacpp-env render smoke` and commit it)"
    assert problems[1].startswith("export-stale: smoke linux/amd64: locks/smoke.linux-amd64.requirements.txt does not exist")
    with pytest.raises(StaleError, match=r"^refusing to build: images/smoke/Dockerfile is stale"):
        build.refuse_if_stale(spec, spec.target("smoke"), "linux/amd64")


def test_dry_run_json(capsys):
    assert build_cmd.run(_args("smoke", json=True)) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["target"] == "smoke" and doc["platform"] == "linux/amd64" and doc["buildx"] is False
    assert doc["argv"][-1] == "." and doc["would_refuse"] == []


# ---- log parsing (a real BuildKit --progress=plain transcript, shortened) --------------------------

TRANSCRIPT = """\
#5 [toolchain 1/2] RUN --mount=type=secret,id=ca_bundle     apt-get update
#5 sha256:d4ef35b3715a86f61c70737f8c8e1b86b194bc99439794722e4556a5a5cfaf83
#5 CACHED

#9 [lock 2/2] RUN --mount=type=secret,id=ca_bundle     --mount=type=cache,target=/root/.cache/pip,id=megacpp-pip     /opt/venv/bin/pip install --require-hashes --no-deps -r /opt/megacpp-env/locks/smoke.linux-amd64.requirements.txt
#9 sha256:7eee7cd70d661a3e5642bcd655a8ddfc6cc4d843179021a740aa0feb7123a52b
#9 0.951 Collecting attrs==26.1.0 (from -r /opt/megacpp-env/locks/smoke.linux-amd64.requirements.txt (line 5))
#9 1.020 ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE. If you have updated the package versions, please update the hashes. Otherwise, examine the package contents carefully; someone may have tampered with them.
#9 1.020     attrs==26.1.0 from https://files.pythonhosted.org/packages/aa/bb/attrs-26.1.0-py3-none-any.whl#sha256=c647aa4a12dfbad9333ca4e71fe62ddc36f4e63b2d260a37a8b83d2f043ac309:
#9 1.020         Expected sha256 0000000000000000000000000000000000000000000000000000000000000000
#9 1.020              Got        c647aa4a12dfbad9333ca4e71fe62ddc36f4e63b2d260a37a8b83d2f043ac309
#9 1.021
#9 ERROR: executor failed running [/bin/bash -euo pipefail -c /opt/venv/bin/pip install --require-hashes]: exit code: 1
------
 > [lock 2/2] RUN ...:
------
"""


def test_build_log_names_the_failed_step_and_the_package():
    log = docker.BuildLog()
    for line in TRANSCRIPT.splitlines():
        log.feed(line)
    assert log.cached == {5}
    assert log.failed == 9
    assert log.failed_step().startswith("[lock 2/2] RUN --mount=type=secret,id=ca_bundle")
    assert log.executed() == [log.steps[9]]
    err = buildlog.failure(log, 1)
    assert err.package == "attrs==26.1.0"
    text = str(err).splitlines()
    assert text[0].startswith("docker build failed (exit 1) at step [lock 2/2] RUN --mount=type=secret,id=ca_bundle")
    assert text[1] == "error: exit code: 1"
    assert text[2] == "pip hash mismatch: attrs==26.1.0 (the lock no longer matches the artifact; re-lock or mirror)"
    assert text[-3].endswith("Expected sha256 " + "0" * 64)


def test_build_argv_classic_vs_buildx():
    req = docker.BuildRequest(dockerfile="images/x/Dockerfile", context=".", tag="t:1", platform="linux/amd64",
                              secrets=(("ca_bundle", "/ca.pem"),), network="host", iidfile="/tmp/iid")
    assert docker.build_argv(req) == [
        "docker", "build", "--progress=plain", "--platform", "linux/amd64", "-f", "images/x/Dockerfile", "-t", "t:1",
        "--network", "host", "--secret", "id=ca_bundle,src=/ca.pem", "--iidfile", "/tmp/iid", ".",
    ]
    assert docker.stdin_build_argv("t:1", "linux/arm64", {"a": "b"}) == [
        "docker", "build", "--progress=plain", "--platform", "linux/arm64", "-t", "t:1", "--label", "a=b", "-",
    ]


def test_docker_binary_prefers_usr_bin(monkeypatch):
    monkeypatch.delenv(docker.ENV_BINARY, raising=False)
    if Path(docker.PREFERRED).exists():
        assert docker.binary() == docker.PREFERRED
    monkeypatch.setenv(docker.ENV_BINARY, "/opt/other/docker")
    assert docker.binary() == "/opt/other/docker"
    assert docker.environ()["DOCKER_BUILDKIT"] == "1"


def test_every_target_and_platform_gets_its_own_base_platform_and_lock(spec):
    """One Dockerfile per target serves each of its platforms; the per-arch parts come from the spec."""
    for name, target in spec.targets.items():
        text = layout.dockerfile_path(spec.root, name).read_text()
        for platform in target.platforms:
            arch = platform.split("/")[1]
            plan = build.plan_build(spec, build.BuildOptions(target=name, platform=platform))
            assert plan.argv[plan.argv.index("--platform") + 1] == platform
            labels = _labels(plan.argv)
            assert labels["org.opencontainers.image.base.name"] == str(target.base_image(platform))
            assert labels["io.megacpp.env.platform"] == platform
            assert f"ARG BASE_IMAGE_{arch.upper()}={target.base_image(platform)}\n" in text
            assert f"FROM ${{BASE_IMAGE_{arch.upper()}}} AS base-{arch}\n" in text
            over = build.plan_build(spec, build.BuildOptions(target=name, platform=platform, base_image="b/x:1"))
            assert f"BASE_IMAGE_{arch.upper()}=b/x:1" in over.deps_argv and "BASE_IMAGE_" not in str(over.argv)
        if target.gpu:
            assert f'TORCH_CUDA_ARCH_LIST="{target.gpu.torch_cuda_arch_list}"' in text


def test_cli_parses_build_render_and_verify_image(capsys, monkeypatch):
    from megacpp_env.cli import main

    monkeypatch.chdir(REPO_ROOT)
    assert main(["build", "cloud", "--dry-run", "--cache-from", "a", "--cache-from", "b", "--network", "none"]) == 0
    out = capsys.readouterr().out
    assert "--network none" in out and "--cache-from a --cache-from b" in out
    assert main(["render", "--check"]) == 0
    assert main(["build", "gb10", "--platform", "linux/amd64", "--dry-run"]) == 1
    assert "not built for linux/amd64" in capsys.readouterr().err
    assert main(["verify-image"]) == 2


def test_cli_registry_flag_env_default_and_pin_base_parsing(capsys, monkeypatch):
    from megacpp_env.cli import main

    monkeypatch.chdir(REPO_ROOT)
    monkeypatch.delenv("MEGACPP_REGISTRY", raising=False)
    assert main(["build", "smoke", "--push", "--dry-run"]) == 1
    assert "names no registry, so it would go to Docker Hub" in capsys.readouterr().err
    monkeypatch.setenv("MEGACPP_REGISTRY", "127.0.0.1:5000")
    assert main(["build", "smoke", "--push", "--dry-run", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tag"].startswith("127.0.0.1:5000/megacpp/smoke:") and doc["cache_ref"].endswith(":cache-amd64")
    assert main(["build", "smoke", "--registry", "127.0.0.1:5001", "--dry-run", "--json"]) == 0  # the flag wins
    assert json.loads(capsys.readouterr().out)["tag"].startswith("127.0.0.1:5001/megacpp/smoke:")
    assert main(["pin-base", "smoke", "--check", "--platform", "linux/arm64"]) == 1  # unpinned: no registry asked
    out = capsys.readouterr().out
    line = load_spec(REPO_ROOT / "stack.yaml").line_of("targets.smoke.base_image.linux/arm64")
    assert out.startswith("unpinned: ") and out.endswith(
        f"stack.yaml:{line}: targets.smoke.base_image.linux/arm64: megacpp-base/debian-forky:arm64 has no @sha256 "
        "digest (remedy: `megacpp-env pin-base smoke`)\n")
    assert main(["pin-base", "smoke", "--platform", "linux/s390x"]) == 2  # a platform no target has: usage
    assert "linux/s390x" in capsys.readouterr().err
    assert main(["pin-base"]) == 2


@pytest.mark.parametrize(("option", "message"), [
    ("ca_bundle", "--ca-bundle {path}: no such file"),
    ("mirror", "--mirror {path}: not a directory"),
])
def test_missing_ca_bundle_or_mirror_is_refused_up_front(capsys, tmp_path, option, message):
    from megacpp_env.cli import main

    path = str(tmp_path / "nonexistent")
    flag = "--" + option.replace("_", "-")
    argv = ["--spec", str(REPO_ROOT / "stack.yaml"), "build", "gb10", flag, path, "--dry-run"]
    assert main(argv) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err == f"megacpp-env build: error: {message.format(path=path)}\n"
    assert main([*argv, "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == {"ok": False, "error": message.format(path=path)}


def test_build_json_prints_json_on_failure(capsys, monkeypatch):
    def boom(*a, **k):
        raise StaleError("refusing to build: images/gb10/Dockerfile is stale")

    from megacpp_env.cli import main

    monkeypatch.setattr(build_run, "refuse_if_stale", boom)
    monkeypatch.setattr(docker, "binary", lambda: "docker")
    assert main(["build", "gb10", "--json", "--spec", str(REPO_ROOT / "stack.yaml")]) == 1  # JSON on failure: cli.main
    out = capsys.readouterr()
    assert json.loads(out.out) == {"ok": False, "error": "refusing to build: images/gb10/Dockerfile is stale"}


def _fake_run_in_image(monkeypatch, rc, stdout="", stderr=""):
    import subprocess

    calls = []

    def fake(image, argv, **kw):
        calls.append(argv)
        return subprocess.CompletedProcess(argv, rc, stdout, stderr)

    monkeypatch.setattr(docker, "run_in_image", fake)
    return calls


def test_verify_image_snapshot_failure_is_a_tool_error_not_drift(capsys, monkeypatch):
    from megacpp_env.errors import ToolError

    calls = _fake_run_in_image(monkeypatch, build.SNAPSHOT_FAILED, stderr="Traceback\nboom: no python\n")
    with pytest.raises(ToolError) as exc:
        build.verify_image("img:1")
    assert str(exc.value) == "snapshot inside the image failed: Traceback | boom: no python"
    script = calls[0][-1]
    assert "megacpp-env snapshot" in script and "&&" not in script
    from megacpp_env.cli import main

    assert main(["verify-image", "img:1", "--json"]) == 1  # JSON on failure: one place, cli.main
    assert json.loads(capsys.readouterr().out) == {
        "ok": False, "error": "snapshot inside the image failed: Traceback | boom: no python",
    }


def test_verify_image_drift_is_reported_as_drift(capsys, monkeypatch):
    from megacpp_env.commands import verify_image as verify_cmd
    from megacpp_env.sbom import SbomCheck

    _fake_run_in_image(monkeypatch, 1, stdout='{"ok": false, "changes": []}\n')
    report = build.verify_image("img:1", as_json=True)
    assert not report.ok and report.output.startswith('{"ok": false')
    sbom = SbomCheck(image="img:1", source="/usr/share/megacpp-env/sbom.cdx.json", checked=3)
    monkeypatch.setattr(imagecheck, "check_image", lambda image, **kw: sbom)  # tests/test_sbom_docker.py: the real one
    assert verify_cmd.run(argparse.Namespace(image="img:1", platform="", json=True, sbom="")) == 1
    assert json.loads(capsys.readouterr().out) == {"ok": False, "changes": [], "sbom": sbom.to_dict()}


def test_docker_tests_fail_instead_of_skipping_under_ci(monkeypatch):
    from tests.fixtures.docker import skip_or_fail

    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"no Docker daemon \(run scripts/docker-up.sh\); CI is set"):
        skip_or_fail("no Docker daemon (run scripts/docker-up.sh)")
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception):
        skip_or_fail("no Docker daemon (run scripts/docker-up.sh)")


def test_a_build_looks_up_its_target_by_name_once(monkeypatch, capsys):
    """The plan holds the resolved target: the preflight (render, lock, artifacts), the base-image check
    and the run take it from there, so `build` asks the spec for the name exactly once."""
    from megacpp_env.cli import main
    from megacpp_env.spec.model import Spec

    looked_up = []
    lookup = Spec.target

    def counting(self, name):
        looked_up.append(name)
        return lookup(self, name)

    monkeypatch.setattr(Spec, "target", counting)
    monkeypatch.setattr(docker, "binary", lambda: "docker")
    argv = ["--spec", str(REPO_ROOT / "stack.yaml"), "build", "smoke", "--json"]
    assert main([*argv, "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["would_refuse"] == []
    assert looked_up == ["smoke"]

    looked_up.clear()
    ran = []

    def execute(plan, *, on_line=None):  # the docker steps; everything before them is real
        ran.append(plan)
        return build.BuildResult(plan=plan, image_id="sha256:0", snapshot_digest="d", seconds=0.0)

    monkeypatch.setattr(build_run, "execute", execute)  # where run_build finds it
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["image_id"] == "sha256:0"
    assert looked_up == ["smoke"] and ran[0].target is ran[0].spec.targets["smoke"]
