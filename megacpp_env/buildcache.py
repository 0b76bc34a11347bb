"""The registry build cache of the two-phase classic build (dockerd 20.10, no buildx). Never prints.

The classic ``docker build`` has no ``--cache-to``: a build can only embed its cache in the image it
makes (``BUILDKIT_INLINE_CACHE=1``), and only for that image's own steps. A build is two images (the
``deps`` image: toolchain and locked dependencies; then the image built FROM it), so ``--push`` sends
two cache images next to the image, both derived from its tag (see ``publish.cache_ref``):

* ``<repository>:cache-<arch>``: the image's build (source stages and image steps);
* ``<repository>:cache-<arch>-deps``: the deps build (every toolchain and lock step).

A ``--push`` build imports both (``--cache-from``) in both builds, so a builder whose own cache is
empty (a fresh CI runner, a second daemon) takes every step the registry has from it; a cache image
that is not there yet (the first push) is only a cache miss (see ``docker.BuildLog.cache_misses``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from megacpp_env import docker, publish

DEPS_SUFFIX = "-deps"


def deps_ref(cache_ref: str) -> str:
    """The deps build's cache image beside the image's cache image ``cache_ref``."""
    return f"{cache_ref}{DEPS_SUFFIX}" if cache_ref else ""


def refs(cache_ref: str) -> tuple[str, ...]:
    """Both cache images of a pushed build (none when ``cache_ref`` is empty)."""
    return (cache_ref, deps_ref(cache_ref)) if cache_ref else ()


def importing(
    deps: docker.BuildRequest, final: docker.BuildRequest, cache_ref: str
) -> tuple[docker.BuildRequest, docker.BuildRequest]:
    """``deps`` and ``final`` with ``--cache-from`` both cache images of ``cache_ref`` added (after the
    user's own, without duplicates); unchanged when there is no cache image or the build ignores caches."""
    if not cache_ref or final.no_cache:
        return deps, final
    wanted = refs(cache_ref)
    return (
        replace(deps, cache_from=tuple(dict.fromkeys((*deps.cache_from, *wanted[::-1])))),
        replace(final, cache_from=tuple(dict.fromkeys((*final.cache_from, *wanted)))),
    )


def notes(deps_tag: str, cache_ref: str, docker_bin: str) -> list[str]:
    """What ``build --dry-run`` says the deps cache image adds to a classic ``--push``."""
    if not cache_ref:
        return []
    return [
        f"then: {docker_bin} tag {deps_tag} {deps_ref(cache_ref)} (the deps image, with its inline cache)",
        f"then: {docker_bin} push {deps_ref(cache_ref)} (before the image)",
    ]


def tag_deps(deps_tag: str, cache_ref: str) -> None:
    """Tag the deps image as the deps cache image (its config carries the deps build's inline cache)."""
    if cache_ref:
        docker.tag_image(deps_tag, deps_ref(cache_ref))


def push(tag: str, cache_ref: str, *, on_line: Callable[[str], None] | None = None) -> publish.Pushed:
    """Push the deps cache image (when ``cache_ref``), then the image's cache image and the image
    (``publish.push``); each digest as the registry gave it."""
    if not cache_ref:
        return publish.push(tag, cache_ref, on_line=on_line)
    deps_digest = docker.push(deps_ref(cache_ref), on_line=on_line)
    pushed = publish.push(tag, cache_ref, on_line=on_line)
    return replace(pushed, deps_cache_ref=deps_ref(cache_ref), deps_cache_digest=deps_digest)
