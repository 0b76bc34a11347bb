"""A second builder with an empty cache reuses the pushed deps cache (issue 22, item 4).

The shared daemon builds and pushes the smoke image (`build --registry R --push`: the image, its cache
image and the deps image's cache image). Then a second dockerd, started here with its own data root
(no image but the base, no build cache) and a bridge with no route out (no NAT), runs the same build:
every toolchain, lock and deps step is CACHED (imported from the registry) and no wheel is downloaded,
which the network proves too: that builder reaches no index at all. The shared daemon's cache is
never pruned. Real dockerd 20.10, no buildx.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from megacpp_env import build, buildcache, docker, publish, registry
from megacpp_env.buildlog import BuildFailedError
from megacpp_env.spec import load_spec
from tests.fixtures.docker import REPO_ROOT, ca_bundle
from tests.fixtures.dockerd2 import SMOKE_BASE

pytestmark = pytest.mark.docker

DEPS_STAGES = ("base-amd64", "toolchain", "lock", "deps")


def _builds(lines: list[str]) -> list[docker.BuildLog]:
    """The BuildKit logs of the docker builds in ``lines`` (each starts by loading its definition)."""
    logs: list[docker.BuildLog] = []
    for line in lines:
        if line.startswith("#1 [") and (not logs or max(logs[-1].steps, default=0) > 2):
            logs.append(docker.BuildLog())
        if logs:
            logs[-1].feed(line)
    return logs


def _stage(step: str) -> str:
    return step[1:].split(" ", 1)[0] if step.startswith("[") else ""


def _build(spec, tag: str, lines: list[str]) -> tuple[build.BuildResult, float]:
    """`build smoke --tag TAG --push` as the CLI runs it; the result and the wall time, push included."""
    start = time.monotonic()
    opts = build.BuildOptions(target="smoke", tag=tag, push=True, ca_bundle=ca_bundle())
    return build.execute(build.plan_build(spec, opts), on_line=lines.append), time.monotonic() - start


def _layers(ref: str) -> str:
    return docker.run([docker.binary(), "image", "inspect", "--format", "{{json .RootFS.Layers}}", ref]).stdout


def _no_route_out(host: str) -> None:
    """The second daemon's containers reach no index: a download would fail, not go unnoticed."""
    address = socket.getaddrinfo("pypi.org", 443, socket.AF_INET)[0][4][0]
    probe = f"exec 3<>/dev/tcp/{address}/443 && echo reached"
    env = {**os.environ, "DOCKER_HOST": host}
    proc = subprocess.run(
        [docker.binary(), "run", "--rm", SMOKE_BASE, "timeout", "5", "bash", "-c", probe],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert proc.returncode != 0 and "reached" not in proc.stdout, (proc.stdout, proc.stderr)


def _keep_log(name: str, lines: list[str]) -> None:
    log_dir = REPO_ROOT / ".megacpp" / "build-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / f"cache-{name}.log").write_text("\n".join(lines) + "\n")


def _control_without_the_deps_cache(spec, image_cache: str) -> None:
    """What a fresh builder did before: only the image's cache image imported, so the deps build has to
    run the toolchain steps, which fail here (no route out) instead of taking them from the registry."""
    lines: list[str] = []
    opts = build.BuildOptions(target="smoke", cache_from=(image_cache,), ca_bundle=ca_bundle())
    with pytest.raises(BuildFailedError) as exc:
        build.execute(build.plan_build(spec, opts), on_line=lines.append)
    _keep_log("control", lines)
    deps_log = _builds(lines)[0]
    assert deps_log.imports and not deps_log.cache_misses
    assert _stage(deps_log.failed_step()) == "toolchain", (deps_log.failed_step(), str(exc.value)[-300:])


def local_tags(tag: str) -> list[str]:
    """The tags a `build --tag TAG --push` leaves on the daemon: the image and its two cache images."""
    image_cache = publish.cache_ref(tag, "linux/amd64")
    return [tag, image_cache, buildcache.deps_ref(image_cache)]


@pytest.fixture
def unique_tag(registry_host) -> Iterator[str]:
    """A tag in a repository of its own; its local tags on the shared daemon are removed afterwards."""
    tag = f"{registry_host}/megacpp-test/cache-{uuid.uuid4().hex[:12]}:smoke"
    yield tag
    for ref in local_tags(tag):
        subprocess.run(
            [docker.binary(), "image", "rm", ref],
            capture_output=True,
            check=False,
            env={k: v for k, v in os.environ.items() if k != "DOCKER_HOST"},
        )


def test_second_builder_with_an_empty_cache_reuses_the_pushed_deps_cache(
    docker_daemon, smoke_source_server, second_daemon, unique_tag, monkeypatch
):
    spec = load_spec(REPO_ROOT / "stack.yaml")
    tag = unique_tag
    first_lines: list[str] = []
    first, first_wall = _build(spec, tag, first_lines)
    deps_layers = _layers(first.plan.deps_tag)
    pushed = first.pushed
    assert pushed is not None and pushed.deps_cache_ref == buildcache.deps_ref(pushed.cache_ref)
    deps_ref = registry.Reference.parse(pushed.deps_cache_ref)
    client = registry.Client()
    assert client.resolve(deps_ref).digest == pushed.deps_cache_digest
    _, manifest = client.manifest(deps_ref, pushed.deps_cache_digest)
    assert "moby.buildkit.cache.v0" in client.blob(deps_ref, manifest["config"]["digest"]).decode()

    monkeypatch.setenv("DOCKER_HOST", second_daemon)
    _no_route_out(second_daemon)
    cache = docker.run([docker.binary(), "system", "df", "-v", "--format", "{{json .BuildCache}}"]).stdout
    assert cache.strip() in ("null", "[]"), cache  # an empty build cache
    assert not docker.image_exists(first.plan.deps_tag) and not docker.image_exists(tag)
    _control_without_the_deps_cache(spec, pushed.cache_ref)
    lines: list[str] = []
    second, second_wall = _build(spec, tag, lines)
    _keep_log("second-builder", lines)
    deps_log, image_log = _builds(lines)[:2]
    assert set(deps_log.imports.values()) == {pushed.cache_ref, pushed.deps_cache_ref}
    assert pushed.deps_cache_ref not in deps_log.cache_misses
    deps_steps = {n: s for n, s in deps_log.instruction_steps.items() if _stage(s) in DEPS_STAGES}
    ran = [s for n, s in deps_steps.items() if n not in deps_log.cached and not re.match(r"\[[^\]]*\] FROM ", s)]
    assert ran == [] and deps_log.executed() == []  # every toolchain, lock and deps step CACHED
    assert any(_stage(s) == "toolchain" for s in deps_steps.values())
    assert not [line for line in lines if re.search(r"\b(Downloading|Collecting) \S", line)]  # pip fetched nothing
    assert not any(_stage(s) in DEPS_STAGES for s in image_log.executed())
    assert _layers(second.plan.deps_tag) == deps_layers  # the very layers the first builder pushed
    print(
        f"\nfirst builder: builds {first.seconds:.1f} s, wall {first_wall:.1f} s (shared daemon, its own cache); "
        f"second builder: builds {second.seconds:.1f} s, wall {second_wall:.1f} s (empty cache, the registry's); "
        f"second builder ran {len(second.executed)} steps: {second.executed}"
    )
