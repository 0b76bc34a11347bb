"""Every HTTP(S) read of the tool, bounded: one total deadline per request (connect, headers, body
and redirects together), a size limit, and one error type. Never prints, never exits.

A per-read socket timeout alone does not bound a request: a server that sends one byte every few
seconds keeps every read alive forever. Here a watchdog timer shuts the request's sockets down when
its deadline passes, so a blocked read returns at once and the request fails with one line naming
the URL and the deadline. Whatever a faulty server sends (a bad status line, a header over 64 KiB,
more than 100 headers, a ``Content-Length`` that is not a number, a URL or header with control
characters) is a ``NetError``, never a traceback.

``MEGACPP_NET_DEADLINE`` (seconds) overrides every default deadline (a slow link, or a test).
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from megacpp_env.errors import ToolError
from megacpp_env.toolrun import env_seconds

DEADLINE_ENV = "MEGACPP_NET_DEADLINE"
READ_TIMEOUT_S = 30.0  # one read; the deadline bounds them all
CHUNK = 1 << 16
Sink = Callable[[bytes], None]


class NetError(ToolError):
    """A network read failed: unreachable, too slow, too large, or a malformed answer. ``what`` is
    the request (``GET URL``), ``detail`` what went wrong."""

    def __init__(self, what: str, detail: str) -> None:
        self.what = what
        self.detail = detail
        super().__init__(f"{what}: {detail}" if what else detail)


def deadline_s(default: float) -> float:
    """``default``, unless ``MEGACPP_NET_DEADLINE`` names a positive number of seconds."""
    return env_seconds(DEADLINE_ENV, default, error=functools.partial(NetError, ""))


@dataclass(kw_only=True, slots=True)
class _Watchdog:
    """Shuts down every socket a request opened once ``seconds`` have passed."""

    seconds: float
    started: float = field(default_factory=time.monotonic)
    fired: bool = False
    _socks: list[socket.socket] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _timer: threading.Timer | None = None

    def __enter__(self) -> _Watchdog:
        self._timer = threading.Timer(self.seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.append(sock)
            if self.fired:
                _shut(sock)

    def remaining(self) -> float:
        return self.seconds - (time.monotonic() - self.started)

    def check(self) -> None:
        if self.fired or self.remaining() <= 0:
            self.fired = True
            raise TimeoutError

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._socks:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _watched(base: type[http.client.HTTPConnection], dog: _Watchdog) -> type[http.client.HTTPConnection]:
    class Watched(base):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            dog.check()
            self.timeout = max(0.1, min(READ_TIMEOUT_S, dog.remaining()))
            super().connect()
            dog.watch(self.sock)

    return Watched


class _HTTP(urllib.request.HTTPHandler):
    def __init__(self, dog: _Watchdog) -> None:
        super().__init__()
        self._cls = _watched(http.client.HTTPConnection, dog)

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(self._cls, req)


class _HTTPS(urllib.request.HTTPSHandler):
    def __init__(self, dog: _Watchdog, context: ssl.SSLContext) -> None:
        super().__init__(context=context)
        self._cls = _watched(http.client.HTTPSConnection, dog)
        self._ctx = context

    def https_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(self._cls, req, context=self._ctx)


@dataclass(frozen=True, kw_only=True, slots=True)
class Response:
    status: int
    reason: str  # the status line's text, printable
    headers: dict[str, str]  # names lower-cased
    body: bytes  # empty when streamed into a sink
    url: str  # after redirects

    def content_length(self) -> int | None:
        raw = self.headers.get("content-length", "").strip()
        return int(raw) if raw.isdigit() and len(raw) < 19 else None


@dataclass(frozen=True, kw_only=True, slots=True)
class Request:
    url: str
    method: str = "GET"
    data: bytes | None = None  # a body (a POSTed form)
    headers: dict[str, str] = field(default_factory=dict)
    unredirected: dict[str, str] = field(default_factory=dict)  # never sent to a redirect's target
    limit: int = 4 << 20  # bytes of body kept (0: none); a longer body is an error
    error_limit: int = 4096  # bytes of an error (4xx/5xx) body kept
    deadline: float = 120.0  # seconds for the whole request


def fetch(req: Request, *, sink: Sink | None = None) -> Response:
    """Send ``req``; the answer, 4xx and 5xx included (their body cut to ``error_limit``). With
    ``sink``, a 2xx body is streamed into it, unbounded in size but not in time."""
    seconds = req.deadline
    what = f"{req.method} {printable(req.url)}"
    with _Watchdog(seconds=seconds) as dog:
        try:
            return _fetch(req, dog, sink)
        except NetError as exc:
            raise NetError(what, exc.detail) from None
        except urllib.error.HTTPError as exc:  # only when reading its body failed
            raise NetError(what, f"HTTP {exc.code}, then the connection failed") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
            if dog.fired or dog.remaining() <= 0:
                raise NetError(what, f"no complete answer within the deadline of {seconds:g} s") from None
            reason = getattr(exc, "reason", None) or exc
            raise NetError(what, _describe(reason)) from None


def _fetch(req: Request, dog: _Watchdog, sink: Sink | None) -> Response:
    _check_url(req.url)
    request = urllib.request.Request(req.url, data=req.data, method=req.method)  # noqa: S310 - http(s) only, checked above
    for name, value in req.headers.items():
        request.add_header(name, value)
    for name, value in req.unredirected.items():
        request.add_unredirected_header(name, value)
    context = ssl.create_default_context()
    opener = urllib.request.build_opener(_HTTP(dog), _HTTPS(dog, context), _NoDowngrade())
    try:
        resp = opener.open(request, timeout=max(0.1, min(READ_TIMEOUT_S, dog.remaining())))
    except urllib.error.HTTPError as exc:
        with exc:  # an error status: its body (bounded by error_limit, cut there) says why
            return _response(exc, exc.code, _read(exc, req.error_limit, dog, None, cut=True), req)
    with resp:
        return _response(resp, resp.status, _read(resp, req.limit, dog, sink, cut=False), req)


def _response(resp: Any, status: int, body: bytes, req: Request) -> Response:
    return Response(
        status=status,
        reason=printable(str(resp.reason))[:80],
        headers=_lower(resp.headers),
        body=body,
        url=resp.url or req.url,
    )


class _NoDowngrade(urllib.request.HTTPRedirectHandler):
    """Redirects stay on http(s), and never go from https to plain http."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        if req.full_url.startswith("https://") and not newurl.startswith("https://"):
            raise NetError(printable(req.full_url), f"refusing a redirect from https to {printable(newurl)}")
        _check_url(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _check_url(url: str) -> None:
    if not url.startswith(("https://", "http://")):
        raise NetError(printable(url), "refusing it: not an http(s) URL")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise NetError(printable(url), "refusing it: a space or control character in the URL")


def _read(resp: Any, limit: int, dog: _Watchdog, sink: Sink | None, *, cut: bool) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        dog.check()
        chunk = resp.read1(CHUNK) if hasattr(resp, "read1") else resp.read(CHUNK)
        if not chunk:
            break
        if sink is not None:
            sink(chunk)
            continue
        size += len(chunk)
        if size > limit:
            if cut:
                chunks.append(chunk)
                break
            raise NetError("", f"answer larger than {limit} bytes")
        chunks.append(chunk)
    dog.check()
    return b"".join(chunks)[: limit if cut else None]


def _lower(headers: Any) -> dict[str, str]:
    try:
        return {str(k).lower(): str(v) for k, v in (headers or {}).items()}
    except (AttributeError, TypeError):
        return {}


def _describe(reason: object) -> str:
    if isinstance(reason, TimeoutError | socket.timeout):
        return "timed out"
    text = str(reason) or type(reason).__name__
    return printable(text)[:200]


def printable(text: str) -> str:
    """``text`` with control characters escaped: what a server sends never reaches a terminal raw."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)[:300]
