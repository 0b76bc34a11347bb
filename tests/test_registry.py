"""megacpp_env/registry.py: reference parsing, and the v2 API against a real registry on loopback
(the bearer-token flow through a small token-auth front that forwards to it).

The documents are real: the smoke base is pushed with `docker push`; the OCI index and the Docker
manifest list are written to the registry through its API and read back by the client.
"""

from __future__ import annotations

import json

import pytest

from megacpp_env import docker, registry
from megacpp_env.registry import Client, Reference, RegistryError
from tests.fixtures.registry import (
    get_manifest,
    http,
    mount_blob,
    put_blob,
    put_manifest,
    registry_env,
    registry_script,
)

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(("text", "registry_host", "repository", "tag", "digest"), [
    ("nvidia/cuda:13.2.0-cudnn-devel-ubuntu24.04", "docker.io", "nvidia/cuda", "13.2.0-cudnn-devel-ubuntu24.04", ""),
    ("debian", "docker.io", "library/debian", "", ""),
    ("docker.io/library/debian:bookworm", "docker.io", "library/debian", "bookworm", ""),
    ("index.docker.io/x/y:1", "docker.io", "x/y", "1", ""),
    ("127.0.0.1:5000/megacpp-base/debian-forky:amd64", "127.0.0.1:5000", "megacpp-base/debian-forky", "amd64", ""),
    (f"localhost/a/b@{DIGEST}", "localhost", "a/b", "", DIGEST),
    (f"ghcr.io/o/r:t@{DIGEST}", "ghcr.io", "o/r", "t", DIGEST),
    ("[::1]:5000/x:1", "[::1]:5000", "x", "1", ""),
])
def test_reference_parse(text, registry_host, repository, tag, digest):
    ref = Reference.parse(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (registry_host, repository, tag, digest)
    assert str(Reference.parse(str(ref))) == str(ref)


def test_reference_names_hosts_and_schemes():
    hub = Reference.parse("debian:12")
    assert (hub.name, hub.api_host, hub.scheme) == ("debian", "registry-1.docker.io", "https")
    local = Reference.parse("127.0.0.1:5000/a:1")
    assert (local.name, local.api_host, local.scheme) == ("127.0.0.1:5000/a", "127.0.0.1:5000", "http")
    assert Reference.parse("ghcr.io/o/r:1").scheme == "https"


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1:5000", True), ("127.9.9.9", True), ("localhost:1", True), ("[::1]:5000", True),
    ("10.0.0.1:5000", False), ("registry.example", False), ("localhost.example:5000", False),
])
def test_is_loopback(host, loopback):
    assert registry.is_loopback(host) is loopback


@pytest.mark.parametrize("text", ["UPPER/case:1", "a:b:c/d", f"x@sha256:{'z' * 64}", "x:" + "t" * 129, "a//b:1"])
def test_reference_parse_rejects(text):
    with pytest.raises(RegistryError, match="invalid image reference"):
        Reference.parse(text)


def test_unreachable_registry_is_a_clear_error():
    with pytest.raises(RegistryError, match=r"^HEAD http://127\.0\.0\.1:9/v2/x/manifests/1: cannot reach the registry"):
        Client(deadline=5).resolve(Reference.parse("127.0.0.1:9/x:1"))


# ---- against the real registry -------------------------------------------------------------------

@pytest.mark.docker
def test_registry_up_is_idempotent_and_stops(tmp_path):
    from megacpp_env.pipmirror import free_port

    port = free_port()
    env = registry_env(port, tmp_path / "reg")
    try:
        first = registry_script(env)
        assert first.returncode == 0, first.stderr
        assert first.stdout == f"127.0.0.1:{port}\n"
        assert "starting /usr/bin/docker-registry" in first.stderr
        status, headers, _ = http("GET", f"http://127.0.0.1:{port}/v2/")
        assert status == 200 and headers["Docker-Distribution-Api-Version"] == "registry/2.0"
        again = registry_script(env)
        assert again.returncode == 0 and f"a registry already answers on 127.0.0.1:{port}" in again.stderr
        assert (tmp_path / "reg" / "config.yml").read_text().count(f"addr: 127.0.0.1:{port}") == 1
    finally:
        stop = registry_script(env, "--stop")
    assert stop.returncode == 0 and "stopped the registry" in stop.stderr
    assert not (tmp_path / "reg" / "registry.pid").exists()
    with pytest.raises(RegistryError, match="cannot reach the registry"):
        Client(deadline=5).resolve(Reference.parse(f"127.0.0.1:{port}/x:1"))


@pytest.mark.docker
def test_dockerd_allows_plain_http_to_loopback(docker_daemon):
    """dockerd 20.10's default insecure range, which lets `docker push` talk HTTP to 127.0.0.1."""
    out = docker.run([docker.binary(), "info", "--format", "{{json .RegistryConfig.InsecureRegistryCIDRs}}"]).stdout
    assert "127.0.0.0/8" in json.loads(out)


@pytest.mark.docker
def test_script_rejects_a_port_where_something_else_answers(tmp_path):
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        proc = registry_script(registry_env(server.server_address[1], tmp_path / "reg"))
    finally:
        server.shutdown()
        server.server_close()
    assert proc.returncode == 1
    assert "answers but is not an open registry" in proc.stderr and "choose another MEGACPP_REGISTRY_PORT" in proc.stderr


@pytest.mark.docker
def test_resolve_the_pushed_base(pushed_base):
    client = Client()
    ref = Reference.parse(pushed_base.ref)
    desc = client.resolve(ref)
    assert desc.digest == pushed_base.digest
    assert desc.media_type == registry.DOCKER_MANIFEST and not desc.is_index
    served = client.platforms(ref, desc.digest)
    assert [(s.platform, s.manifest) for s in served] == [("linux/amd64", pushed_base.digest)]
    media_type, doc = client.manifest(ref, desc.digest)
    assert media_type == registry.DOCKER_MANIFEST
    assert doc["config"]["digest"] == docker.image_id(pushed_base.ref)  # the registry holds this very image
    by_digest = client.resolve(Reference.parse(f"{ref.name}@{desc.digest}"))
    assert by_digest.digest == desc.digest
    with pytest.raises(RegistryError, match=r": not found in 127\.0\.0\.1:\d+ \(HEAD manifests/no-such-tag: 404\)"):
        client.resolve(Reference.parse(f"{ref.name}:no-such-tag"))


def _multi_platform_repo(host: str, base_repo: str, base_digest: str, repo: str) -> tuple[str, str]:
    """Copy the base manifest into ``repo`` and add an arm64/v8 sibling; return both manifest digests."""
    base = get_manifest(host, base_repo, base_digest, registry.DOCKER_MANIFEST)
    for blob in [base["config"], *base["layers"]]:
        mount_blob(host, repo, blob["digest"], base_repo)
    amd64 = put_manifest(host, repo, "amd64", base, registry.DOCKER_MANIFEST)
    config = {"architecture": "arm64", "variant": "v8", "os": "linux",
              "rootfs": {"type": "layers", "diff_ids": ["sha256:" + "0" * 64]}}
    raw = json.dumps(config).encode()
    arm = {**base, "config": {**base["config"], "digest": put_blob(host, repo, raw), "size": len(raw)}}
    return amd64, put_manifest(host, repo, "arm64", arm, registry.DOCKER_MANIFEST)


def _index(media_type: str, children: list[tuple[str, dict]]) -> dict:
    return {"schemaVersion": 2, "mediaType": media_type, "manifests": [
        {"mediaType": registry.DOCKER_MANIFEST if media_type == registry.DOCKER_LIST else registry.OCI_MANIFEST,
         "digest": d, "size": 0, "platform": p} for d, p in children]}


@pytest.mark.docker
@pytest.mark.parametrize("media_type", [registry.OCI_INDEX, registry.DOCKER_LIST])
def test_resolve_an_index_and_its_platforms(pushed_base, registry_host, media_type):
    repo = f"megacpp-test/multi-{media_type.rsplit('.', 2)[-2].replace('+', '-')}"
    base_repo = pushed_base.repository.split("/", 1)[1]
    amd64, arm64 = _multi_platform_repo(registry_host, base_repo, pushed_base.digest, repo)
    sizes = {d: int(http("HEAD", f"http://{registry_host}/v2/{repo}/manifests/{d}")[1]["Content-Length"])
             for d in (amd64, arm64)}
    doc = _index(media_type, [(amd64, {"os": "linux", "architecture": "amd64"}),
                              (arm64, {"os": "linux", "architecture": "arm64", "variant": "v8"}),
                              (amd64, {"os": "unknown", "architecture": "unknown"})])  # an attestation entry
    for entry in doc["manifests"]:
        entry["size"] = sizes[entry["digest"]]
    index = put_manifest(registry_host, repo, "multi", doc, media_type)
    client = Client()
    ref = Reference.parse(f"{registry_host}/{repo}:multi")
    desc = client.resolve(ref)
    assert (desc.digest, desc.media_type, desc.is_index) == (index, media_type, True)
    served = client.platforms(ref, desc.digest)
    assert [(s.platform, s.manifest) for s in served] == [("linux/amd64", amd64), ("linux/arm64/v8", arm64)]
    assert served[1].matches("linux/arm64") and not served[1].matches("linux/arm64/v7")
    arm_ref = Reference.parse(f"{registry_host}/{repo}:arm64")
    assert [s.platform for s in client.platforms(arm_ref, arm64)] == ["linux/arm64/v8"]  # from the config blob


class _AuthProxy:
    """A token-auth front for the real registry, the way Docker Hub answers: 401 + a Bearer challenge,
    a token endpoint, then the registry's own answers (optionally without Docker-Content-Digest)."""

    def __init__(self, upstream: str, *, scheme: str = "Bearer", drop_digest: bool = False) -> None:
        import http.server
        import threading
        import urllib.request

        proxy = self
        self.token_queries: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                return

            def do_GET(self):
                self._serve()

            def do_HEAD(self):
                self._serve()

            def _serve(self):
                if self.path.startswith("/token?"):
                    proxy.token_queries.append(self.path.split("?", 1)[1])
                    self._send(200, {"Content-Type": "application/json"}, b'{"token": "t0k"}')
                    return
                if self.headers.get("Authorization") != "Bearer t0k":
                    realm = f"http://127.0.0.1:{self.server.server_address[1]}/token"
                    challenge = (f'Bearer realm="{realm}",service="test-registry"' if scheme == "Bearer"
                                 else 'Basic realm="private"')
                    self._send(401, {"WWW-Authenticate": challenge}, b"{}")
                    return
                req = urllib.request.Request(f"http://{upstream}{self.path}", method=self.command,
                                             headers={"Accept": self.headers.get("Accept", "")})
                with urllib.request.urlopen(req, timeout=30) as resp:
                    headers = {k: v for k, v in resp.headers.items()
                               if not (drop_digest and k.lower() == "docker-content-digest")}
                    self._send(resp.status, headers, resp.read())

            def _send(self, status, headers, body):
                self.send_response(status)
                for key, value in headers.items():
                    if key.lower() not in ("connection", "transfer-encoding"):
                        self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.docker
@pytest.mark.parametrize("drop_digest", [False, True], ids=["digest-header", "no-digest-header"])
def test_anonymous_bearer_token_and_a_missing_digest_header(pushed_base, drop_digest):
    proxy = _AuthProxy(pushed_base.ref.split("/", 1)[0], drop_digest=drop_digest)
    try:
        client = Client()
        ref = Reference.parse(f"{proxy.host}/{pushed_base.ref.split('/', 1)[1]}")
        desc = client.resolve(ref)
        assert desc.digest == pushed_base.digest  # without the header: the body's sha256
        assert [s.platform for s in client.platforms(ref, desc.digest)] == ["linux/amd64"]
        assert proxy.token_queries == ["service=test-registry&scope=repository%3Amegacpp-base%2Fdebian-forky%3Apull"]
    finally:
        proxy.close()


@pytest.mark.docker
def test_a_registry_that_wants_credentials_is_named(pushed_base):
    proxy = _AuthProxy(pushed_base.ref.split("/", 1)[0], scheme="Basic")
    try:
        ref = Reference.parse(f"{proxy.host}/{pushed_base.ref.split('/', 1)[1]}")
        with pytest.raises(RegistryError) as exc:
            Client(credentials=lambda registry: None).resolve(ref)
    finally:
        proxy.close()
    assert str(exc.value) == (f"{ref.name}: {proxy.host} needs credentials (basic auth) and none are stored for it "
                              f"(remedy: `docker login {proxy.host}`; megacpp-env reads ~/.docker/config.json)")
