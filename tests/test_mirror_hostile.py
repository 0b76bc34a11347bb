"""Issue 19, round 3: the source mirror and checkouts under hostile input. Real repositories: an
upstream whose ``.gitmodules`` names a command, a mirror with a flipped pack byte, a replaced blob
or a deleted pin ref, a mirror that lacks a blob, killed runs' leftovers, corrupt indexes."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.checkout import checkout_source, verify_checkout
from megacpp_env.commands import checkout as checkout_cmd
from megacpp_env.errors import RefusedError, ToolError
from megacpp_env.spec.model import Source
from megacpp_env.srcbuild.mirror import (
    PIN_REF,
    MirrorRequest,
    Pin,
    insteadof_config,
    mirror_sources,
    repo_key,
    source_dir,
)
from tests.fixtures.git_repos import FILE_OK, IDENTITY, make_repo, write_files

# Every URL a hostile .gitmodules (or spec) may hold to run a command or reach past the mirror.
HOSTILE_URLS = [
    "--upload-pack=touch {pwn}",  # the reproduction (CVE-2018-17456)
    "--upload-pack=touch${{IFS}}{pwn}",
    "-oProxyCommand=touch PWNED:x",
    "ext::sh -c touch% {pwn}",
    "ext::touch {pwn}",
    "fd::3",
    "fd::0,1/x",
    "ssh://-oProxyCommand=touch PWNED/x",
    "git+ssh://-oProxyCommand=touch PWNED/x",
    "ssh://user@-oProxyCommand=touch PWNED/x",
    "u@-oProxyCommand=touch PWNED:x",
    "testhelper::x",
    "foo://host/x",
    "https://host/x\n[core]\n\tsshCommand = touch PWNED",
]


def hostile_upstream(tmp_path: Path, url: str) -> tuple[str, str]:
    """A repository whose .gitmodules gives submodule ``lib`` the URL ``url`` (file:// URL, commit)."""
    sub = tmp_path / "sub"
    sub_commit = make_repo(sub, {"x.txt": "x\n"})
    main = tmp_path / "up"
    make_repo(main, {"a.txt": "a\n"})
    gitmodules = f'[submodule "lib"]\n\tpath = lib\n\turl = {json.dumps(url)[1:-1]}\n'
    write_files(main, {".gitmodules": gitmodules})
    git.run_git(["update-index", "--add", "--cacheinfo", f"160000,{sub_commit},lib"], main, config=FILE_OK)
    git.run_git(["add", ".gitmodules"], main, config=FILE_OK)
    git.run_git(["commit", "--quiet", "-m", "hostile submodule"], main, env=IDENTITY, config=FILE_OK)
    commit = git.head_commit(main)
    assert commit and git.gitlinks(main) == {"lib": sub_commit}
    return main.as_uri(), commit


def request(src: Source) -> MirrorRequest:
    return MirrorRequest(source=src.name, pins=(Pin(url=src.repo, commit=src.commit, submodules=src.submodules),))


def planted(tmp_path: Path) -> list[Path]:
    return list(tmp_path.rglob("PWNED*"))


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_mirror_sources_refuses_a_hostile_submodule_url(tmp_path: Path, url: str, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = url.format(pwn=tmp_path / "PWNED")  # outside every directory a failed run removes
    repo, commit = hostile_upstream(tmp_path, url)
    req = MirrorRequest(source="demo", pins=(Pin(url=repo, commit=commit, submodules=True),))
    with pytest.raises(RefusedError, match=r"\.gitmodules: submodule lib: url .* refusing to pass it to git"):
        mirror_sources(tmp_path / "mirror", [req])
    assert planted(tmp_path) == []
    assert not (tmp_path / "mirror" / "sources" / "demo").exists()


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_checkout_refuses_a_hostile_submodule_url(tmp_path: Path, url: str, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = url.format(pwn=tmp_path / "PWNED")  # outside every directory a failed run removes
    repo, commit = hostile_upstream(tmp_path, url)
    src = Source(name="demo", repo=repo, commit=commit, submodules=True)
    with pytest.raises(RefusedError, match=r"\.gitmodules: submodule lib: url"):
        checkout_source(src, tmp_path / "co")
    assert planted(tmp_path) == []
    assert not (tmp_path / "co").exists()


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_a_hostile_pinned_url_never_reaches_git(tmp_path: Path, url: str, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    url = url.format(pwn=tmp_path / "PWNED")  # outside every directory a failed run removes
    src = Source(name="demo", repo=url, commit="1" * 40)
    with pytest.raises(RefusedError, match="refusing to pass it to git"):
        checkout_source(src, tmp_path / "co")
    req = MirrorRequest(source="demo", pins=(Pin(url=url, commit="1" * 40),))
    with pytest.raises(RefusedError, match="refusing to pass it to git"):
        mirror_sources(tmp_path / "mirror", [req])
    assert planted(tmp_path) == []


def test_a_remote_superproject_may_not_name_a_local_submodule(tmp_path: Path) -> None:
    """A local path in the .gitmodules of a network upstream would copy a repository of this machine."""
    from megacpp_env.srcbuild.mirror import _submodule_pins

    repo, commit = hostile_upstream(tmp_path, str(tmp_path / "sub"))
    bare = tmp_path / "bare.git"
    git.run_git(["clone", "--quiet", "--bare", "--", repo, str(bare)], config=FILE_OK)
    with pytest.raises(RefusedError, match="is a local path, which only a local superproject may name"):
        _submodule_pins(bare, Pin(url="https://example.invalid/up.git", commit=commit, submodules=True))
    (pin,) = _submodule_pins(bare, Pin(url=repo, commit=commit, submodules=True))  # a local one may
    assert pin.url == str(tmp_path / "sub")


def test_every_git_call_runs_with_ext_and_fd_off(tmp_path: Path, monkeypatch) -> None:
    """The user's own config turning ``ext`` on is overridden: no transport helper ever runs a program."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text('[protocol]\n\tallow = always\n[protocol "ext"]\n\tallow = always\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "w"
    git.init(work)
    proc = git.run_git(["fetch", f"ext::sh -c touch% {tmp_path}/PWNED", "main"], work, check=False, trusted=True)
    assert proc.returncode != 0 and b"transport 'ext' not allowed" in proc.stderr
    assert planted(tmp_path) == []


# ---- item 9: `checkout --mirror` never falls back to the network ------------------------------------


def test_checkout_with_a_mirror_that_lacks_the_pin_is_refused(upstream, tmp_path: Path, caplog) -> None:
    import logging

    caplog.set_level(logging.DEBUG, logger="megacpp_env.git")
    other = Source(name="demo", repo=upstream.sub_path.as_uri(), commit=upstream.sub_commit)
    root = tmp_path / "mirror"
    mirror_sources(root, [MirrorRequest(source="demo", pins=(Pin(url=other.repo, commit=other.commit),))])
    from megacpp_env.srcbuild.mirror import require_pins

    with pytest.raises(RefusedError, match=rf"source mirror {root} lacks {upstream.url} @ {upstream.commit}"):
        require_pins(root, "demo", [(upstream.url, upstream.commit)], remedy="megacpp-env mirror-sources T")
    # Even past that check, the mirror's config turns every network transport off.
    cfg = insteadof_config(root, "demo")
    assert cfg["protocol.https.allow"] == "never" and cfg["protocol.ssh.allow"] == "never"
    net = Source(name="demo", repo="https://127.0.0.1:9/none.git", commit=upstream.commit)
    with pytest.raises(Exception, match=r"not allowed|not reachable"):
        checkout_source(net, tmp_path / "co", git_config=cfg)
    assert not (tmp_path / "co").exists()


def test_cli_checkout_mirror_refuses_before_any_fetch(smoke_source, tmp_path: Path, caplog) -> None:
    import logging

    from tests.fixtures.srcbuild import REPO_ROOT

    caplog.set_level(logging.DEBUG, logger="megacpp_env.git")
    spec = tmp_path / "proj" / "stack.yaml"
    spec.parent.mkdir()
    spec.write_text((REPO_ROOT / "stack.yaml").read_text())
    shutil.copytree(REPO_ROOT / "overlays", spec.parent / "overlays")
    root = tmp_path / "mirror"
    lib = tmp_path / "lib"
    lib_commit = make_repo(lib, {"x": "x\n"})
    pins = (Pin(url=lib.as_uri(), commit=lib_commit),)
    mirror_sources(root, [MirrorRequest(source="megacpp_smoke_ext", pins=pins)])
    caplog.clear()
    co = argparse.Namespace(spec=str(spec), name="megacpp-smoke-ext", dest=tmp_path / "co", mirror=root, json=False)
    with pytest.raises(RefusedError, match=f"source mirror {root} lacks .* mirror-sources TARGET --to {root}"):
        checkout_cmd.run(co)
    assert not any("fetch" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / "co").exists()
    assert set(os.listdir(tmp_path / "proj")) == {"stack.yaml", "overlays"}


# ---- item 7: a re-run verifies what a checkout will read ----------------------------------------------


def mirrored(upstream, tmp_path: Path) -> tuple[Path, MirrorRequest, Path]:
    """(mirror root, request, the superproject's bare repository in it), packed as a real mirror may be."""
    src = upstream.source()
    req = MirrorRequest(source="demo", pins=(Pin(url=src.repo, commit=src.commit, submodules=True),))
    root = tmp_path / "mirror"
    mirror_sources(root, [req])
    repo = source_dir(root, "demo") / "git" / f"{repo_key(src.repo)}.git"
    git.run_git(["repack", "-a", "-d", "-q"], repo)
    return root, req, repo


def assert_serves(upstream, root: Path, dest: Path) -> None:
    result = checkout_source(upstream.source(), dest, git_config=insteadof_config(root, "demo"))
    assert result.state.head == upstream.commit and verify_checkout(dest, upstream.source()).ok
    assert (dest / "data/blob.bin").read_bytes() == upstream.files["data/blob.bin"]


def test_rerun_detects_a_flipped_pack_byte_and_refetches(upstream, tmp_path: Path) -> None:
    root, req, repo = mirrored(upstream, tmp_path)
    (pack,) = (repo / "objects" / "pack").glob("*.pack")
    data = bytearray(pack.read_bytes())
    data[len(data) // 2] ^= 0x01
    pack.chmod(0o644)
    pack.write_bytes(bytes(data))
    (made,) = mirror_sources(root, [req])
    assert made.action == "updated"
    assert git.run_git(["fsck", "--full", "--no-progress"], repo, check=False).returncode == 0
    assert_serves(upstream, root, tmp_path / "co")


def test_rerun_detects_a_replaced_blob_and_refetches(upstream, tmp_path: Path) -> None:
    src = upstream.source()
    root = tmp_path / "mirror"
    mirror_sources(root, [request(src)])
    repo = source_dir(root, "demo") / "git" / f"{repo_key(src.repo)}.git"
    blob = git.git_text(["rev-parse", f"{src.commit}:data/blob.bin"], repo)
    other = git.git_text(["rev-parse", f"{src.commit}:README.md"], repo)
    target = repo / "objects" / blob[:2] / blob[2:]
    assert target.is_file()  # a few objects arrive loose
    target.chmod(0o644)
    shutil.copyfile(repo / "objects" / other[:2] / other[2:], target)  # valid zlib, the wrong content
    (made,) = mirror_sources(root, [request(src)])
    assert made.action == "updated"
    assert_serves(upstream, root, tmp_path / "co")


def test_rerun_restores_a_deleted_pin_ref_without_the_network(upstream, tmp_path: Path) -> None:
    root, req, repo = mirrored(upstream, tmp_path)
    git.run_git(["update-ref", "-d", f"{PIN_REF}{upstream.commit}"], repo)
    upstream.path.rename(upstream.path.with_name("gone"))  # the ref comes back from the mirror's own objects
    (made,) = mirror_sources(root, [req])
    assert made.action == "updated"
    assert git.git_text(["rev-parse", f"{PIN_REF}{upstream.commit}"], repo) == upstream.commit
    (again,) = mirror_sources(root, [req])
    assert again.action == "unchanged"


def test_rerun_detects_a_deleted_object_of_a_submodule(upstream, tmp_path: Path) -> None:
    src = upstream.source()
    root = tmp_path / "mirror"
    mirror_sources(root, [request(src)])
    sub = source_dir(root, "demo") / "git" / f"{repo_key(upstream.sub_path.as_uri())}.git"
    blob = git.git_text(["rev-parse", f"{upstream.sub_commit}:lib.txt"], sub)
    (sub / "objects" / blob[:2] / blob[2:]).unlink()
    (made,) = mirror_sources(root, [request(src)])
    assert made.action == "updated"
    assert_serves(upstream, root, tmp_path / "co")


def test_a_corrupt_mirror_the_upstream_cannot_repair_fails_loudly(upstream, tmp_path: Path) -> None:
    root, req, repo = mirrored(upstream, tmp_path)
    (pack,) = (repo / "objects" / "pack").glob("*.pack")
    pack.chmod(0o644)
    pack.write_bytes(pack.read_bytes()[:-30])
    upstream.path.rename(upstream.path.with_name("gone"))
    with pytest.raises(ToolError):
        mirror_sources(root, [req])
    assert [p.name for p in (root / "sources").iterdir()] == ["demo"]  # no partial left, nothing claimed ok


# ---- item 8: all-or-nothing checkouts, leftovers of killed runs ---------------------------------------


def test_checkout_from_a_mirror_missing_a_blob_leaves_nothing_and_a_good_mirror_then_works(
    upstream, tmp_path: Path
) -> None:
    src = upstream.source()
    root = tmp_path / "mirror"
    mirror_sources(root, [request(src)])
    repo = source_dir(root, "demo") / "git" / f"{repo_key(src.repo)}.git"
    blob = git.git_text(["rev-parse", f"{src.commit}:data/blob.bin"], repo)
    saved = (repo / "objects" / blob[:2] / blob[2:]).read_bytes()
    (repo / "objects" / blob[:2] / blob[2:]).unlink()
    dest = tmp_path / "co"
    with pytest.raises(ToolError):
        checkout_source(src, dest, git_config=insteadof_config(root, "demo"))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".co", "co"))) == []
    (made,) = mirror_sources(root, [request(src)])  # the re-run sees the hole and fills it
    assert made.action == "updated" and saved
    assert_serves(upstream, root, dest)


def test_leftovers_of_killed_runs_are_removed_and_live_ones_kept(upstream, tmp_path: Path) -> None:
    import fcntl

    src = upstream.source()
    root = tmp_path / "mirror"
    mirror_sources(root, [request(src)])
    sources = root / "sources"
    dead = [sources / ".demo.partial-dead1", sources / ".demo.old-99999999", tmp_path / ".co.partial-dead2"]
    for d in dead:
        (d / "git").mkdir(parents=True)
    live = tmp_path / ".co.partial-live"
    live.mkdir()
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a run still making its checkout
    try:
        git.run_git(
            ["update-ref", "-d", f"{PIN_REF}{src.commit}"],
            source_dir(root, "demo") / "git" / f"{repo_key(src.repo)}.git",
        )
        mirror_sources(root, [request(src)])
        checkout_source(src, tmp_path / "co", git_config=insteadof_config(root, "demo"))
        assert [d for d in dead if d.exists()] == []
        assert live.is_dir()
    finally:
        os.close(fd)
    assert sorted(p.name for p in sources.iterdir()) == ["demo"]


def test_a_killed_checkout_leaves_no_record_and_the_next_run_cleans_up(upstream, tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    dest = tmp_path / "co"
    code = (
        "import sys, time\n"
        "from megacpp_env import checkout, git\n"
        "real = git.checkout_detached\n"
        "def slow(path, sha):\n"
        "    real(path, sha); print('ready', flush=True); time.sleep(60)\n"
        "git.checkout_detached = slow\n"
        "from megacpp_env.spec.model import Source\n"
        f"checkout.checkout_source(Source(name='demo', repo={upstream.url!r}, commit={upstream.commit!r}), {str(dest)!r})\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".co.partial-")]
    assert len(left) == 1 and not dest.exists()
    time.sleep(0.01)
    checkout_source(upstream.source(), dest)
    assert not left[0].exists() and verify_checkout(dest, upstream.source()).ok


# ---- item 4: corrupt mirror indexes and unusable --to, one-line errors ------------------------------


CORRUPT_INDEXES = {
    "truncated": b'{"schema_version": 1, "sources": {"demo": {"pa',
    "wrong-types": b'{"schema_version": "1", "sources": ["demo"]}',
    "wrong-types-entry": b'{"schema_version": 1, "sources": {"demo": 7}}',
    "deep-nesting": b'{"schema_version": 1, "sources": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "huge": b'{"schema_version": 1, "x": "' + b"a" * (80 << 20) + b'"}',
    "non-utf8": b'{"schema_version": 1, "sources": {"\xff\xfe": {}}}',
    "wrong-schema": b'{"schema_version": 99, "sources": {}}',
    "not-an-object": b"[1, 2, 3]",
}


@pytest.mark.parametrize("name", sorted(CORRUPT_INDEXES))
def test_cli_mirror_sources_with_a_corrupt_index_is_a_one_line_error(name: str, tmp_path: Path, capsys) -> None:
    from megacpp_env.cli import main
    from tests.fixtures.git_repos import one_line_error
    from tests.fixtures.srcbuild import REPO_ROOT

    root = tmp_path / "mirror"
    root.mkdir()
    (root / "index.json").write_bytes(CORRUPT_INDEXES[name])
    assert main(["mirror-sources", "smoke", "--to", str(root), "--spec", str(REPO_ROOT / "stack.yaml")]) == 1
    err = one_line_error(capsys)
    assert f"{root / 'index.json'}" in err
    assert not (root / "sources" / "megacpp_smoke_ext").exists()


def test_cli_mirror_sources_with_a_corrupt_source_index_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    from megacpp_env.srcbuild.mirror import MirrorFormatError

    src_dir = tmp_path / "mirror" / "sources" / "demo"
    src_dir.mkdir(parents=True)
    for data in CORRUPT_INDEXES.values():
        (src_dir / "index.json").write_bytes(data)
        with pytest.raises((MirrorFormatError, RefusedError)):
            insteadof_config(tmp_path / "mirror", "demo")


@pytest.mark.parametrize("where", ["file", "below-file", "proc", "symlink-to-file"])
def test_cli_mirror_sources_to_an_unusable_place_is_a_one_line_error(where: str, tmp_path: Path, capsys) -> None:
    from megacpp_env.cli import main
    from tests.fixtures.git_repos import one_line_error
    from tests.fixtures.srcbuild import REPO_ROOT

    blocker = tmp_path / "file"
    blocker.write_text("x")
    (tmp_path / "link").symlink_to(blocker)
    to = {
        "file": blocker,
        "below-file": blocker / "sub",
        "proc": Path("/proc/megacpp-x"),
        "symlink-to-file": tmp_path / "link",
    }[where]
    assert main(["mirror-sources", "smoke", "--to", str(to), "--spec", str(REPO_ROOT / "stack.yaml")]) == 1
    assert f"--to {to}: " in one_line_error(capsys)
    assert blocker.read_text() == "x"


def test_checkout_from_a_mirror_lacking_a_submodule_never_reads_its_upstream(upstream, tmp_path: Path) -> None:
    """The upstream is a local repository here, which the file protocol would reach: the mirror's
    catch-all rewrite still sends it nowhere."""
    from megacpp_env.srcbuild.mirror import mirror_only_config

    src = upstream.source()
    root = tmp_path / "mirror"
    mirror_sources(root, [request(src)])
    index = source_dir(root, "demo") / "index.json"
    doc = json.loads(index.read_text())
    doc["repos"] = {u: e for u, e in doc["repos"].items() if u == upstream.url}
    index.write_text(json.dumps(doc))
    with pytest.raises(ToolError, match="submodule"):
        checkout_source(src, tmp_path / "co", git_config=mirror_only_config(root, "demo"))
    assert not (tmp_path / "co").exists()
    other = Source(name="demo", repo=upstream.sub_path.as_uri(), commit=upstream.sub_commit)
    with pytest.raises(ToolError):
        checkout_source(other, tmp_path / "co2", git_config=mirror_only_config(root, "demo"))


def _hold(path: Path) -> int:
    import fcntl

    fd = os.open(path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def test_killed_downloads_dl_files_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    """`mirror`'s ``.dl-*`` temp files: a killed run's (no lock) go, a running one's (locked) stay."""
    import hashlib

    from megacpp_env.lock.mirror import _fetch_into
    from megacpp_env.lock.pylock import Artifact

    payload = tmp_path / "w-1.0-py3-none-any.whl"
    payload.write_bytes(b"wheel bytes")
    shas = tmp_path / "sha"
    shas.mkdir()
    (shas / ".dl-dead").write_bytes(b"half")
    (shas / ".dl-live").write_bytes(b"half")
    fd = _hold(shas / ".dl-live")
    sha_fd = os.open(shas, os.O_RDONLY | os.O_DIRECTORY)
    try:
        art = Artifact(kind="wheel", url=payload.as_uri(), sha256=hashlib.sha256(b"wheel bytes").hexdigest())
        assert _fetch_into(sha_fd, art)
    finally:
        os.close(sha_fd)
        os.close(fd)
    assert sorted(os.listdir(shas)) == sorted([".dl-live", art.sha256])


def test_killed_artifact_downloads_part_files_are_swept_and_live_ones_kept(tmp_path: Path) -> None:
    """`mirror-artifacts`' ``*.part`` temp files, the same way."""
    import hashlib

    from megacpp_env.artifacts import _download

    target = tmp_path / "d" / "x.cubin"
    target.parent.mkdir()
    dead, live, other = (target.parent / n for n in (".x.cubin.dead.part", ".x.cubin.live.part", ".y.cubin.a.part"))
    for p in (dead, live, other):
        p.write_bytes(b"half")
    fd = _hold(live)
    try:
        _download("u", target, hashlib.sha256(b"data").hexdigest(), lambda _u, sink: sink(b"data"))
    finally:
        os.close(fd)
    assert sorted(p.name for p in target.parent.iterdir()) == sorted([live.name, other.name, "x.cubin"])


def test_a_download_temp_taken_by_a_concurrent_sweep_is_made_again(tmp_path: Path, monkeypatch) -> None:
    """`mirror` downloads in threads, and each sweeps ``.dl-*`` files nobody holds: one made by another
    thread but not yet locked could be swept (the final CI run saw `FileNotFoundError: .dl-…`). The
    maker checks that the file at its name is still its own after locking, else makes another."""
    import fcntl

    from megacpp_env.lock import mirror as lock_mirror

    sha_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    real_flock, swept = fcntl.flock, []

    def flock_after_a_sweep(fd: int, op: int) -> None:
        if not swept:  # a concurrent sweep took the first one between its create and its lock
            (name,) = [n for n in os.listdir(tmp_path) if n.startswith(".dl-")]
            os.unlink(tmp_path / name)
            swept.append(name)
        real_flock(fd, op)

    monkeypatch.setattr(lock_mirror.fcntl, "flock", flock_after_a_sweep)
    try:
        tmp, fd = lock_mirror._locked_temp(sha_fd)
        try:
            assert tmp != swept[0] and (tmp_path / tmp).is_file()
            assert os.stat(tmp, dir_fd=sha_fd).st_ino == os.fstat(fd).st_ino
        finally:
            os.close(fd)
    finally:
        os.close(sha_fd)
