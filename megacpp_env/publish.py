"""The registry side of a build. Never prints.

* ``image_tag``: where ``build --registry R --push`` sends an image: ``R/megacpp/<target>:<content tag>``.
* ``cache_ref``: the build-cache image pushed next to it, ``<repository>:cache-<arch>``. The classic
  ``docker build`` (dockerd 20.10, no buildx) has no ``--cache-to``; it can only embed an inline cache
  (``BUILDKIT_INLINE_CACHE=1``) in the image it builds. The metadata-only step that adds the snapshot
  label afterwards writes a new image config without that cache, so the build's own image is tagged
  and pushed as the cache before the label step; ``--cache-from <cache ref>`` then re-uses its layers
  on any builder.
* ``push``: ``docker push`` both, reading the digest the registry gave each.

Before a build, ``pinning.refuse_if_base_moved`` checks the pinned base images.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from megacpp_env import docker
from megacpp_env.errors import RefusedError
from megacpp_env.layout import platform_arch


def image_tag(registry_host: str, target: str, content_hash: str) -> str:
    """``megacpp/<target>:<first 16 hex of the content hash>``, under ``registry_host`` when given."""
    tag = f"megacpp/{target}:{content_hash[:16]}"
    return f"{registry_host.rstrip('/')}/{tag}" if registry_host else tag


def cache_ref(tag: str, platform: str) -> str:
    from megacpp_env.registry import Reference

    return f"{Reference.parse(tag).name}:cache-{platform_arch(platform)}"


def check_push_target(tag: str, registry_host: str, explicit_tag: bool) -> None:
    """``--push`` of the default ``megacpp/...`` tag without ``--registry`` would go to Docker Hub."""
    if not registry_host and not explicit_tag:
        raise RefusedError(
            f"--push: {tag} names no registry, so it would go to Docker Hub "
            "(remedy: --registry HOST[:PORT] or $MEGACPP_REGISTRY, e.g. the loopback one of "
            "scripts/registry-up.sh, or a --tag that names where to push)"
        )
    if registry_host and ("/" in registry_host.strip("/") or "@" in registry_host):
        raise RefusedError(f"--registry {registry_host!r}: expected HOST[:PORT]")


@dataclass(frozen=True, kw_only=True, slots=True)
class Pushed:
    ref: str
    digest: str
    cache_ref: str = ""
    cache_digest: str = ""
    deps_cache_ref: str = ""  # the deps build's cache image (see ``buildcache``)
    deps_cache_digest: str = ""

    @property
    def pull_ref(self) -> str:
        """``repository@digest``: what ``docker pull`` / ``FROM`` use to get exactly this image."""
        from megacpp_env.registry import Reference

        return f"{Reference.parse(self.ref).name}@{self.digest}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "digest": self.digest,
            "pull": self.pull_ref,
            "cache_ref": self.cache_ref,
            "cache_digest": self.cache_digest,
            "deps_cache_ref": self.deps_cache_ref,
            "deps_cache_digest": self.deps_cache_digest,
        }


def push(tag: str, cache: str, *, on_line: Callable[[str], None] | None = None) -> Pushed:
    """Push the build cache image (when ``cache``) and then the image; each digest as the registry gave it."""
    cache_digest = docker.push(cache, on_line=on_line) if cache else ""
    return Pushed(ref=tag, digest=docker.push(tag, on_line=on_line), cache_ref=cache, cache_digest=cache_digest)
