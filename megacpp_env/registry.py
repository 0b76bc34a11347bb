"""The one client of the container registry HTTP API v2 (OCI distribution spec). Never prints.

* ``Reference.parse`` splits ``[host[:port]/]path[:tag][@sha256:...]`` the way Docker does (a first
  component with ``.`` or ``:``, or ``localhost``, is a registry; otherwise Docker Hub, with
  ``library/`` for one-component names).
* ``Client.resolve`` asks which manifest a tag (or digest) names: ``HEAD /v2/<repo>/manifests/<ref>``
  with an ``Accept`` header listing OCI index, Docker manifest list, Docker manifest v2 and OCI
  manifest, and reads ``Docker-Content-Digest``; when a registry leaves the header out it falls back
  to a GET and hashes the body.
* ``Client.platforms`` says which platforms a digest serves: the entries of an index / manifest list,
  or, for a single manifest, the ``os``/``architecture``/``variant`` of its config blob. Every manifest
  and blob read is checked against its digest.

Loopback registries (127.0.0.0/8, ``localhost``, ``::1``) are spoken to over plain HTTP, like dockerd's
default insecure range; every other registry over HTTPS (``SSL_CERT_FILE`` is honoured). Anonymous
bearer tokens (Docker Hub's ``WWW-Authenticate: Bearer realm=...``) are fetched; no credentials are
read, so private repositories answer "needs credentials".
"""

from __future__ import annotations

import ipaddress
import json
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from megacpp_env.errors import ToolError
from megacpp_env.fsutil import sha256_bytes

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MANIFEST_TYPES = (OCI_INDEX, DOCKER_LIST, DOCKER_MANIFEST, OCI_MANIFEST)
INDEX_TYPES = frozenset((OCI_INDEX, DOCKER_LIST))
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
MAX_MANIFEST = 4 << 20
MAX_CONFIG = 16 << 20

_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_PATH_RE = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*$")
_HOST_RE = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\])(?::[0-9]{1,5})?$")
_CHALLENGE_RE = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(ToolError):
    """A registry could not be reached, refused the request, or answered something inconsistent."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Reference:
    registry: str  # host[:port] as written; "docker.io" for Docker Hub
    repository: str  # path inside the registry ("library/debian" on Docker Hub)
    tag: str = ""
    digest: str = ""

    @classmethod
    def parse(cls, ref: str) -> Reference:
        rest, _, digest = ref.partition("@")
        name, tag = rest, ""
        if ":" in rest.rsplit("/", 1)[-1]:
            name, _, tag = rest.rpartition(":")
        first, sep, remainder = name.partition("/")
        if sep and ("." in first or ":" in first or first == "localhost"):
            registry, path = first, remainder
        else:
            registry, path = DOCKER_HUB, name
        if registry in ("index.docker.io", "registry-1.docker.io"):
            registry = DOCKER_HUB
        if registry == DOCKER_HUB and "/" not in path:
            path = f"library/{path}"
        bad_host = not _HOST_RE.match(registry)
        if (
            bad_host
            or not _PATH_RE.match(path)
            or (tag and not _TAG_RE.match(tag))
            or (digest and not _DIGEST_RE.match(digest))
        ):
            raise RegistryError(
                f"invalid image reference {ref!r} (expected [host[:port]/]name[:tag][@sha256:<64 hex>])"
            )
        return cls(registry=registry, repository=path, tag=tag, digest=digest)

    @property
    def name(self) -> str:
        """``registry/repository`` as Docker writes it (Docker Hub names without the host)."""
        if self.registry == DOCKER_HUB:
            return self.repository.removeprefix("library/")
        return f"{self.registry}/{self.repository}"

    @property
    def api_host(self) -> str:
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def scheme(self) -> str:
        return "http" if is_loopback(self.registry) else "https"

    def with_digest(self, digest: str) -> Reference:
        return Reference(registry=self.registry, repository=self.repository, tag=self.tag, digest=digest)

    def __str__(self) -> str:
        return self.name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def is_loopback(registry: str) -> bool:
    """``127.0.0.0/8``, ``[::1]`` or ``localhost``, with or without a port (IPv6 hosts are bracketed)."""
    host = registry[1:].partition("]")[0] if registry.startswith("[") else registry.partition(":")[0]
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, kw_only=True, slots=True)
class Descriptor:
    digest: str
    media_type: str
    size: int

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES

    def to_dict(self) -> dict[str, Any]:
        return {"digest": self.digest, "media_type": self.media_type, "size": self.size}


@dataclass(frozen=True, kw_only=True, slots=True)
class Served:
    """One platform a digest serves, and the manifest that serves it."""

    platform: str  # os/architecture[/variant]
    manifest: str  # the platform manifest's digest (the digest itself for a single manifest)

    def matches(self, wanted: str) -> bool:
        """``linux/arm64`` matches ``linux/arm64/v8``; a variant in ``wanted`` must match exactly."""
        return self.platform == wanted or (wanted.count("/") == 1 and self.platform.startswith(wanted + "/"))


@dataclass(kw_only=True, slots=True)
class Client:
    timeout: float = 30.0
    tokens: dict[str, str] = field(default_factory=dict)  # "registry repository" -> bearer token

    def resolve(self, ref: Reference) -> Descriptor:
        """The manifest ``ref`` names now (its tag, or its digest when it has no tag)."""
        target = ref.tag or ref.digest
        if not target:
            raise RegistryError(f"{ref}: neither a tag nor a digest to resolve")
        status, headers, _ = self._request("HEAD", ref, f"manifests/{target}", MANIFEST_TYPES)
        if status == 404:
            raise RegistryError(f"{ref}: not found in {ref.registry} (HEAD manifests/{target}: 404)")
        digest = headers.get("docker-content-digest", "")
        media_type = headers.get("content-type", "").split(";")[0].strip()
        size = int(headers.get("content-length") or 0)
        if not _DIGEST_RE.match(digest):  # some registries omit the header on HEAD: hash the body
            body, media_type = self._manifest_bytes(ref, target)
            digest, size = f"sha256:{sha256_bytes(body)}", len(body)
        if ref.digest and not ref.tag and digest != ref.digest:
            raise RegistryError(f"{ref}: the registry answered {digest} for digest {ref.digest}")
        return Descriptor(digest=digest, media_type=media_type, size=size)

    def manifest(self, ref: Reference, digest: str) -> tuple[str, dict[str, Any]]:
        """(media type, document) of the manifest ``digest``, checked against the digest."""
        body, media_type = self._manifest_bytes(ref, digest)
        if f"sha256:{sha256_bytes(body)}" != digest:
            raise RegistryError(f"{ref.name}@{digest}: the manifest the registry sent does not hash to its digest")
        doc = _json(body, f"{ref.name}@{digest}")
        return media_type or str(doc.get("mediaType", "")), doc

    def blob(self, ref: Reference, digest: str, *, limit: int = MAX_CONFIG) -> bytes:
        status, _, body = self._request("GET", ref, f"blobs/{digest}", (), limit=limit)
        if status == 404:
            raise RegistryError(f"{ref.name}: blob {digest} not found")
        if f"sha256:{sha256_bytes(body)}" != digest:
            raise RegistryError(f"{ref.name}: blob {digest} does not hash to its digest")
        return body

    def platforms(self, ref: Reference, digest: str) -> tuple[Served, ...]:
        media_type, doc = self.manifest(ref, digest)
        if media_type in INDEX_TYPES or "manifests" in doc:
            return tuple(
                Served(platform=_platform_of(entry.get("platform") or {}), manifest=str(entry.get("digest", "")))
                for entry in doc.get("manifests", [])
                if (entry.get("platform") or {}).get("os") not in (None, "unknown")  # attestations
            )
        config_digest = str((doc.get("config") or {}).get("digest", ""))
        if not _DIGEST_RE.match(config_digest):
            raise RegistryError(f"{ref.name}@{digest}: the manifest names no config blob")
        config = _json(self.blob(ref, config_digest), f"{ref.name} config {config_digest}")
        return (Served(platform=_platform_of(config), manifest=digest),)

    # ---- HTTP -------------------------------------------------------------------------------

    def _manifest_bytes(self, ref: Reference, target: str) -> tuple[bytes, str]:
        status, headers, body = self._request("GET", ref, f"manifests/{target}", MANIFEST_TYPES, limit=MAX_MANIFEST)
        if status == 404:
            raise RegistryError(f"{ref.name}: manifest {target} not found in {ref.registry}")
        return body, headers.get("content-type", "").split(";")[0].strip()

    def _request(
        self, method: str, ref: Reference, path: str, accept: tuple[str, ...], *, limit: int = 0
    ) -> tuple[int, dict[str, str], bytes]:
        url = f"{ref.scheme}://{ref.api_host}/v2/{ref.repository}/{path}"
        key = f"{ref.registry} {ref.repository}"
        for attempt in range(2):
            status, headers, body = self._http(method, url, accept, self.tokens.get(key, ""), limit)
            if status != 401 or attempt:
                break
            self.tokens[key] = self._token(ref, headers.get("www-authenticate", ""))
        if status == 401:
            raise RegistryError(f"{ref.name}: not found, or private (the registry refused an anonymous token)")
        if status >= 400 and status != 404:
            raise RegistryError(f"{method} {url}: HTTP {status}: {body[:200].decode('utf-8', 'replace').strip()}")
        return status, headers, body

    def _token(self, ref: Reference, challenge: str) -> str:
        scheme, _, params = challenge.partition(" ")
        if scheme.lower() != "bearer":
            raise RegistryError(
                f"{ref.name}: {ref.registry} needs credentials ({scheme or 'no'} auth); megacpp-env reads none, "
                "so only public repositories and open registries can be resolved"
            )
        fields = dict(_CHALLENGE_RE.findall(params))
        realm = fields.pop("realm", "")
        if not realm.startswith(("https://", "http://")):
            raise RegistryError(f"{ref.name}: bad bearer challenge {challenge!r}")
        fields.setdefault("scope", f"repository:{ref.repository}:pull")
        status, _, body = self._http("GET", f"{realm}?{urllib.parse.urlencode(fields)}", (), "", 1 << 20)
        if status != 200:
            raise RegistryError(f"{ref.name}: token request to {realm} failed: HTTP {status}")
        doc = _json(body, f"token from {realm}")
        token = str(doc.get("token") or doc.get("access_token") or "")
        if not token:
            raise RegistryError(f"{ref.name}: {realm} sent no token")
        return token

    def _http(
        self, method: str, url: str, accept: tuple[str, ...], token: str, limit: int
    ) -> tuple[int, dict[str, str], bytes]:
        req = urllib.request.Request(url, method=method)  # noqa: S310 - the scheme is http(s), built above
        if accept:
            req.add_header("Accept", ", ".join(accept))
        if token:  # unredirected: a blob redirect to a CDN must not carry the registry's token
            req.add_unredirected_header("Authorization", f"Bearer {token}")
        context = ssl.create_default_context() if url.startswith("https://") else None
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=context) as resp:  # noqa: S310
                return resp.status, _lower(resp.headers), _read(resp, limit, url)
        except urllib.error.HTTPError as exc:
            return exc.code, _lower(exc.headers), _read(exc, 4096, url)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryError(f"{method} {url}: cannot reach the registry: {reason}") from None


def _lower(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in (headers or {}).items()}


def _read(resp: Any, limit: int, url: str) -> bytes:
    if not limit:
        return b""
    body: bytes = resp.read(limit + 1)
    if len(body) > limit:
        raise RegistryError(f"GET {url}: answer larger than {limit} bytes")
    return body


def _json(body: bytes, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise RegistryError(f"{what}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise RegistryError(f"{what}: not a JSON object")
    return doc


def _platform_of(doc: dict[str, Any]) -> str:
    parts = [str(doc.get("os", "")), str(doc.get("architecture", ""))]
    if doc.get("variant"):
        parts.append(str(doc["variant"]))
    return "/".join(parts)
