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
default insecure range; every other registry over HTTPS (``SSL_CERT_FILE`` is honoured). Every request
goes through ``netio`` (one total deadline, bounded answers, one-line errors for whatever a faulty
server sends), and every document is checked for shape before it is used.

Authentication: on a 401, a ``Bearer`` challenge gets a token from its realm (anonymously, or with
the credentials ``docker login`` stored: ``dockerauth``); a ``Basic`` challenge is answered with the
stored credentials. Credentials go only to the registry and to an https (or loopback) token realm,
never to a redirect's target, and never into a message.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from megacpp_env import dockerauth, netio
from megacpp_env.errors import ToolError
from megacpp_env.fsutil import sha256_bytes
from megacpp_env.records import Record, json_object

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
_TOKEN_RE = re.compile(r"^[\x21-\x7e]{1,16384}$")  # printable ASCII, no space: it goes into a header
_PLATFORM_PART_RE = re.compile(r"^[A-Za-z0-9._-]{0,64}$")


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
class Descriptor(Record):
    digest: str
    media_type: str
    size: int

    @property
    def is_index(self) -> bool:
        return self.media_type in INDEX_TYPES


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
    deadline: float = field(default_factory=lambda: netio.deadline_s(120.0))  # seconds per request
    tokens: dict[str, str] = field(default_factory=dict)  # "registry repository" -> Authorization value
    credentials: Callable[[str], dockerauth.Credentials | None] = field(default_factory=lambda: dockerauth.load)
    _creds: dict[str, dockerauth.Credentials | None] = field(default_factory=dict)

    def resolve(self, ref: Reference) -> Descriptor:
        """The manifest ``ref`` names now (its tag, or its digest when it has no tag)."""
        target = ref.tag or ref.digest
        if not target:
            raise RegistryError(f"{ref}: neither a tag nor a digest to resolve")
        status, headers, _ = self._request("HEAD", ref, f"manifests/{target}", MANIFEST_TYPES)
        if status == 404:
            raise RegistryError(f"{ref}: not found in {ref.registry} (HEAD manifests/{target}: 404)")
        digest = headers.get("docker-content-digest", "")
        media_type = _media_type(headers)
        size = _content_length(headers)
        if not _DIGEST_RE.match(digest) or size is None:  # no header on HEAD, or a bad one: hash the body
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
        declared = doc.get("mediaType", "")
        return media_type or (declared if isinstance(declared, str) else ""), doc

    def blob(self, ref: Reference, digest: str, *, limit: int = MAX_CONFIG) -> bytes:
        status, _, body = self._request("GET", ref, f"blobs/{digest}", (), limit=limit)
        if status == 404:
            raise RegistryError(f"{ref.name}: blob {digest} not found")
        if f"sha256:{sha256_bytes(body)}" != digest:
            raise RegistryError(f"{ref.name}: blob {digest} does not hash to its digest")
        return body

    def platforms(self, ref: Reference, digest: str) -> tuple[Served, ...]:
        media_type, doc = self.manifest(ref, digest)
        where = f"{ref.name}@{digest}"
        if media_type in INDEX_TYPES or "manifests" in doc:
            served = (_served(entry, where, n) for n, entry in enumerate(_list(doc, "manifests", where)))
            return tuple(s for s in served if s is not None)
        config = doc.get("config")
        config_digest = config.get("digest") if isinstance(config, dict) else None
        if not isinstance(config_digest, str) or not _DIGEST_RE.match(config_digest):
            raise RegistryError(f"{where}: the manifest names no config blob (media type {media_type or 'none'})")
        config_doc = _json(self.blob(ref, config_digest), f"{ref.name} config {config_digest}")
        return (Served(platform=_platform_of(config_doc, f"{ref.name} config {config_digest}"), manifest=digest),)

    # ---- HTTP -------------------------------------------------------------------------------

    def _manifest_bytes(self, ref: Reference, target: str) -> tuple[bytes, str]:
        status, headers, body = self._request("GET", ref, f"manifests/{target}", MANIFEST_TYPES, limit=MAX_MANIFEST)
        if status == 404:
            raise RegistryError(f"{ref.name}: manifest {target} not found in {ref.registry}")
        return body, _media_type(headers)

    def _request(
        self, method: str, ref: Reference, path: str, accept: tuple[str, ...], *, limit: int = 0
    ) -> tuple[int, dict[str, str], bytes]:
        url = f"{ref.scheme}://{ref.api_host}/v2/{ref.repository}/{path}"
        key = f"{ref.registry} {ref.repository}"
        for attempt in range(2):
            status, headers, body = self._http(method, url, accept, self.tokens.get(key, ""), limit)
            if status != 401 or attempt:
                break
            self.tokens[key] = self._authorize(ref, headers.get("www-authenticate", ""))
        if status == 401:
            creds = self._creds.get(ref.registry)
            if creds is not None:
                raise RegistryError(f"{ref.name}: {ref.registry} refused the credentials from {creds.source}")
            raise RegistryError(
                f"{ref.name}: not found, or private (the registry refused an anonymous token; "
                f"remedy: `docker login {ref.registry}` if it needs credentials)"
            )
        if status >= 400 and status != 404:
            text = netio.printable(body[:200].decode("utf-8", "replace").strip())
            raise RegistryError(f"{method} {url}: HTTP {status}: {text}")
        return status, headers, body

    def _credentials(self, registry: str) -> dockerauth.Credentials | None:
        if registry not in self._creds:
            try:
                self._creds[registry] = self.credentials(registry)
            except dockerauth.CredentialsError as exc:  # a RegistryError, so callers name the spec key
                raise RegistryError(f"{registry}: cannot read its credentials: {exc}") from None
        return self._creds[registry]

    def _authorize(self, ref: Reference, challenge: str) -> str:
        """The ``Authorization`` value to retry with after a 401 carrying ``challenge``."""
        scheme, _, params = challenge.strip().partition(" ")
        creds = self._credentials(ref.registry)
        if scheme.lower() == "basic":
            if creds is None or creds.identity_token:
                raise RegistryError(
                    f"{ref.name}: {ref.registry} needs credentials (basic auth) and none are stored for it "
                    f"(remedy: `docker login {ref.registry}`; megacpp-env reads ~/.docker/config.json)"
                )
            return creds.basic()
        if scheme.lower() != "bearer":
            raise RegistryError(
                f"{ref.name}: {ref.registry} asks for {netio.printable(scheme[:40]) or 'no'} auth, "
                "which megacpp-env does not speak (it speaks bearer tokens and basic auth)"
            )
        return "Bearer " + self._token(ref, challenge, params, creds)

    def _token(self, ref: Reference, challenge: str, params: str, creds: dockerauth.Credentials | None) -> str:
        fields = dict(_CHALLENGE_RE.findall(params))
        realm = fields.pop("realm", "")
        if not realm.startswith(("https://", "http://")) or not realm.isprintable() or " " in realm:
            raise RegistryError(f"{ref.name}: bad bearer challenge {netio.printable(challenge[:200])!r}")
        fields.setdefault("scope", f"repository:{ref.repository}:pull")
        if creds is not None and not (realm.startswith("https://") or is_loopback(_host_of(realm))):
            raise RegistryError(
                f"{ref.name}: the token service {netio.printable(realm)} is plain http; "
                "refusing to send the stored credentials to it"
            )
        query = urllib.parse.urlencode(fields)
        if creds is not None and creds.identity_token:
            form = {**fields, "grant_type": "refresh_token", "refresh_token": creds.secret, "client_id": "megacpp-env"}
            req = netio.Request(url=realm, method="POST", data=urllib.parse.urlencode(form).encode(), limit=1 << 20,
                                deadline=self.deadline)  # fmt: skip
        else:
            auth = {"Authorization": creds.basic()} if creds is not None else {}
            req = netio.Request(url=f"{realm}?{query}", unredirected=auth, limit=1 << 20, deadline=self.deadline)
        resp = self._fetch(req)
        if resp.status != 200:
            realm_text = netio.printable(realm)
            if creds is not None:
                raise RegistryError(
                    f"{ref.name}: token request to {realm_text} with the credentials from {creds.source} "
                    f"failed: HTTP {resp.status}"
                )
            raise RegistryError(
                f"{ref.name}: anonymous token request to {realm_text} failed: HTTP {resp.status} "
                f"(remedy: `docker login {ref.registry}` if it needs credentials)"
            )
        doc = _json(resp.body, f"token from {netio.printable(realm)}")
        token = doc.get("token") or doc.get("access_token") or ""
        if not isinstance(token, str) or not _TOKEN_RE.match(token):
            raise RegistryError(f"{ref.name}: {netio.printable(realm)} sent no usable token")
        return token

    def _http(
        self, method: str, url: str, accept: tuple[str, ...], authorization: str, limit: int
    ) -> tuple[int, dict[str, str], bytes]:
        headers = {"Accept": ", ".join(accept)} if accept else {}
        # unredirected: a blob redirect to a CDN must not carry the registry's token
        auth = {"Authorization": authorization} if authorization else {}
        resp = self._fetch(
            netio.Request(
                url=url, method=method, headers=headers, unredirected=auth, limit=limit, deadline=self.deadline
            )
        )
        return resp.status, resp.headers, resp.body

    @staticmethod
    def _fetch(req: netio.Request) -> netio.Response:
        try:
            return netio.fetch(req)
        except netio.NetError as exc:
            raise RegistryError(f"{exc.what}: cannot reach the registry: {exc.detail}") from None


def _host_of(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc.rpartition("@")[2]


def _media_type(headers: dict[str, str]) -> str:
    value = headers.get("content-type", "").split(";")[0].strip()
    return value if value.isprintable() and len(value) < 256 else ""


def _content_length(headers: dict[str, str]) -> int | None:
    raw = headers.get("content-length", "").strip()
    return int(raw) if raw.isdigit() and len(raw) < 16 else None


def _list(doc: dict[str, Any], key: str, where: str) -> list[Any]:
    value = doc.get(key)
    if not isinstance(value, list):
        raise RegistryError(f"{where}: {key}: expected a list, got {type(value).__name__}")
    return value


def _served(entry: Any, where: str, n: int) -> Served | None:
    """One entry of an index; None for an attestation (no platform, or ``os: unknown``)."""
    at = f"{where}: manifests[{n}]"
    if not isinstance(entry, dict):
        raise RegistryError(f"{at}: expected an object, got {type(entry).__name__}")
    digest = entry.get("digest")
    if not isinstance(digest, str) or not _DIGEST_RE.match(digest):
        raise RegistryError(f"{at}.digest: expected sha256:<64 hex>")
    platform = entry.get("platform")
    if platform is None:
        platform = {}
    if not isinstance(platform, dict):
        raise RegistryError(f"{at}.platform: expected an object, got {type(platform).__name__}")
    if platform.get("os") in (None, "unknown"):
        return None
    return Served(platform=_platform_of(platform, f"{at}.platform"), manifest=digest)


def _json(body: bytes, what: str) -> dict[str, Any]:
    return json_object(body, what, RegistryError)


def _platform_of(doc: dict[str, Any], where: str) -> str:
    parts = [doc.get("os", ""), doc.get("architecture", "")]
    if doc.get("variant"):
        parts.append(doc["variant"])
    if not all(isinstance(p, str) and _PLATFORM_PART_RE.match(p) for p in parts):
        raise RegistryError(f"{where}: os/architecture/variant must be short names")
    return "/".join(parts)
