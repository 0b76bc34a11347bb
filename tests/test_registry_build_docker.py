"""`build --registry R --push` to the real loopback registry, pull by digest, and the inline build cache
imported from the registry by a builder whose own cache lost the layers (real dockerd 20.10, no buildx)."""

from __future__ import annotations

import argparse
import json
import re
import uuid

import pytest

from megacpp_env import build, docker, registry
from megacpp_env.commands import build as build_cmd
from megacpp_env.spec import load_spec
from tests.fixtures.docker import REPO_ROOT, ca_bundle
from tests.fixtures.registry import remove_if_untagged

pytestmark = pytest.mark.docker


def _args(**kw) -> argparse.Namespace:
    base = {"spec": str(REPO_ROOT / "stack.yaml"), "target": "smoke", "platform": "", "base_image": "", "tag": "",
            "registry": "", "push": False, "builder": "", "cache_from": [], "cache_to": [], "network": "",
            "ca_bundle": ca_bundle(), "mirror": "", "dry_run": False, "no_cache": False, "json": True,
            "skip_base_check": False, "source_from": [], "source_mirror": ""}
    return argparse.Namespace(**{**base, **kw})


def test_build_push_reports_the_digest_and_pull_by_digest_works(docker_daemon, smoke_source_server, registry_host,
                                                                 capsys):
    assert build_cmd.run(_args(registry=registry_host, push=True)) == 0
    doc = json.loads(capsys.readouterr().out)
    spec = load_spec(REPO_ROOT / "stack.yaml")
    content = build.content_hash(spec, spec.target("smoke"), "linux/amd64")
    tag = f"{registry_host}/megacpp/smoke:{content[:16]}"
    pushed = doc["pushed"]
    assert doc["tag"] == pushed["ref"] == tag
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", pushed["digest"])
    assert pushed["pull"] == f"{registry_host}/megacpp/smoke@{pushed['digest']}"
    assert pushed["cache_ref"] == f"{registry_host}/megacpp/smoke:cache-amd64"
    client, ref = registry.Client(), registry.Reference.parse(tag)
    assert client.resolve(ref).digest == pushed["digest"]  # the registry serves what the build reported
    _, manifest = client.manifest(ref, pushed["digest"])
    assert manifest["config"]["digest"] == doc["image_id"]
    cache = registry.Reference.parse(pushed["cache_ref"])
    assert client.resolve(cache).digest == pushed["cache_digest"]
    _, cache_manifest = client.manifest(cache, pushed["cache_digest"])
    # the image is the cached build plus the label step's one layer (the baked SBOM), which the cache predates
    assert [x["digest"] for x in cache_manifest["layers"]] == [x["digest"] for x in manifest["layers"]][:-1]
    cache_config = json.loads(client.blob(cache, cache_manifest["config"]["digest"]))
    assert "moby.buildkit.cache.v0" in cache_config  # the inline cache travels in the cache image
    _pull_by_digest(tag, pushed, doc)


def _pull_by_digest(tag: str, pushed: dict, doc: dict) -> None:
    """Drop the local tags so the image itself is gone, then pull it back by digest alone."""
    for ref in (tag, pushed["cache_ref"]):
        docker.remove_image(ref)
    assert not docker.image_exists(tag)
    # The same inputs give the same image: a plain `build smoke` earlier in the session (tests/test_build_docker.py)
    # or by someone else on this daemon may still tag it; only when nothing does can the image itself be gone.
    if not _other_tags(doc["image_id"]):
        assert not docker.image_exists(doc["image_id"])
    proc = docker.run(docker.pull_argv(pushed["pull"], docker=docker.binary()))
    assert f"Digest: {pushed['digest']}" in proc.stdout
    assert docker.image_id(pushed["pull"]) == doc["image_id"]
    assert docker.image_labels(pushed["pull"])[build.SNAPSHOT_LABEL] == doc["snapshot_digest"]
    docker.remove_image(pushed["pull"])


def _other_tags(image_id: str) -> list[str]:
    out = docker.run([docker.binary(), "image", "inspect", "--format", "{{json .RepoTags}}", image_id], check=False)
    return json.loads(out.stdout or "[]") if out.returncode == 0 else []


def _cache_records(nonce: str) -> list[str]:
    out = docker.run([docker.binary(), "system", "df", "-v", "--format", "{{json .BuildCache}}"]).stdout
    return [r["ID"] for r in json.loads(out or "[]") if nonce in r.get("Description", "")]


def _forget_locally(nonce: str, *refs: str) -> None:
    """This test's step leaves the local builder: its images and only the cache records naming the nonce."""
    for ref in refs:
        if ref.startswith("sha256:"):  # an image id: the unlabelled image of a build, removed only when untagged
            remove_if_untagged(ref)
        else:
            docker.remove_image(ref)
    records = _cache_records(nonce)
    assert records, "the probe step left no build-cache record"
    for record in records:
        docker.run([docker.binary(), "builder", "prune", "--force", "--filter", f"id={record}"])
    assert _cache_records(nonce) == []


def _build(spec, registry_host: str, lines: list[str], **options) -> build.BuildResult:
    opts = build.BuildOptions(target="smoke", registry=registry_host, ca_bundle=ca_bundle(), **options)
    return build.execute(build.plan_build(spec, opts), on_line=lines.append)


def test_inline_cache_is_imported_from_the_registry(docker_daemon, smoke_source_server, registry_host, repo_copy):
    """A probe step is built and pushed with its inline cache, then dropped from the local builder cache:
    a plain rebuild runs it again; a rebuild with --cache-from <cache image> takes it from the registry."""
    nonce = uuid.uuid4().hex
    dockerfile = repo_copy / "images" / "smoke" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + f"RUN echo {nonce} > /opt/megacpp-env/cache-probe\n")
    spec = load_spec(repo_copy / "stack.yaml")
    lines: list[str] = []
    first = _build(spec, registry_host, lines, push=True)
    assert first.pushed is not None
    probe = [s for s in first.executed if nonce in s]
    assert len(probe) == 1
    assert docker.image_id(first.plan.cache_ref) == first.build_image_id
    _forget_locally(nonce, first.plan.tag, first.plan.cache_ref)
    control = _build(spec, registry_host, lines)
    assert probe[0] in control.executed  # the local builder no longer has the step
    _forget_locally(nonce, control.plan.tag, control.build_image_id)
    lines.clear()
    cached = _build(spec, registry_host, lines, cache_from=(first.pushed.cache_ref,))
    assert _step_no(lines, f"importing cache manifest from {first.pushed.cache_ref}") > 0
    assert probe[0] not in cached.executed and cached.executed == ()
    assert docker.run_in_image(cached.plan.tag, ["cat", "/opt/megacpp-env/cache-probe"]).stdout == f"{nonce}\n"
    docker.remove_image(cached.plan.tag)
    remove_if_untagged(cached.build_image_id)


def _step_no(lines: list[str], text: str) -> int:
    for line in lines:
        if (m := re.match(r"^#(\d+) (.*)$", line)) and m[2].strip() == text:
            return int(m[1])
    return -1
