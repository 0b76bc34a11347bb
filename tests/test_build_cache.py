"""buildcache: a classic `build --push` sends the deps image's inline cache too and imports both cache
images; a build without --push, without a registry, or with --no-cache is planned as before.

No daemon here; tests/test_build_cache_docker.py runs a second builder with an empty cache for real.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from megacpp_env import build, buildcache, docker, publish
from megacpp_env.spec import load_spec

REPO_ROOT = Path(__file__).resolve().parent.parent
REG = "127.0.0.1:5000"


@pytest.fixture(scope="module")
def spec():
    return load_spec(REPO_ROOT / "stack.yaml")


def _cache_from(argv) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == "--cache-from"]


def test_push_imports_both_cache_images_in_both_builds(spec):
    plan = build.plan_build(spec, build.BuildOptions(target="smoke", push=True, registry=REG))
    image, deps = f"{REG}/megacpp/smoke:cache-amd64", f"{REG}/megacpp/smoke:cache-amd64-deps"
    assert plan.cache_ref == image and buildcache.deps_ref(plan.cache_ref) == deps
    assert _cache_from(plan.deps_argv) == [deps, image]
    assert _cache_from(plan.argv) == [image, deps]
    for argv in (plan.deps_argv, plan.argv):  # each build embeds its cache in the image it makes
        assert "--build-arg BUILDKIT_INLINE_CACHE=1" in shlex.join(argv)
    assert plan.notes[-2:] == (
        f"then: docker tag {plan.deps_tag} {deps} (the deps image, with its inline cache)",
        f"then: docker push {deps} (before the image)",
    )
    assert plan.to_dict()["cache_ref"] == image


def test_user_cache_refs_come_first_without_duplicates(spec):
    mine = f"{REG}/megacpp/smoke:cache-amd64"
    plan = build.plan_build(
        spec, build.BuildOptions(target="smoke", push=True, registry=REG, cache_from=("other/cache:x", mine))
    )
    assert _cache_from(plan.argv) == ["other/cache:x", mine, f"{mine}-deps"]
    assert _cache_from(plan.deps_argv) == ["other/cache:x", mine, f"{mine}-deps"]


@pytest.mark.parametrize(
    "options",
    [
        {},  # no registry, no push
        {"registry": REG},  # a registry, no push
        {"cache_from": ("a/b:c",)},  # the user's own cache, no push
    ],
)
def test_without_push_nothing_changes(spec, options):
    plan = build.plan_build(spec, build.BuildOptions(target="smoke", **options))
    assert plan.cache_ref == ""
    assert _cache_from(plan.argv) == _cache_from(plan.deps_argv) == list(options.get("cache_from", ()))
    assert not any("-deps (" in n for n in plan.notes)
    if not options.get("cache_from"):
        assert "BUILDKIT_INLINE_CACHE" not in shlex.join(plan.deps_argv)


def test_no_cache_and_buildx_import_nothing_of_their_own(spec):
    plan = build.plan_build(spec, build.BuildOptions(target="smoke", push=True, registry=REG, no_cache=True))
    assert plan.cache_ref and _cache_from(plan.argv) == _cache_from(plan.deps_argv) == []
    remote = build.plan_build(
        spec,
        build.BuildOptions(target="smoke", push=True, registry=REG, builder="bk", cache_to=("type=registry,ref=x",)),
    )
    assert remote.cache_ref == "" and _cache_from(remote.argv) == []
    assert not any("-deps" in n for n in remote.notes)


def test_pushed_reports_the_deps_cache():
    pushed = publish.Pushed(
        ref=f"{REG}/megacpp/smoke:1",
        digest="sha256:" + "a" * 64,
        cache_ref=f"{REG}/megacpp/smoke:cache-amd64",
        cache_digest="sha256:" + "b" * 64,
        deps_cache_ref=f"{REG}/megacpp/smoke:cache-amd64-deps",
        deps_cache_digest="sha256:" + "c" * 64,
    )
    doc = pushed.to_dict()
    assert doc["deps_cache_ref"].endswith(":cache-amd64-deps") and doc["deps_cache_digest"].endswith("c" * 64)
    assert buildcache.refs("") == () and buildcache.deps_ref("") == ""


MISS = """\
#5 importing cache manifest from 127.0.0.1:5000/megacpp/smoke:cache-amd64-deps
#5 sha256:85a998f0efc7dd04ee900fd3237ed53288f39b792d4d4f264308983fac84c9c4
#5 ERROR: 127.0.0.1:5000/megacpp/smoke:cache-amd64-deps: not found

#6 [toolchain 1/3] RUN apt-get update
#6 sha256:aefb703ae795e220a1897cd29e2146e883fd784f905a3d9b20d2d6f35d0e66b7
#6 ERROR: executor failed running [/bin/sh -c apt-get update]: exit code: 100
"""


def test_a_missing_cache_image_is_a_miss_not_the_failed_step():
    """The first push imports cache images that are not there yet: BuildKit says ERROR and goes on."""
    log = docker.BuildLog()
    for line in MISS.splitlines():
        log.feed(line)
    assert log.cache_misses == {
        f"{REG}/megacpp/smoke:cache-amd64-deps": f"{REG}/megacpp/smoke:cache-amd64-deps: not found"
    }
    assert log.failed == 6 and log.failed_step() == "[toolchain 1/3] RUN apt-get update"
