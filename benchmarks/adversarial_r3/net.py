"""Issue 19, round 3, network area: pin-base, mirror-artifacts and mirror against faulty servers on
127.0.0.1, and the registry credentials of issue 22.

    python -m benchmarks.adversarial_r3.net

Classes, each with siblings of the issue's reproductions:
  faulty      pin-base against a registry that sends a bad status line, huge or many headers, a bad
              Content-Length, bad realms and tokens, wrong-typed or deeply nested manifests, redirect
              loops, truncated bodies: exit 3 or "Traceback" is a traceback, exit 0 a false ok
  trickle     a server sending one byte every 0.5 s to pin-base, mirror-artifacts and mirror's
              download: no answer within the command's timeout is a hang (MEGACPP_NET_DEADLINE=4)
  symlinks    mirror-artifacts with a symlink inside --to (a file appearing outside is an escape);
              pin-base on a symlinked stack.yaml (the link replaced, or the real spec unpinned, is
              an escape: a write to the wrong place)
  creds       planted passwords in ~/.docker/config.json (auths, a credential helper's answer) for a
              registry that refuses them: a password in any output is a leak; a helper named by a
              path (``../../bin/x``) that runs is an escape
Every command runs in a subprocess with a timeout. Touches only ``tmp`` and loopback ports.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.fixtures.faultyhttp import (  # noqa: E402
    manifest_answer,
    nested,
    response,
    serve,
    trickle,
    unauthorized,
)

KEYS = ("commands", "tracebacks", "hangs", "leaked", "planted", "escapes", "false_oks", "partials", "wedges")
TIMEOUT_S = 40
CUDA = "nvidia/cuda:13.2.0-cudnn-devel-ubuntu24.04"
INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DIGEST_A = "sha256:" + "a" * 64


class Counts(dict[str, int]):
    def __init__(self) -> None:
        super().__init__(dict.fromkeys(KEYS, 0))

    def merge(self, other: dict[str, int]) -> None:
        for key in KEYS:
            self[key] += other.get(key, 0)


def cli(
    counts: Counts,
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = TIMEOUT_S,
) -> tuple[int | None, str]:
    """Run ``megacpp-env ARGV``; count the command, a hang (None) and a traceback (exit 3)."""
    counts["commands"] += 1
    full_env = {**os.environ, "MEGACPP_NET_DEADLINE": "4", "NO_COLOR": "1", **(env or {})}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "megacpp_env", *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=full_env,
            cwd=cwd or ROOT,
            check=False,
            errors="replace",
        )
    except subprocess.TimeoutExpired:
        counts["hangs"] += 1
        return None, ""
    out = proc.stdout + proc.stderr
    if proc.returncode == 3 or "Traceback (most recent call last)" in out:
        counts["tracebacks"] += 1
    return proc.returncode, out


def python(counts: Counts, code: str, *, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Run a library call in a subprocess (what a verb runs, without its set-up): one of the tool's own
    errors is its exit 1, anything else a traceback."""
    counts["commands"] += 1
    wrapped = (
        "import sys\nfrom megacpp_env.errors import MegacppEnvError\ntry:\n"
        + "".join(f"    {line}\n" for line in code.split("; "))
        + "except MegacppEnvError as exc:\n    print(exc, file=sys.stderr)\n    sys.exit(1)\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", wrapped],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env={**os.environ, "MEGACPP_NET_DEADLINE": "4", **(env or {})},
            cwd=ROOT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        counts["hangs"] += 1
        return None, ""
    out = proc.stdout + proc.stderr
    if "Traceback (most recent call last)" in out:
        counts["tracebacks"] += 1
    return proc.returncode, out


def spec_copy(tmp: Path, name: str, base: str = "") -> Path:
    """A copy of stack.yaml (and what the verbs read beside it); gb10's base becomes ``base``."""
    repo = tmp / name
    repo.mkdir(parents=True)
    text = (ROOT / "stack.yaml").read_text()
    if base:
        text = text.replace(f"    base_image: {CUDA}\n", f"    base_image: {base}\n", 1)
    (repo / "stack.yaml").write_text(text)
    for sub in ("facts", "locks", "overlays", "images"):
        if (ROOT / sub).is_dir():
            shutil.copytree(ROOT / sub, repo / sub, symlinks=True)
    return repo


# ---- faulty registries ------------------------------------------------------------------------------


def _always(answer: bytes) -> Callable[[str, str, str], bytes]:
    return lambda method, path, head: answer


def _manifest(doc: object, media_type: str = INDEX) -> Callable[[str, str, str], bytes]:
    def responder(method: str, path: str, head: str) -> bytes:
        if method == "HEAD":
            return response(200, {"Content-Type": media_type}, b"")
        return manifest_answer(doc if isinstance(doc, bytes) else json.dumps(doc).encode(), media_type)

    return responder


def _realm(realm: str) -> Callable[[str, str, str], bytes]:
    return _always(unauthorized(f'Bearer realm="{realm}",service="x"'))


def _token(body: bytes) -> Callable[[str], Callable[[str, str, str], bytes]]:
    def make(host: str) -> Callable[[str, str, str], bytes]:
        def responder(method: str, path: str, head: str) -> bytes:
            if path.startswith("/token"):
                return response(200, {"Content-Type": "application/json"}, body)
            return unauthorized(f'Bearer realm="http://{host}/token",service="x"')

        return responder

    return make


def _redirect_loop(host: str) -> Callable[[str, str, str], bytes]:
    return _always(response(302, {"Location": f"http://{host}/v2/x/y/manifests/1"}, b""))


FAULTY: dict[str, Callable[[str, str, str], bytes]] = {
    "bad-status-line": _always(b"HTTP/1.1 abc nonsense\r\n\r\n"),
    "garbage-status": _always(b"\x00\x01garbage\r\n\r\n"),
    "bare-status": _always(b"HTTP/1.1\r\n\r\n"),
    "http-0.9": _always(b"hello"),
    "empty-answer": _always(b""),
    "header-64k": _always(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n"),
    "header-1m": _always(b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"),
    "101-headers": _always(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(101)) + b"\r\n"),
    "1000-headers": _always(b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(1000)) + b"\r\n"),
    "content-length-abc": _always(response(200, {"Content-Length": "abc", "Content-Type": INDEX}, b"")),
    "content-length-negative": _always(response(200, {"Content-Length": "-5", "Content-Type": INDEX}, b"")),
    "content-length-huge": _always(response(200, {"Content-Length": "9" * 30, "Content-Type": INDEX}, b"")),
    "truncated-body": _always(
        b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\nContent-Type: " + INDEX.encode() + b'\r\n\r\n{"manif'
    ),
    "bad-chunk": _always(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"),
    "realm-space": _realm("http://127.0.0.1:1/to ken"),
    "realm-del": _realm("http://127.0.0.1:1/to\x7fken"),
    "realm-tab": _realm("http://127.0.0.1:1/to\tken"),
    "realm-file": _realm("file:///etc/passwd"),
    "realm-empty": _realm(""),
    "challenge-garbage": _always(unauthorized("\x01\x02")),
    "challenge-negotiate": _always(unauthorized("Negotiate abc")),
    "manifests-string": _manifest({"manifests": "x"}),
    "manifests-int": _manifest({"manifests": 5}),
    "entry-list": _manifest({"manifests": [[1]]}),
    "entry-null": _manifest({"manifests": [None]}),
    "digest-int": _manifest({"manifests": [{"digest": 5, "platform": {"os": "linux"}}]}),
    "platform-string": _manifest({"manifests": [{"digest": DIGEST_A, "platform": "linux"}]}),
    "platform-os-list": _manifest({"manifests": [{"digest": DIGEST_A, "platform": {"os": ["linux"]}}]}),
    "platform-control": _manifest(
        {"manifests": [{"digest": DIGEST_A, "platform": {"os": "li\nnux", "architecture": "amd64"}}]}
    ),
    "config-list": _manifest({"config": [1]}, MANIFEST),
    "config-digest-bad": _manifest({"config": {"digest": "sha256:zz"}}, MANIFEST),
    "doc-list": _manifest([1, 2]),
    "doc-string": _manifest("x"),
    "deep-array": _manifest(nested(100000)),
    "deep-object": _manifest(b'{"a":' * 50000 + b"1" + b"}" * 50000),
    "not-json": _manifest(b"\xff\xfe{"),
    "nan-json": _manifest(b'{"manifests": NaN}'),
    "http-500-ansi": _always(response(500, {}, b"\x1b[31mred\r\nX: y")),
    "http-418": _always(response(418, {}, b"teapot")),
}
FAULTY_BY_HOST: dict[str, Callable[[str], Callable[[str, str, str], bytes]]] = {
    "crlf-token": _token(json.dumps({"token": "abc\r\nX-Evil: 1"}).encode()),
    "token-not-json": _token(b"{" * 5000),
    "token-list": _token(b'{"token": ["a"]}'),
    "token-huge": _token(json.dumps({"token": "a" * (2 << 20)}).encode()),
    "token-deep": _token(b"[" * 100000),
    "redirect-loop": _redirect_loop,
}


def faulty(tmp: Path) -> Counts:
    counts = Counts()
    cases: list[tuple[str, Callable[[str], Callable[[str, str, str], bytes]]]] = [
        *((name, (lambda _host, r=r: r)) for name, r in FAULTY.items()),
        *FAULTY_BY_HOST.items(),
    ]
    for name, make in cases:
        with serve(lambda m, p, h: b"") as server:
            server.responder = make(server.host)  # type: ignore[attr-defined]
            repo = spec_copy(tmp / "faulty", name, f"{server.host}/x/y:1")
            before = (repo / "stack.yaml").read_bytes()
            rc, _out = cli(counts, ["pin-base", "gb10", "--spec", str(repo / "stack.yaml"), "--json"])
            if rc == 0 or (repo / "stack.yaml").read_bytes() != before:
                counts["false_oks"] += 1
    return counts


# ---- trickling servers ------------------------------------------------------------------------------


def _trickler(method: str, path: str, head: str) -> object:
    body = b'{"manifests": []}' + b" " * 200
    answer = response(200, {"Content-Type": INDEX}, body)
    return [(answer[:5], 0.0), *trickle(answer[5:], 0.5)]


def _artifact_spec(repo: Path, url: str, dirs: dict[str, str]) -> None:
    text = (repo / "stack.yaml").read_text()
    start, end = text.index("  flashinfer_cubins:\n"), text.index("\ntargets:\n")
    lines = "".join(f'      {d}: "{h}"\n' for d, h in dirs.items())
    block = (
        f"  flashinfer_cubins:\n    url: {url}\n    env: FLASHINFER_CUBIN_DIR\n    source: flashinfer\n"
        f"    dirs:\n{lines}"
    )
    (repo / "stack.yaml").write_text(text[:start] + block + text[end:])


def trickling(tmp: Path) -> Counts:
    counts = Counts()
    with serve(_trickler) as server:  # type: ignore[arg-type]
        repo = spec_copy(tmp / "trickle", "pin", f"{server.host}/x/y:1")
        rc, _ = cli(counts, ["pin-base", "gb10", "--spec", str(repo / "stack.yaml")])
        if rc == 0:
            counts["false_oks"] += 1
        repo = spec_copy(tmp / "trickle", "arts")
        _artifact_spec(repo, f"http://{server.host}/a/", {"d1/": "0" * 64})
        rc, _ = cli(
            counts,
            [
                "mirror-artifacts",
                "flashinfer_cubins",
                "--to",
                str(tmp / "trickle" / "out"),
                "--spec",
                str(repo / "stack.yaml"),
            ],
        )
        if rc == 0:
            counts["false_oks"] += 1
        for where in ("wheel", "index"):
            out = tmp / "trickle" / f"{where}.bin"
            code = (
                "import os; from megacpp_env.lock.mirror import _download; "
                f"fd = os.open({str(out)!r}, os.O_WRONLY | os.O_CREAT, 0o600); "
                f"_download('http://{server.host}/{where}.whl', fd)"
            )
            rc, _ = python(counts, code)
            if rc == 0:
                counts["false_oks"] += 1
    return counts


# ---- symlinks inside the places a verb writes ----------------------------------------------------


def _artifact_server(root: Path) -> dict[str, str]:
    files = {"d1/": {"k.cubin": b"\x7fELF kernel", "inc/meta.h": b"// meta\n"}, "d2/": {"g.cubin": b"gemm" * 100}}
    pins = {}
    for directory, content in files.items():
        lines = []
        for rel, data in content.items():
            (root / directory / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / directory / rel).write_bytes(data)
            lines.append(f"{hashlib.sha256(data).hexdigest()}  {rel}\n")
        listing = "".join(lines).encode()
        (root / directory / "checksums.txt").write_bytes(listing)
        pins[directory] = hashlib.sha256(listing).hexdigest()
    return pins


def _static(root: Path) -> Callable[[str, str, str], bytes]:
    def responder(method: str, path: str, head: str) -> bytes:
        rel = path.split("?", maxsplit=1)[0].removeprefix("/a/")
        target = (root / rel).resolve()
        if not str(target).startswith(str(root.resolve())) or not target.is_file():
            return response(404, {}, b"no")
        return response(200, {}, target.read_bytes())

    return responder


def symlinks(tmp: Path) -> Counts:
    counts = Counts()
    site = tmp / "sym" / "site"
    pins = _artifact_server(site)
    with serve(_static(site)) as server:
        repo = spec_copy(tmp / "sym", "arts")
        _artifact_spec(repo, f"http://{server.host}/a/", pins)
        plants = {
            "top": lambda dest, away: (dest / "d1").symlink_to(away),
            "nested": lambda dest, away: ((dest / "d1").mkdir(parents=True), (dest / "d1" / "inc").symlink_to(away)),
            "file": lambda dest, away: (
                (dest / "d2").mkdir(parents=True),
                (dest / "d2" / "g.cubin").symlink_to(away / "g"),
            ),
            "listing": lambda dest, away: (
                (dest / "d2").mkdir(parents=True),
                (dest / "d2" / "checksums.txt").symlink_to(away / "c"),
            ),
            "dangling": lambda dest, away: (dest / "d1").symlink_to(away / "missing"),
        }
        for name, plant in plants.items():
            dest, away = tmp / "sym" / f"to-{name}", tmp / "sym" / f"away-{name}"
            dest.mkdir(parents=True)
            away.mkdir()
            plant(dest, away)
            before = sorted(p.name for p in away.rglob("*"))
            rc, _ = cli(
                counts, ["mirror-artifacts", "flashinfer_cubins", "--to", str(dest), "--spec", str(repo / "stack.yaml")]
            )
            if sorted(p.name for p in away.rglob("*")) != before:
                counts["escapes"] += 1
            if rc == 0:
                counts["false_oks"] += 1
    counts.merge(_symlinked_spec(tmp))
    return counts


def _good_registry(method: str, path: str, head: str) -> bytes:
    index = {
        "schemaVersion": 2,
        "mediaType": INDEX,
        "manifests": [
            {
                "mediaType": MANIFEST,
                "digest": DIGEST_A,
                "size": 1,
                "platform": {"os": "linux", "architecture": "arm64"},
            },
            {
                "mediaType": MANIFEST,
                "digest": "sha256:" + "b" * 64,
                "size": 1,
                "platform": {"os": "linux", "architecture": "amd64"},
            },
        ],
    }
    return manifest_answer(json.dumps(index).encode(), INDEX, head=method == "HEAD")


def _symlinked_spec(tmp: Path) -> Counts:
    counts = Counts()
    with serve(_good_registry) as server:
        real = spec_copy(tmp / "sym", "real-spec", f"{server.host}/x/y:1")
        linked = tmp / "sym" / "linked"
        linked.mkdir()
        for sub in ("facts", "locks", "overlays", "images"):
            if (real / sub).exists():
                (linked / sub).symlink_to(real / sub)
        (linked / "stack.yaml").symlink_to(real / "stack.yaml")
        before = (real / "stack.yaml").read_text()
        rc, _out = cli(counts, ["pin-base", "gb10", "--spec", str(linked / "stack.yaml")])
        after = (real / "stack.yaml").read_text()
        if not (linked / "stack.yaml").is_symlink() or (rc == 0 and after == before):
            counts["escapes"] += 1
    return counts


# ---- credentials -----------------------------------------------------------------------------------

PASSWORD = "planted-Pw-7f3a9c"
HELPER_SECRET = "planted-helper-secret-51e0"


def _refusing(method: str, path: str, head: str) -> bytes:
    if path.startswith("/token"):
        return response(401, {}, b"denied")
    if "Authorization: Basic" in head:
        return response(401, {"WWW-Authenticate": 'Basic realm="r"'}, b"bad credentials")
    return unauthorized('Basic realm="r"')


def _bearer_refusing(host: str) -> Callable[[str, str, str], bytes]:
    def responder(method: str, path: str, head: str) -> bytes:
        if path.startswith("/token"):
            return response(401, {}, b"denied")
        return unauthorized(f'Bearer realm="http://{host}/token",service="x"')

    return responder


def creds(tmp: Path) -> Counts:
    counts = Counts()
    base = tmp / "creds"
    bindir = base / "bin"
    bindir.mkdir(parents=True)
    helper = bindir / "docker-credential-planted"
    helper.write_text(f'#!/bin/sh\ncat >/dev/null\necho \'{{"Username": "u", "Secret": "{HELPER_SECRET}"}}\'\n')
    helper.chmod(helper.stat().st_mode | stat.S_IXUSR)
    pwned = base / "PWNED"
    evil = base / "evil"
    evil.write_text(f"#!/bin/sh\ntouch {pwned}\n")
    evil.chmod(0o755)
    for scheme_name, make in (("basic", lambda host: _refusing), ("bearer", _bearer_refusing)):
        for store in ("auths", "auths-userpass", "helper", "store", "path-helper", "bad-json", "bad-base64"):
            with serve(lambda m, p, h: b"") as server:
                server.responder = make(server.host)  # type: ignore[attr-defined]
                cfg = base / f"{scheme_name}-{store}"
                cfg.mkdir()
                auth = base64.b64encode(f"user:{PASSWORD}".encode()).decode()
                doc: object = {
                    "auths": {"auths": {server.host: {"auth": auth}}},
                    "auths-userpass": {"auths": {f"http://{server.host}": {"username": "u", "password": PASSWORD}}},
                    "helper": {"credHelpers": {server.host: "planted"}},
                    "store": {"credsStore": "planted", "auths": {server.host: {}}},
                    "path-helper": {"credHelpers": {server.host: f"../../../../..{evil}"}},
                    "bad-json": "{" * 10000,
                    "bad-base64": {"auths": {server.host: {"auth": PASSWORD + "!!"}}},
                }[store]
                (cfg / "config.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
                counts["planted"] += 1
                repo = spec_copy(base, f"spec-{scheme_name}-{store}", f"{server.host}/x/y:1")
                env = {"DOCKER_CONFIG": str(cfg), "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}
                for extra in ([], ["--json"], ["--check"]):
                    rc, out = cli(counts, ["pin-base", "gb10", "--spec", str(repo / "stack.yaml"), *extra], env=env)
                    if PASSWORD in out or HELPER_SECRET in out or auth in out:
                        counts["leaked"] += 1
                    if rc == 0:
                        counts["false_oks"] += 1
                if pwned.exists():
                    counts["escapes"] += 1
                    pwned.unlink()
    return counts


def run(tmp: Path) -> dict[str, int]:
    counts = Counts()
    for fn in (faulty, trickling, symlinks, creds):
        counts.merge(fn(tmp))
    return dict(counts)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory(prefix="megacpp-adv-net-") as d:
        print(json.dumps(run(Path(d))))
