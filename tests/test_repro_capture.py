"""Golden capture of a checkout and its re-creation elsewhere, on real git repositories: a binary
diff, a mode change, a deletion, a staged addition, untracked files (an executable, a symlink, a
nested one), an ignored file that is never read, credential-looking files listed as skipped; the
re-created tree proved by its diff and untracked-file hashes; tampering and hostile documents refused."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.repro.capture_tree import capture_checkout
from megacpp_env.repro.document import Capture, CaptureFormatError, load_capture
from megacpp_env.repro.objects import ObjectStore
from megacpp_env.repro.trees import recreate
from megacpp_env.snapshot.collectors.checkouts import inspect_one
from megacpp_env.snapshot.collectors.envvars import Scrubber
from megacpp_env.worktree import content
from tests.fixtures.git_repos import FILE_OK, commit_all, make_repo, write_files

BLOB = bytes(range(256)) * 8


@pytest.fixture
def work(tmp_path):
    """A clone with every kind of local change; its origin is a real repository."""
    origin = tmp_path / "origin"
    make_repo(origin, {"a.txt": "one\n", "data/blob.bin": BLOB, "run.sh": "#!/bin/sh\n", "gone.txt": "x\n",
                       ".gitignore": "*.log\nbuild/\n"})  # fmt: skip
    clone = tmp_path / "work" / "proj"
    git.run_git(["clone", "--quiet", str(origin), str(clone)], config=FILE_OK)
    write_files(clone, {"a.txt": "one\ntwo\n", "data/blob.bin": BLOB[::-1], "added.py": "X = 1\n"})
    git.run_git(["add", "added.py"], clone)
    (clone / "run.sh").chmod(0o755)
    (clone / "gone.txt").unlink()
    write_files(clone, {"notes/todo.md": "todo\n", "tool.sh": "#!/bin/sh\necho hi\n", "debug.log": "ignored\n"})
    (clone / "tool.sh").chmod(0o755)
    (clone / "link").symlink_to("a.txt")
    return clone


def _entry(path: Path) -> dict:
    return inspect_one(path, None, None, Scrubber({}))


def test_capture_then_recreate_gives_the_same_tree(work, tmp_path):
    store = ObjectStore.beside(tmp_path / "golden")
    cap = capture_checkout(str(work), _entry(work), store)
    assert cap.problems == () and cap.skipped == ()
    assert {(u.path, u.mode) for u in cap.untracked} == {
        ("notes/todo.md", "100644"), ("tool.sh", "100755"), ("link", "120000"),
    }  # fmt: skip
    assert store.get(cap.diff) == content.read(work).diff()  # the very bytes diff_hash hashes
    assert b"GIT binary patch" in store.get(cap.diff)
    assert not any(p.read_bytes() == b"ignored\n" for p in (tmp_path / "golden" / "objects" / "sha256").iterdir())
    dest = tmp_path / "again" / "proj"
    dest.parent.mkdir()
    assert recreate(cap, dest, store, {}) == []
    assert content.read(dest).diff() == content.read(work).diff()
    assert (dest / "data/blob.bin").read_bytes() == BLOB[::-1]
    assert os.access(dest / "run.sh", os.X_OK) and os.access(dest / "tool.sh", os.X_OK)
    assert (dest / "link").is_symlink() and os.readlink(dest / "link") == "a.txt"
    assert not (dest / "gone.txt").exists() and not (dest / "debug.log").exists()
    assert git.remote_urls(dest) == git.remote_urls(work)


@pytest.mark.parametrize(
    ("name", "content", "why"),
    [
        (".netrc", b"machine h login u password p\n", "credential file"),
        ("hf_token.txt", b"x\n", "secret-bearing word"),
        ("deploy/key.pem", b"-----BEGIN RSA PRIVATE KEY-----\n", "credential file"),
        ("conf.py", b'URL = "https://bob:s3cret@example.invalid/x"\n', "its content holds a credential"),
        ("env.sh", b"export TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123\n", "its content holds a credential"),
    ],
)
def test_credentials_are_skipped_not_stored(work, tmp_path, name, content, why):
    write_files(work, {name: content})
    store = ObjectStore.beside(tmp_path / "golden")
    cap = capture_checkout(str(work), _entry(work), store)
    (skipped,) = cap.skipped
    assert skipped.path == name and why in skipped.reason
    assert all(content != p.read_bytes() for p in (tmp_path / "golden" / "objects" / "sha256").iterdir())
    dest = tmp_path / "again" / "proj"
    dest.parent.mkdir()
    (missing,) = recreate(cap, dest, store, {})
    assert f"untracked file {name} was not captured" in missing.why and str(dest / name) in missing.remedy


def test_a_tampered_object_is_refused(work, tmp_path):
    store = ObjectStore.beside(tmp_path / "golden")
    cap = capture_checkout(str(work), _entry(work), store)
    obj = store.path(cap.diff)
    obj.chmod(0o644)
    obj.write_bytes(obj.read_bytes().replace(b"two", b"TWO"))
    dest = tmp_path / "again" / "proj"
    dest.parent.mkdir()
    (failed,) = recreate(cap, dest, store, {})
    assert "does not match its sha256" in failed.why and not dest.exists()


def test_a_commit_no_remote_has_is_named_with_the_remedy(work, tmp_path):
    commit_all(work, "local only, never pushed")
    store = ObjectStore.beside(tmp_path / "golden")
    cap = capture_checkout(str(work), _entry(work), store)
    dest = tmp_path / "again" / "proj"
    dest.parent.mkdir()
    (failed,) = recreate(cap, dest, store, {})
    assert f"commit {cap.head} is not on any of its remotes" in failed.why
    assert "push the commit" in failed.remedy and not dest.exists()


def test_a_tree_without_git_is_a_problem_not_a_capture(tmp_path):
    tree = tmp_path / "Megatron-LM"
    write_files(tree, {"megatron/core/__init__.py": ""})
    cap = capture_checkout(str(tree), _entry(tree), ObjectStore.beside(tmp_path / "golden"))
    assert "has no .git" in cap.problems[0] and cap.head is None


def _capture_doc(work, tmp_path) -> tuple[Path, dict]:
    store = ObjectStore.beside(tmp_path / "golden")
    cap = capture_checkout(str(work), _entry(work), store)
    from megacpp_env.repro.document import PythonCapture

    doc = Capture(golden="g", snapshot_digest="sha256:0", python=PythonCapture(version="3.11.7", implementation="CPython",
                  prefix="/v", base_prefix="/b", executable="/v/bin/python"), checkouts={str(work): cap})  # fmt: skip
    path = tmp_path / "golden" / "g.capture.json"
    path.write_text(doc.to_json())
    assert load_capture(path) == doc
    return path, json.loads(path.read_text())


@pytest.mark.parametrize("bad", ["../outside", "/etc/passwd", ".git/hooks/post-checkout", "a/../../x", "a//b"])
def test_the_reader_refuses_paths_outside_the_tree(work, tmp_path, bad):
    path, data = _capture_doc(work, tmp_path)
    key = next(iter(data["checkouts"]))
    data["checkouts"][key]["untracked"][0]["path"] = bad
    path.write_text(json.dumps(data))
    with pytest.raises(CaptureFormatError) as err:
        load_capture(path)
    assert str(err.value) == (
        f"{path}: checkouts.{key}.untracked[0].path: expected a relative path inside the checkout, got {bad!r}"
    )


def test_the_reader_names_the_key_of_a_wrong_type(work, tmp_path):
    path, data = _capture_doc(work, tmp_path)
    key = next(iter(data["checkouts"]))
    data["checkouts"][key]["untracked"][0]["mode"] = "100777"
    path.write_text(json.dumps(data))
    with pytest.raises(CaptureFormatError, match=rf"checkouts\.{key}\.untracked\[0\]\.mode: expected one of"):
        load_capture(path)


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("site", "/etc", "path_entries[0].site: expected a site directory inside the venv ({venv}/...), got '/etc'"),
        ("site", "{venv}/../../etc", "path_entries[0].site: expected a site directory inside the venv"),
        ("file", "../x.pth", "path_entries[0].file: expected a .pth file name, got '../x.pth'"),
    ],
)
def test_path_entries_stay_in_the_venv(work, tmp_path, where, value, message):
    path, data = _capture_doc(work, tmp_path)
    data["path_entries"] = [{"site": "{venv}/lib/python3.11/site-packages", "file": "m.pth", "lines": ["x"], where: value}]
    path.write_text(json.dumps(data))
    with pytest.raises(CaptureFormatError, match=re.escape(message)):
        load_capture(path)


def test_a_build_env_cannot_preload_code(work, tmp_path):
    path, data = _capture_doc(work, tmp_path)
    data["distributions"] = {"x": {"name": "x", "version": "1", "installer": "pip", "requested": True,
                                   "origin": "local-build", "build": {"checkout": "proj", "build_env": {"LD_PRELOAD": "/tmp/evil.so"}}}}  # fmt: skip
    path.write_text(json.dumps(data))
    with pytest.raises(CaptureFormatError, match=re.escape("distributions.x.build.build_env.LD_PRELOAD: 'LD_PRELOAD' may not be set")):
        load_capture(path)


def test_a_killed_reproduces_staging_is_swept_and_a_live_one_kept(work, tmp_path):
    """Issue 19 item 8's sibling in reproduce: ``.<name>.partial-*`` left by a killed run goes on the
    next run; one that a live process holds (flock) stays."""
    import fcntl
    import os

    store = ObjectStore.beside(tmp_path / "golden")
    cap = capture_checkout(str(work), _entry(work), store)
    dest = tmp_path / "again" / "proj"
    dest.parent.mkdir()
    dead, live = dest.parent / ".proj.partial-dead", dest.parent / ".proj.partial-live"
    for d in (dead, live):
        (d / ".git").mkdir(parents=True)
    fd = os.open(live, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert recreate(cap, dest, store, {}) == []
    finally:
        os.close(fd)
    assert sorted(p.name for p in dest.parent.iterdir()) == [".proj.partial-live", "proj"]
