"""registry.Client and netio against a faulty registry on 127.0.0.1 (issue 19, items 4 and 5): every
answer a broken or hostile server can give is one RegistryError line, never a traceback, and a
server that trickles bytes is cut off at the request's total deadline."""

from __future__ import annotations

import json
import time

import pytest

from megacpp_env import netio
from megacpp_env.registry import Client, Reference, RegistryError
from tests.fixtures.faultyhttp import manifest_answer, nested, response, serve, trickle, unauthorized

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def _token_then(answer):
    """A registry that wants a bearer token, whose token endpoint answers ``answer``."""

    def responder(method, path, head):
        if path.startswith("/token"):
            return answer
        return unauthorized('Bearer realm="http://127.0.0.1:1/token",service="x"')

    return responder


def _realm(realm: str):
    def responder(method, path, head):
        return unauthorized(f'Bearer realm="{realm}",service="x"')

    return responder


def _always(answer):
    return lambda method, path, head: answer


def _manifest(doc, media_type=INDEX):
    """HEAD without a digest header (so the body is fetched and hashed), GET the document."""

    def responder(method, path, head):
        if method == "HEAD":
            return response(200, {"Content-Type": media_type}, b"")
        return manifest_answer(doc, media_type)

    return responder


CASES = {
    "bad-status-line": _always(b"HTTP/1.1 abc nonsense\r\n\r\n"),
    "garbage-status-line": _always(b"\x00\x01garbage\r\n\r\n"),
    "header-over-64k": _always(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n"),
    "over-100-headers": _always(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(150)) + b"\r\n"),
    "content-length-abc": _always(response(200, {"Content-Length": "abc", "Content-Type": INDEX}, b"")),
    "realm-with-space": _realm("http://127.0.0.1:1/to ken"),
    "realm-with-del": _realm("http://127.0.0.1:1/to\x7fken"),
    "realm-not-http": _realm("file:///etc/passwd"),
    "crlf-in-token": None,  # filled below: needs the server's own port for the realm
    "token-not-json": None,
    "manifests-a-string": _manifest({"manifests": "x"}),
    "manifest-entry-a-list": _manifest({"manifests": [[1, 2]]}),
    "platform-a-string": _manifest({"manifests": [{"digest": "sha256:" + "a" * 64, "platform": "linux"}]}),
    "config-a-list": _manifest({"config": [1]}, MANIFEST),
    "manifest-a-list": _manifest([1, 2, 3]),
    "deep-nesting": _manifest(nested(100000)),
    "not-json": _manifest(b"\xff\xfe{"),
    "http-500-binary": _always(response(500, {}, b"\x1b[31mred\r\nX: y")),
}


def _token_case(token_body: bytes):
    def make(host):
        def responder(method, path, head):
            if path.startswith("/token"):
                return response(200, {"Content-Type": "application/json"}, token_body)
            return unauthorized(f'Bearer realm="http://{host}/token",service="x"')

        return responder

    return make


TOKEN_CASES = {
    "crlf-in-token": _token_case(json.dumps({"token": "abc\r\nX-Evil: 1"}).encode()),
    "token-not-json": _token_case(b"{" * 5000),
    "token-not-a-string": _token_case(b'{"token": ["a"]}'),
}


def _run(responder_or_factory, *, factory=False, deadline=10.0):
    with serve(lambda m, p, h: b"") as server:
        server.responder = responder_or_factory(server.host) if factory else responder_or_factory
        client = Client(deadline=deadline, credentials=lambda registry: None)
        ref = Reference.parse(f"{server.host}/x/y:1")
        desc = client.resolve(ref)
        client.platforms(ref, desc.digest)


@pytest.mark.parametrize("case", [k for k, v in CASES.items() if v is not None])
def test_a_faulty_registry_is_one_line(case):
    with pytest.raises(RegistryError) as exc:
        _run(CASES[case])
    assert "\n" not in str(exc.value) and "\r" not in str(exc.value)


@pytest.mark.parametrize("case", list(TOKEN_CASES))
def test_a_faulty_token_service_is_one_line(case):
    with pytest.raises(RegistryError) as exc:
        _run(TOKEN_CASES[case], factory=True)
    assert "\n" not in str(exc.value) and "\r" not in str(exc.value)


def test_realm_with_a_space_is_refused_before_any_request():
    with pytest.raises(RegistryError, match="bad bearer challenge"):
        _run(CASES["realm-with-space"])


@pytest.mark.parametrize("where", ["status", "headers", "body"])
def test_a_trickling_registry_hits_the_total_deadline(where):
    answer = response(200, {"Content-Type": INDEX}, b'{"manifests": []}')
    split = {"status": 2, "headers": answer.index(b"\r\n") + 4, "body": len(answer) - 10}[where]

    def responder(method, path, head):
        return [(answer[:split], 0.0), *trickle(answer[split:], 0.4)]

    start = time.monotonic()
    with pytest.raises(RegistryError, match=r"no complete answer within the deadline of 2 s"):
        _run(responder, deadline=2.0)
    assert time.monotonic() - start < 6


def test_the_deadline_env_overrides_the_default(monkeypatch):
    monkeypatch.setenv(netio.DEADLINE_ENV, "1.5")
    assert Client().deadline == 1.5
    monkeypatch.setenv(netio.DEADLINE_ENV, "soon")
    with pytest.raises(netio.NetError, match="MEGACPP_NET_DEADLINE='soon': expected a positive number of seconds"):
        Client()


def test_a_redirect_to_another_scheme_is_not_followed():
    def responder(method, path, head):
        return response(302, {"Location": "file:///etc/passwd"}, b"")

    with serve(responder) as server:
        assert netio.fetch(netio.Request(url=f"http://{server.host}/x")).status == 302
