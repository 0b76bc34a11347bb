"""`mirror`: download + verify + content-addressed store; then install with the index servers gone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from megacpp_env.cli import main
from megacpp_env.errors import VerificationError
from megacpp_env.fsutil import sha256_file
from megacpp_env.lock.mirror import DownloadError, fetch, mirror_lock
from megacpp_env.lock.pylock import Artifact, read_pylock
from tests.fixtures.index import IndexServer, write_lock_spec


@pytest.fixture
def private_indexes(local_indexes, monkeypatch, tmp_path):
    """Servers of this test only (so it can stop them), over the session's index directories."""
    pypi, nightly = IndexServer(local_indexes.pypi.root).start(), IndexServer(local_indexes.nightly.root).start()
    monkeypatch.setenv("UV_DEFAULT_INDEX", pypi.url)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    yield pypi, nightly
    pypi.stop()
    nightly.stop()


def test_mirror_then_install_with_the_index_gone(private_indexes, tmp_path, capsys):
    pypi, nightly = private_indexes
    spec = write_lock_spec(tmp_path / "repo", nightly.url)
    assert main(["lock", "resolve", "cpu", "--spec", str(spec)]) == 0
    mirror = tmp_path / "mirror"
    assert main(["mirror", "cpu", "--to", str(mirror), "--spec", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "mirrored cpu linux/amd64: 12 artifacts (12 fetched, all sha256-verified)" in out  # 10 + the tool's tomli-w, nvidia-ml-py

    lock = read_pylock(spec.parent / "locks" / "pylock.cpu-linux-amd64.toml")
    for art in (a for p in lock.packages for a in p.artifacts):
        stored = mirror / "sha256" / art.sha256
        assert sha256_file(stored) == art.sha256
        assert (mirror / "files" / art.filename).stat().st_ino == stored.stat().st_ino  # hard link
    manifest = json.loads((mirror / "mirror.json").read_text())
    assert {e["filename"] for e in manifest} == {a.filename for p in lock.packages for a in p.artifacts}

    pypi.stop()
    nightly.stop()  # upstream pruned: only the mirror is left
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)  # its own pip (ensurepip, offline)
    py = venv / "bin" / "python"
    export = spec.parent / "locks" / "cpu.linux-amd64.requirements.txt"
    pip = [str(py), "-m", "pip", "--isolated", "--disable-pip-version-check"]
    subprocess.run(
        [
            *pip,
            "install",
            "-q",
            "--no-index",
            "--find-links",
            str(mirror / "files"),
            "--require-hashes",
            "--no-deps",
            "-r",
            str(export),
        ],
        check=True,
    )
    got = subprocess.run(
        [str(py), "-c", "import torch, fastpath; print(torch.__version__)"], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert got == "2.13.0.dev20261101+cu132"

    # re-running with the servers gone fetches nothing (everything is in the store already)
    assert main(["mirror", "cpu", "--to", str(mirror), "--spec", str(spec), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["locks"][0]["fetched"] == 0


def test_hash_mismatch_is_refused_and_nothing_stored(local_indexes, tmp_path):
    files = Path(local_indexes.pypi.root) / "files"
    whl = next(files.glob("six-*.whl"))
    url = local_indexes.pypi.url.removesuffix("/simple") + f"/files/{whl.name}"
    bad = Artifact(kind="wheel", url=url, sha256="0" * 64)
    with pytest.raises(VerificationError, match="does not match the lock's 0000"):
        fetch(tmp_path / "m", bad)
    assert not any((tmp_path / "m" / "sha256").iterdir())
    good = Artifact(kind="wheel", url=url, sha256=sha256_file(whl))
    assert fetch(tmp_path / "m", good) is True
    assert fetch(tmp_path / "m", good) is False


def test_mirror_without_lock_names_it(tmp_path, capsys, local_indexes):
    spec = write_lock_spec(tmp_path / "repo", local_indexes.nightly.url)
    assert main(["mirror", "smoke", "--to", str(tmp_path / "m"), "--spec", str(spec)]) == 1
    assert "no lock for smoke linux/amd64" in capsys.readouterr().err


def test_refuses_non_http_urls(tmp_path):
    from megacpp_env.lock.pylock import Lock, LockedPackage

    lock = Lock(
        packages=(
            LockedPackage(
                name="x",
                version="1",
                artifacts=(Artifact(kind="wheel", url="ftp://example/x-1-py3-none-any.whl", sha256="1" * 64),),
            ),
        )
    )
    with pytest.raises(VerificationError, match="not an http"):
        mirror_lock(lock, tmp_path)


def test_unreachable_artifact_is_a_one_line_error(private_indexes, tmp_path, capsys):
    pypi, nightly = private_indexes
    spec = write_lock_spec(tmp_path / "repo", nightly.url)
    assert main(["lock", "resolve", "smoke", "--platform", "linux/amd64", "--spec", str(spec)]) == 0
    capsys.readouterr()
    files_url = pypi.url.removesuffix("/simple")
    pypi.stop()
    nightly.stop()
    rc = main(["mirror", "smoke", "--to", str(tmp_path / "m"), "--platform", "linux/amd64", "--spec", str(spec)])
    err = capsys.readouterr().err
    assert rc == 1
    assert err.startswith(f"megacpp-env mirror: error: cannot download {files_url}/")
    assert err.count("\n") == 1 and "Traceback" not in err


def test_download_errors_name_the_url(local_indexes, tmp_path):
    from megacpp_env.lock.mirror import DownloadError

    missing = local_indexes.pypi.url.removesuffix("/simple") + "/files/nothere-1.0-py3-none-any.whl"
    with pytest.raises(DownloadError, match=f"^cannot download {missing}: HTTP 404 File not found$"):
        fetch(tmp_path / "m", Artifact(kind="wheel", url=missing, sha256="1" * 64))
    closed = "http://127.0.0.1:9/x-1-py3-none-any.whl"
    with pytest.raises(DownloadError, match=f"^cannot download {closed}: "):
        fetch(tmp_path / "m", Artifact(kind="wheel", url=closed, sha256="1" * 64))
    assert not any((tmp_path / "m" / "sha256").iterdir())


# ---- names from URLs never leave --to (issue 12, class 3) ------------------------------------------

import os  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from megacpp_env import layout  # noqa: E402
from megacpp_env.errors import MegacppEnvError  # noqa: E402
from megacpp_env.lock.pylock import Lock, LockedPackage, render_pylock  # noqa: E402
from tests.fixtures.snapshot import make_wheel  # noqa: E402

EVIL_NAMES = [
    "..%2F..%2FVICTIM.txt",
    "..%2f..%2fx-1.0-py3-none-any.whl",
    "%2e%2e%2f%2e%2e%2fVICTIM.txt",
    "..%5C..%5CVICTIM.txt",
    "%2Ftmp%2FVICTIM.txt",
    "x-1.0-py3-none-any.whl%00.txt",
    "x-1.0-py3-none-any.whl%0Aevil",
    "..",
    "%2E%2E",
    "",
    "x-1.0-py3-none-any.whl%2F..%2F..%2FVICTIM.txt",
    "other-1.0-py3-none-any.whl",  # a valid name of another project
    "x-6.6.6-py3-none-any.whl",  # of another version
    "x-1.0.tar.bz2",
    "x-1.0-py3-none-any.whl%E2%80%AE",  # U+202E
]


def _tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _served_wheel(tmp_path):
    """A real wheel ``x 1.0`` served over file:// (the mirror downloads it like any URL)."""
    (tmp_path / "srv").mkdir()
    whl = make_wheel(tmp_path / "srv", "x", "1.0", {"x.py": "X = 1\n"})
    return whl, sha256_file(whl)


def _lock_of(url, sha, name="x", version="1.0"):
    art = Artifact(kind="wheel", url=url, sha256=sha)
    return Lock(packages=(LockedPackage(name=name, version=version, artifacts=(art,)),))


@pytest.mark.parametrize("evil", EVIL_NAMES)
def test_a_file_name_from_a_url_never_leaves_the_mirror(tmp_path, evil):
    whl, sha = _served_wheel(tmp_path)
    victim = tmp_path / "VICTIM.txt"
    victim.write_text("precious\n")
    dest = tmp_path / "a" / "b" / "mirror"
    before = _tree(tmp_path)
    url = whl.parent.as_uri() + "/" + evil
    with pytest.raises(MegacppEnvError):
        mirror_lock(_lock_of(url, sha), dest)
    assert victim.read_text() == "precious\n"
    assert [p for p in _tree(tmp_path) if p not in before and not p.startswith("a")] == []
    assert not (dest / "files").exists() or not any((dest / "files").iterdir())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    parts=st.lists(
        st.sampled_from(
            [
                "..",
                ".",
                "%2F",
                "%2f",
                "/",
                "%5C",
                "%2e",
                "%00",
                "%0A",
                "VICTIM.txt",
                "x-1.0-py3-none-any.whl",
                "x-1.0.tar.gz",
                "%252F",
                "~",
            ]
        ),
        min_size=1,
        max_size=6,
    )
)
def test_generated_url_tails_are_refused_or_stay_inside(tmp_path, parts):
    from megacpp_env.lock.mirror import artifact_filename

    tail = "".join(parts)
    art = Artifact(kind="wheel", url="https://files.example/p/" + tail, sha256="a" * 64)
    pkg = LockedPackage(name="x", version="1.0", artifacts=(art,))
    try:
        name = artifact_filename(art, pkg)
    except MegacppEnvError:
        return
    assert name in ("x-1.0-py3-none-any.whl", "x-1.0.tar.gz")
    root = tmp_path / "m"
    assert (root / "files" / name).resolve().parent == (root / "files").resolve()


@pytest.mark.parametrize("sha", ["../../VICTIM", "a" * 63, "A" * 64, "a" * 64 + "/"])
def test_a_hash_that_is_not_64_hex_names_no_file(tmp_path, sha):
    whl, _ = _served_wheel(tmp_path)
    with pytest.raises(MegacppEnvError, match="64 lowercase hex"):
        mirror_lock(_lock_of(whl.as_uri(), sha), tmp_path / "m")
    assert not (tmp_path / "VICTIM").exists()


def test_planted_symlinks_in_the_mirror_are_never_followed(tmp_path):
    whl, sha = _served_wheel(tmp_path)
    victim = tmp_path / "VICTIM.txt"
    victim.write_text("precious\n")
    dest = tmp_path / "m"
    (dest / "files").mkdir(parents=True)
    (dest / "sha256").mkdir()
    (dest / "files" / whl.name).symlink_to(victim)  # the link name the mirror writes
    (dest / "sha256" / sha).symlink_to(victim)  # a "stored" artifact that is a link
    os.mkfifo(dest / "sha256" / ("f" * 64))
    (dest / "mirror.json").symlink_to(victim)
    victim.write_text("[]")
    files = mirror_lock(_lock_of(whl.as_uri(), sha), dest)
    assert [f.filename for f in files] == [whl.name]
    assert victim.read_text() == "[]"
    for p in (dest / "files" / whl.name, dest / "sha256" / sha, dest / "mirror.json"):
        assert not p.is_symlink() and p.is_file()
    assert sha256_file(dest / "files" / whl.name) == sha
    from megacpp_env.lock.mirror import verify_mirror

    assert set(verify_mirror(dest)) == {"f" * 64}


@pytest.mark.parametrize("sub", ["files", "sha256"])
def test_a_mirror_subdirectory_that_is_a_symlink_is_refused(tmp_path, sub):
    whl, sha = _served_wheel(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "m"
    dest.mkdir()
    (dest / sub).symlink_to(outside)
    with pytest.raises(MegacppEnvError, match="not a plain directory"):
        mirror_lock(_lock_of(whl.as_uri(), sha), dest)
    assert list(outside.iterdir()) == []


def test_mirror_to_an_existing_file_is_a_one_line_error(tmp_path, capsys):
    whl, sha = _served_wheel(tmp_path)
    spec = write_lock_spec(tmp_path / "repo", "https://nightly.example/simple")
    lock_file = layout.lock_path(spec.parent, "smoke", "linux/amd64")
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    lock_file.write_text(render_pylock(_lock_of(whl.as_uri(), sha)))
    target = tmp_path / "a-file"
    target.write_text("keep\n")
    rc = main(["mirror", "smoke", "--platform", "linux/amd64", "--to", str(target), "--spec", str(spec)])
    err = capsys.readouterr().err
    assert rc == 1
    assert err == f"megacpp-env mirror: error: --to: {target} exists and is not a directory\n"
    assert target.read_text() == "keep\n"


def test_mirror_cli_refuses_a_traversal_name_in_a_committed_lock(tmp_path, capsys):
    whl, sha = _served_wheel(tmp_path)
    victim = tmp_path / "VICTIM.txt"
    victim.write_text("precious\n")
    spec = write_lock_spec(tmp_path / "repo", "https://nightly.example/simple")
    lock_file = layout.lock_path(spec.parent, "smoke", "linux/amd64")
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    evil = whl.parent.as_uri() + "/..%2F..%2F..%2FVICTIM.txt"
    # the writer refuses such a name (packaging.pylock): the attacker edits the committed text instead
    good = whl.parent.as_uri() + "/" + whl.name
    text = render_pylock(_lock_of(good, sha))
    assert text.count(good) == 1
    lock_file.write_text(text.replace(good, evil))
    dest = tmp_path / "repo" / "m1" / "m2"
    rc = main(["mirror", "smoke", "--platform", "linux/amd64", "--to", str(dest), "--spec", str(spec)])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert victim.read_text() == "precious\n"


# ---- issue 19: a total deadline, and no FIFO behind a file:// URL ---------------------------------


def test_a_trickling_index_hits_the_deadline(tmp_path, monkeypatch):
    import os

    from megacpp_env.lock.mirror import _download
    from tests.fixtures.faultyhttp import response, serve, trickle

    monkeypatch.setenv("MEGACPP_NET_DEADLINE", "2")
    fd = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with serve(lambda m, p, h: trickle(response(200, {}, b"x" * 100), 0.3)) as server, pytest.raises(
            DownloadError, match=r"cannot download http://.*/w\.whl: no complete answer within the deadline of 2 s"
        ):
            _download(f"http://{server.host}/w.whl", fd)
    finally:
        os.close(fd)


def test_a_fifo_behind_a_file_url_is_refused(tmp_path):
    import os

    from megacpp_env.lock.mirror import _download

    os.mkfifo(tmp_path / "w.whl")
    fd = os.open(tmp_path / "out", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(DownloadError, match="not a regular file"):
            _download((tmp_path / "w.whl").as_uri(), fd)
    finally:
        os.close(fd)
