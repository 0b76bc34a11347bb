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
from megacpp_env.lock.mirror import fetch, mirror_lock
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
    assert main(["lock", "cpu", "--spec", str(spec)]) == 0
    mirror = tmp_path / "mirror"
    assert main(["mirror", "cpu", "--to", str(mirror), "--spec", str(spec)]) == 0
    out = capsys.readouterr().out
    assert "mirrored cpu linux/amd64: 10 artifacts (10 fetched, all sha256-verified)" in out

    lock = read_pylock(spec.parent / "locks" / "pylock.cpu.linux-amd64.toml")
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
    assert main(["lock", "smoke", "--platform", "linux/amd64", "--spec", str(spec)]) == 0
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
