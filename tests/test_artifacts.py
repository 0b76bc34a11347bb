"""Pinned artifact sets (FlashInfer's cubins): ``mirror-artifacts`` against a local HTTP server laid out
like the artifactory (one checksums.txt per directory), verification, tampering, idempotence."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from megacpp_env.artifacts import mirror_artifacts, verify_artifacts
from megacpp_env.cli import main
from megacpp_env.errors import RefusedError, ToolError, VerificationError
from megacpp_env.spec import load_spec
from tests.fixtures.index import IndexServer
from tests.fixtures.spec import REPO_ROOT

FMHA = "158f6fa11ef139a098cfddcdddce73ca99d164ad/fmha/trtllm-gen/"
GEMM = "10f64528a1172dae8e29601a3b99ab9dc78d37be/gemm-91e0ba0-2710384/"
FILES = {
    FMHA: {"fmhaSm100a_bf16.cubin": b"\x7fELF fmha kernel", "include/flashInferMetaInfo.h": b"// meta\n"},
    GEMM: {"gemm_sm100f_fp8.cubin": b"\x7fELF gemm kernel" * 1000},
}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def publish(root):
    """The artifactory stand-in: files plus a checksums.txt per directory; returns {dir: sha of checksums.txt}."""
    pins = {}
    for directory, files in FILES.items():
        lines = []
        for rel, data in files.items():
            (root / directory / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / directory / rel).write_bytes(data)
            lines.append(f"{sha(data)}  {rel}\n")
        listing = "".join(lines).encode()
        (root / directory / "checksums.txt").write_bytes(listing)
        pins[directory] = sha(listing)
    return pins


@pytest.fixture
def served(tmp_path):
    site = tmp_path / "site"
    pins = publish(site / "artifactory" / "repo")
    server = IndexServer(site).start()
    base = server.url.removesuffix("/simple") + "/artifactory/repo/"
    yield site / "artifactory" / "repo", base, pins
    server.stop()


def spec_with(tmp_path, url, pins):
    dirs = "".join(f'      {d}: "{h}"\n' for d, h in pins.items())
    text = (REPO_ROOT / "stack.yaml").read_text()
    start = text.index("  flashinfer_cubins:\n")
    end = text.index("\ntargets:\n")
    block = (f"  flashinfer_cubins:\n    url: {url}\n    env: FLASHINFER_CUBIN_DIR\n    source: flashinfer\n"
             f"    dirs:\n{dirs}")  # fmt: skip
    (tmp_path / "stack.yaml").write_text(text[:start] + block + text[end:])
    return load_spec(tmp_path / "stack.yaml")


def test_mirror_fetches_verifies_and_keeps(served, tmp_path):
    _root, base, pins = served
    art = spec_with(tmp_path, base, pins).artifacts["flashinfer_cubins"]
    dest = tmp_path / "mirror"
    first = mirror_artifacts(art, dest)
    assert (first.files, first.fetched, first.kept) == (5, 5, 0)  # 2 checksums.txt + 3 files
    assert (dest / FMHA / "include" / "flashInferMetaInfo.h").read_bytes() == b"// meta\n"
    assert verify_artifacts(art, dest) == []
    again = mirror_artifacts(art, dest)
    assert (again.fetched, again.kept) == (0, 5)


def test_a_changed_checksums_file_is_refused(served, tmp_path):
    _root, base, pins = served
    art = spec_with(tmp_path, base, {**pins, FMHA: "0" * 64}).artifacts["flashinfer_cubins"]
    with pytest.raises(VerificationError, match=f"{FMHA}checksums.txt: sha256 {pins[FMHA]}, the pin says 0{{64}}"):
        mirror_artifacts(art, tmp_path / "mirror")
    assert not list((tmp_path / "mirror").rglob("*.part"))  # nothing half-written stays


def test_a_tampered_file_is_refused_and_found_offline(served, tmp_path):
    root, base, pins = served
    art = spec_with(tmp_path, base, pins).artifacts["flashinfer_cubins"]
    (root / GEMM / "gemm_sm100f_fp8.cubin").write_bytes(b"not the pinned kernel")
    with pytest.raises(VerificationError, match=r"gemm_sm100f_fp8\.cubin: sha256 .*, the pin says"):
        mirror_artifacts(art, tmp_path / "m1")
    shutil.copytree(root, tmp_path / "m2")
    assert verify_artifacts(art, tmp_path / "m2") == [f"{GEMM}gemm_sm100f_fp8.cubin: sha256 differs from checksums.txt"]
    (tmp_path / "m2" / FMHA / "fmhaSm100a_bf16.cubin").unlink()
    assert f"{FMHA}fmhaSm100a_bf16.cubin: missing" in verify_artifacts(art, tmp_path / "m2")


def test_a_listing_that_leaves_its_directory_is_refused(served, tmp_path):
    root, base, pins = served
    listing = f"{'a' * 64}  ../../etc/passwd\n".encode()
    (root / FMHA / "checksums.txt").write_bytes(listing)
    art = spec_with(tmp_path, base, {**pins, FMHA: sha(listing)}).artifacts["flashinfer_cubins"]
    with pytest.raises(VerificationError, match=r"checksums.txt:1: path '\.\./\.\./etc/passwd' leaves its directory"):
        mirror_artifacts(art, tmp_path / "mirror")


def test_the_verb_mirrors_from_a_mirror_url_and_reports_json(served, tmp_path, capsys):
    _root, base, pins = served
    spec = spec_with(tmp_path, "https://edge.example.invalid/artifactory/", pins)
    assert spec.artifacts["flashinfer_cubins"].url.startswith("https://edge.example.invalid")
    argv = ["mirror-artifacts", "flashinfer_cubins", "--to", str(tmp_path / "m"), "--spec", str(tmp_path / "stack.yaml")]
    assert main([*argv, "--from", base, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"name": "flashinfer_cubins", "dest": str(tmp_path / "m"), "ok": True,
                                                  "problems": []}  # fmt: skip
    assert main([*argv, "--verify"]) == 0
    (tmp_path / "m" / GEMM / "gemm_sm100f_fp8.cubin").write_bytes(b"x")
    assert main([*argv, "--verify"]) == 1
    assert "FAILED" in capsys.readouterr().out


def test_an_unreachable_url_is_a_tool_error(tmp_path):
    art = spec_with(tmp_path, "http://127.0.0.1:9/artifactory/", {FMHA: "0" * 64}).artifacts["flashinfer_cubins"]
    with pytest.raises(ToolError, match=r"cannot fetch http://127\.0\.0\.1:9/artifactory/"):
        mirror_artifacts(art, tmp_path / "m")


# ---- issue 19: a symlinked subdirectory, a trickling server, a FIFO listing ----------------------


@pytest.mark.parametrize("where", ["top", "nested", "file"])
def test_a_symlink_inside_the_mirror_is_refused(served, tmp_path, where):
    _root, base, pins = served
    art = spec_with(tmp_path, base, pins).artifacts["flashinfer_cubins"]
    dest, elsewhere = tmp_path / "mirror", tmp_path / "elsewhere"
    elsewhere.mkdir()
    first = FMHA.split("/", maxsplit=1)[0]
    if where == "top":  # ln -s /elsewhere DIR/d1
        dest.mkdir()
        (dest / first).symlink_to(elsewhere)
        planted = dest / first
    elif where == "nested":
        (dest / FMHA).mkdir(parents=True)
        (dest / FMHA / "include").symlink_to(elsewhere)
        planted = dest / FMHA / "include"
    else:
        (dest / GEMM).mkdir(parents=True)
        (elsewhere / "k").write_bytes(b"\x7fELF gemm kernel" * 1000)
        (dest / GEMM / "gemm_sm100f_fp8.cubin").symlink_to(elsewhere / "k")
        planted = dest / GEMM / "gemm_sm100f_fp8.cubin"
    with pytest.raises(RefusedError, match=f"mirror-artifacts: {planted} is not a .*; refusing to write through it"):
        mirror_artifacts(art, dest)
    assert [p.name for p in elsewhere.iterdir()] in ([], ["k"])  # nothing written outside
    with pytest.raises(RefusedError):
        verify_artifacts(art, dest)


def test_a_trickling_server_hits_the_deadline(tmp_path, monkeypatch):
    from tests.fixtures.faultyhttp import response, serve, trickle

    body = b"a" * 200
    monkeypatch.setenv("MEGACPP_NET_DEADLINE", "2")
    with serve(lambda m, p, h: trickle(response(200, {}, body), 0.3)) as server:
        art = spec_with(tmp_path, f"http://{server.host}/a/", {FMHA: sha(body)}).artifacts["flashinfer_cubins"]
        with pytest.raises(ToolError, match=r"cannot fetch http://.*: no complete answer within the deadline of 2 s"):
            mirror_artifacts(art, tmp_path / "m")
    assert not list((tmp_path / "m").rglob("*.part"))


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 abc nonsense\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: y\r\n" % i for i in range(150)) + b"\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\nConnection: close\r\n\r\nshort",
    b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\nConnection: close\r\n\r\ntruncated",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
    b"HTTP/1.1 500 \x1b[31mred\r\nContent-Length: 0\r\n\r\n",
], ids=["bad-status", "header-64k", "150-headers", "length-abc", "truncated", "bad-chunk", "500-ansi"])
def test_a_faulty_artifact_server_is_one_line(tmp_path, answer):
    """Issue 19: mirror-artifacts against a faulty server: a ToolError/VerificationError line, nothing kept."""
    from tests.fixtures.faultyhttp import serve

    with serve(lambda m, p, h: answer) as server:
        art = spec_with(tmp_path, f"http://{server.host}/a/", {FMHA: sha(b"x")}).artifacts["flashinfer_cubins"]
        with pytest.raises((ToolError, VerificationError)) as exc:
            mirror_artifacts(art, tmp_path / "m")
    assert "\n" not in str(exc.value) and "\x1b" not in str(exc.value)
    assert not [p for p in (tmp_path / "m").rglob("*") if p.is_file()]
