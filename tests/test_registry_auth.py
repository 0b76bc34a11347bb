"""Registry credentials (issue 22, item 3): ``dockerauth`` reads them the way Docker does, and
``registry.Client`` answers basic and bearer challenges with them; ``pin-base`` works against a real
registry (Debian's docker-registry) with htpasswd auth on loopback. No secret reaches a message."""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import warnings
from pathlib import Path

import pytest

from megacpp_env import dockerauth
from megacpp_env.dockerauth import CredentialsError
from megacpp_env.registry import Client, Reference, RegistryError
from tests.fixtures.faultyhttp import manifest_answer, response, serve, unauthorized

SECRET = "s3cret-Pw-4b1d"
INDEX = "application/vnd.oci.image.index.v1+json"
DOC = {"schemaVersion": 2, "mediaType": INDEX, "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + "a" * 64, "size": 1,
     "platform": {"os": "linux", "architecture": "arm64"}}]}  # fmt: skip


def _config(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "docker" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _helper(tmp_path: Path, name: str, body: str) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / f"docker-credential-{name}"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return bindir


# ---- reading the Docker config -------------------------------------------------------------------


def test_auths_in_every_form(tmp_path):
    auth = base64.b64encode(f"alice:{SECRET}".encode()).decode()
    path = _config(tmp_path, {"auths": {
        "127.0.0.1:5001": {"auth": auth},
        "https://reg.example:443": {"username": "bob", "password": SECRET},
        "https://index.docker.io/v1/": {"identitytoken": "refresh-" + SECRET},
    }})  # fmt: skip
    alice = dockerauth.load("127.0.0.1:5001", path=path)
    assert (alice.username, alice.secret, alice.identity_token) == ("alice", SECRET, False)
    assert SECRET not in repr(alice) and alice.basic() == "Basic " + auth
    assert dockerauth.load("reg.example:443", path=path).username == "bob"
    hub = dockerauth.load("docker.io", path=path)
    assert hub.identity_token and hub.secret == "refresh-" + SECRET
    assert dockerauth.load("other.example", path=path) is None
    assert dockerauth.load("x", path=tmp_path / "none.json") is None


def test_the_default_path_follows_docker_config(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "d"))
    assert dockerauth.config_path() == tmp_path / "d" / "config.json"


def test_cred_helpers_and_the_store(tmp_path, monkeypatch):
    asked = tmp_path / "asked"
    bindir = _helper(tmp_path, "mine", f'cat > {asked}; echo \'{{"Username": "u", "Secret": "{SECRET}"}}\'')
    _helper(tmp_path, "empty", 'echo "credentials not found in native keychain"; exit 1')
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    path = _config(tmp_path, {"credHelpers": {"127.0.0.1:5001": "mine"}, "credsStore": "empty",
                              "auths": {"127.0.0.1:5002": {"auth": base64.b64encode(b"z:y").decode()}}})  # fmt: skip
    creds = dockerauth.load("127.0.0.1:5001", path=path)
    assert (creds.username, creds.secret, creds.source) == ("u", SECRET, "docker-credential-mine")
    assert asked.read_text() == "127.0.0.1:5001"  # the helper is asked for the registry on stdin
    assert dockerauth.load("127.0.0.1:5002", path=path).username == "z"  # the store has none: auths
    assert dockerauth.load("127.0.0.1:5003", path=path) is None


@pytest.mark.parametrize("name", ["../../bin/sh", "/bin/sh", "a b", "", "-x", "x;touch PWNED", 5])
def test_a_helper_named_by_a_path_is_refused(tmp_path, name):
    path = _config(tmp_path, {"credHelpers": {"h:1": name}})
    with pytest.raises(CredentialsError, match=r"credHelpers\.h:1: a credential helper must be a plain name"):
        dockerauth.load("h:1", path=path)
    path = _config(tmp_path, {"credsStore": name})
    with pytest.raises(CredentialsError, match="credsStore: a credential helper must be a plain name"):
        dockerauth.load("h:1", path=path)


def test_a_failing_helper_never_shows_its_output(tmp_path, monkeypatch):
    bindir = _helper(tmp_path, "leaky", f'echo "oops {SECRET}"; echo "{SECRET}" >&2; exit 3')
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    path = _config(tmp_path, {"credsStore": "leaky"})
    with pytest.raises(CredentialsError) as exc:
        dockerauth.load("h:1", path=path)
    assert str(exc.value) == "docker-credential-leaky get failed (exit 3) for h:1" and SECRET not in str(exc.value)


@pytest.mark.parametrize(("doc", "message"), [
    ('{"a":' * 100000, "nested too deeply"),
    ("[1]", "expected a JSON object"),
    ("{not json", "not JSON"),
    ({"auths": []}, "auths: expected an object"),
    ({"auths": {"h:1": {"auth": "!!" + SECRET}}}, "auths.h:1.auth: not base64 of 'user:password'"),
    ({"credHelpers": {"h:1": "absent-helper-x"}}, "docker-credential-absent-helper-x is not on PATH"),
])
def test_a_bad_config_is_one_line_without_the_secret(tmp_path, doc, message):
    path = _config(tmp_path, doc)
    with pytest.raises(CredentialsError) as exc:
        dockerauth.load("h:1", path=path)
    assert message in str(exc.value) and SECRET not in str(exc.value) and "\n" not in str(exc.value)


# ---- the client answering challenges ----------------------------------------------------------------


def _protected(scheme: str, good: str):
    """A registry serving DOC only with ``Authorization: good``; its token endpoint wants basic creds."""
    tokens: list[str] = []

    def make(host):
        def responder(method, path, head):
            header = next((line.split(":", 1)[1].strip() for line in head.split("\r\n")
                           if line.lower().startswith("authorization:")), "")  # fmt: skip
            if path.startswith("/token"):
                tokens.append(header)
                if header != good:
                    return response(401, {}, b"denied")
                return response(200, {"Content-Type": "application/json"}, b'{"token": "tok-1"}')
            want = "Bearer tok-1" if scheme == "Bearer" else good
            if header != want:
                challenge = f'Bearer realm="http://{host}/token",service="s"' if scheme == "Bearer" else 'Basic realm="r"'
                return unauthorized(challenge)
            return manifest_answer(json.dumps(DOC).encode(), INDEX, head=method == "HEAD")

        return responder

    return make, tokens


@pytest.mark.parametrize("scheme", ["Basic", "Bearer"])
def test_the_client_answers_a_challenge_with_the_stored_credentials(tmp_path, scheme):
    good = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
    make, tokens = _protected(scheme, good)
    with serve(lambda m, p, h: b"") as server:
        server.responder = make(server.host)
        path = _config(tmp_path, {"auths": {server.host: {"auth": good.split()[1]}}})
        client = Client(deadline=10, credentials=lambda registry: dockerauth.load(registry, path=path))
        ref = Reference.parse(f"{server.host}/x/y:1")
        desc = client.resolve(ref)
        assert [s.platform for s in client.platforms(ref, desc.digest)] == ["linux/arm64"]
        if scheme == "Bearer":
            assert tokens and set(tokens) == {good}

        wrong = _config(tmp_path / "w", {"auths": {server.host: {"auth": base64.b64encode(b"alice:nope").decode()}}})
        with pytest.raises(RegistryError) as exc:
            Client(deadline=10, credentials=lambda registry: dockerauth.load(registry, path=wrong)).resolve(ref)
        assert "nope" not in str(exc.value) and SECRET not in str(exc.value)
        assert str(wrong) in str(exc.value)  # it names where the refused credentials came from
        with pytest.raises(RegistryError, match="docker login"):
            Client(deadline=10, credentials=lambda registry: None).resolve(ref)


def test_credentials_never_go_to_a_plain_http_realm_elsewhere(tmp_path):
    def responder(method, path, head):
        return unauthorized('Bearer realm="http://token.example.invalid/t",service="s"')

    with serve(responder) as server:
        path = _config(tmp_path, {"auths": {server.host: {"auth": base64.b64encode(f"a:{SECRET}".encode()).decode()}}})
        client = Client(deadline=10, credentials=lambda registry: dockerauth.load(registry, path=path))
        with pytest.raises(RegistryError, match="is plain http; refusing to send the stored credentials"):
            client.resolve(Reference.parse(f"{server.host}/x/y:1"))


# ---- pin-base against docker-registry with htpasswd auth ---------------------------------------------


def _bcrypt(password: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

    return crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))


def _call(method, url, auth, data=b"", content_type=""):
    req = urllib.request.Request(url, data=data or None, method=method)
    req.add_header("Authorization", auth)
    if content_type:
        req.add_header("Content-Type", content_type)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def _push(host, repo, tag, auth):
    import hashlib

    def blob(data):
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        status, headers, _ = _call("POST", f"http://{host}/v2/{repo}/blobs/uploads/", auth)
        assert status == 202, status
        location = headers["Location"]
        url = location if location.startswith("http") else f"http://{host}{location}"
        sep = "&" if "?" in url else "?"
        status, _, body = _call("PUT", f"{url}{sep}digest={digest}", auth, data, "application/octet-stream")
        assert status == 201, body
        return digest, len(data)

    config = json.dumps({"os": "linux", "architecture": "arm64", "rootfs": {"type": "layers", "diff_ids": []}}).encode()
    cdigest, csize = blob(config)
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cdigest, "size": csize},
                "layers": []}  # fmt: skip
    status, headers, body = _call("PUT", f"http://{host}/v2/{repo}/manifests/{tag}", auth,
                                  json.dumps(manifest).encode(), manifest["mediaType"])  # fmt: skip
    assert status == 201, body
    return headers["Docker-Content-Digest"]


@pytest.fixture
def auth_registry(tmp_path):
    """A second docker-registry, htpasswd auth (bcrypt), on a free loopback port; stopped at the end."""
    binary = shutil.which("docker-registry") or "/usr/bin/docker-registry"
    if not Path(binary).exists():
        pytest.skip("docker-registry is not installed (scripts/registry-up.sh installs it)")
    from megacpp_env.pipmirror import free_port

    port = free_port()
    root = tmp_path / "authreg"
    (root / "data").mkdir(parents=True)
    (root / "htpasswd").write_text(f"alice:{_bcrypt(SECRET)}\n")
    (root / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {root / 'data'}\nhttp:\n  addr: 127.0.0.1:{port}\n"
        f"auth:\n  htpasswd:\n    realm: megacpp-test\n    path: {root / 'htpasswd'}\n"
    )
    log = (root / "registry.log").open("wb")
    proc = subprocess.Popen([binary, "serve", str(root / "config.yml")], stdout=log, stderr=subprocess.STDOUT)
    host = f"127.0.0.1:{port}"
    try:
        for _ in range(150):
            try:
                urllib.request.urlopen(f"http://{host}/v2/", timeout=2)
            except urllib.error.HTTPError as exc:
                if exc.code == 401:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail(f"docker-registry did not answer: {(root / 'registry.log').read_text()[-500:]}")
        yield host
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_pin_base_against_a_registry_with_htpasswd_auth(auth_registry, tmp_path, capsys, monkeypatch):
    from megacpp_env.cli import dispatch
    from megacpp_env.spec import load_spec
    from tests.test_pinning import _pin_args, _spec_file

    host = auth_registry
    good = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
    digest = _push(host, "megacpp/cuda", "13.2", good)
    cuda = "nvidia/cuda:13.2.0-cudnn-devel-ubuntu24.04"
    repo = tmp_path / "repo"
    repo.mkdir()
    path = _spec_file(repo, f"    base_image: {cuda}\n", f"    base_image: {host}/megacpp/cuda:13.2\n")
    line = load_spec(path).lines["targets.gb10.base_image"]

    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "none"))  # no credentials: a clear error
    assert dispatch(argparse.Namespace(verb="pin-base", **vars(_pin_args(path, "gb10", json=True)))) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error.startswith(f"{path}:{line}: targets.gb10.base_image: {host}/megacpp/cuda: {host} needs credentials")

    config = _config(tmp_path, {"auths": {host: {"auth": good.split()[1]}}})
    monkeypatch.setenv("DOCKER_CONFIG", str(config.parent))
    assert dispatch(argparse.Namespace(verb="pin-base", **vars(_pin_args(path, "gb10", json=True)))) == 0
    out = capsys.readouterr().out
    assert SECRET not in out and good.split()[1] not in out
    assert f"    base_image: {host}/megacpp/cuda:13.2@{digest}\n" in path.read_text()
    assert dispatch(argparse.Namespace(verb="pin-base", **vars(_pin_args(path, "gb10", check=True)))) == 0
    capsys.readouterr()


def test_an_unusable_config_is_a_registry_error_naming_the_registry(tmp_path):
    path = _config(tmp_path, {"credsStore": "../x"})
    with serve(lambda m, p, h: unauthorized('Basic realm="r"')) as server:
        client = Client(deadline=10, credentials=lambda registry: dockerauth.load(registry, path=path))
        with pytest.raises(RegistryError, match=rf"^{server.host}: cannot read its credentials: .*credsStore: a "):
            client.resolve(Reference.parse(f"{server.host}/x/y:1"))
