from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.errors import ToolError
from megacpp_env.redact import strip_url_credentials
from megacpp_env.worktree import content
from tests.fixtures.git_repos import make_repo, write_files


def test_head_and_clean_repo(tmp_path: Path) -> None:
    sha = make_repo(tmp_path / "r", {"a.txt": "a\n"})
    repo = tmp_path / "r"
    assert git.head_commit(repo) == sha
    assert git.is_git_checkout(repo)
    assert not git.is_git_checkout(repo / "missing")
    tree = content.read(repo)
    assert not content.is_dirty(repo) and not tree.delta.dirty
    assert tree.delta.untracked == ()
    assert tree.diff() == b""
    assert tree.diff_hash() == hashlib.sha256(b"").hexdigest()


def test_subdirectory_is_not_a_checkout_top(tmp_path: Path) -> None:
    make_repo(tmp_path / "r", {"d/a.txt": "a\n"})
    assert not git.is_git_checkout(tmp_path / "r" / "d")


def test_changes_dirty_and_diff_hash(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    make_repo(repo, {"a.txt": "a\n", "b.txt": "b\n", "c.bin": b"\x00\x01"})
    write_files(repo, {"a.txt": "A\n", "new/n.txt": "n\n", "c.bin": b"\x00\x02"})
    (repo / "b.txt").unlink()
    assert content.is_dirty(repo)
    tree = content.read(repo)
    assert [(c.status, c.path) for c in tree.delta.changes()] == [
        ("M", "a.txt"),
        ("D", "b.txt"),
        ("M", "c.bin"),
        ("?", "new/n.txt"),
    ]
    diff = tree.diff()
    assert b"GIT binary patch" in diff
    assert tree.diff_hash() == hashlib.sha256(diff).hexdigest()
    assert tree.delta.untracked == ("new/n.txt",)
    before = tree.untracked_hash()
    write_files(repo, {"new/n.txt": "changed\n"})
    assert content.read(repo).untracked_hash() != before


def test_diff_hash_ignores_user_diff_config(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    make_repo(repo, {"a.txt": "a\n"})
    write_files(repo, {"a.txt": "b\n"})
    first = content.read(repo).diff_hash()
    for key, value in (("diff.noprefix", "true"), ("color.diff", "always"), ("diff.context", "9"),
                       ("diff.algorithm", "histogram"), ("diff.relative", "true"), ("diff.mnemonicPrefix", "true")):
        git.run_git(["config", key, value], repo)
    assert content.read(repo).diff_hash() == first


def test_show_file_and_mode(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    make_repo(repo, {"a.txt": "a\n"})
    assert git.show_file(repo, "a.txt") == b"a\n"
    assert git.show_file(repo, "nope.txt") is None
    assert git.file_mode(repo, "a.txt") == "100644"
    assert git.file_mode(repo, "nope.txt") is None


def test_submodule_status_recursive(upstream) -> None:  # type: ignore[no-untyped-def]
    clone = upstream.path.parent / "clone"
    git.run_git(["clone", "--quiet", upstream.url, str(clone)], config={"protocol.file.allow": "always"})
    subs = git.submodule_status(clone)
    assert [(s.path, s.expected, s.actual) for s in subs] == [("third_party/lib", upstream.sub_commit, None)]
    git.submodule_update(clone, allow_file_protocol=True)
    (sub,) = git.submodule_status(clone)
    assert sub.matches and sub.actual == upstream.sub_commit
    assert git.gitlinks(clone) == {"third_party/lib": upstream.sub_commit}


def test_fetch_commit_by_sha_is_shallow(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    work = tmp_path / "w"
    git.init(work)
    assert git.fetch_commit(work, upstream.url, upstream.commit) is True
    assert git.has_commit(work, upstream.commit)
    assert not git.has_commit(work, upstream.tip)


def test_fetch_unknown_commit_fails(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    work = tmp_path / "w"
    git.init(work)
    with pytest.raises(ToolError, match="not reachable"):
        git.fetch_commit(work, upstream.url, "1" * 40)


@pytest.mark.parametrize(
    ("url", "clean"),
    [
        ("https://user:tok@example.invalid/x.git", "https://example.invalid/x.git"),
        ("https://example.invalid/x.git", "https://example.invalid/x.git"),
        ("git@example.invalid:x/y.git", "git@example.invalid:x/y.git"),
        ("file:///tmp/x", "file:///tmp/x"),
    ],
)
def test_strip_credentials(url: str, clean: str) -> None:
    assert strip_url_credentials(url) == clean


def test_remote_urls_strip_credentials(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    make_repo(repo, {"a": "a"})
    git.set_remote(repo, "origin", "https://u:secret@example.invalid/r.git")
    assert git.remote_urls(repo) == {"origin": "https://example.invalid/r.git"}


def test_local_url_detection() -> None:
    assert git.is_local_url("file:///x")
    assert git.is_local_url("/srv/x.git")
    assert not git.is_local_url("https://example.invalid/x.git")
    assert not git.is_local_url("git://127.0.0.1:9418/x.git")
    assert not git.is_local_url("git@example.invalid:x.git")


def test_add_exclude_once_and_the_judge_ignores_it(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    make_repo(repo, {"a": "a"})
    assert git.add_exclude(repo, "/x.json")
    assert not git.add_exclude(repo, "/x.json")
    (repo / "x.json").write_text("{}")
    assert content.is_dirty(repo)  # .git/info/exclude hides nothing from the worktree judge


def test_every_command_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="megacpp_env.git")
    make_repo(tmp_path / "r", {"a": "a"})
    git.head_commit(tmp_path / "r")
    assert any("rev-parse --verify --quiet HEAD^{commit}" in r.getMessage() for r in caplog.records)


def test_failure_raises_tool_error(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="git rev-parse HEAD failed"):
        git.run_git(["rev-parse", "HEAD"], tmp_path)


def test_unusable_git_dir_raises_instead_of_looking_unversioned(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    (repo / ".git").write_text("gitdir: /nonexistent/place\n")
    with pytest.raises(ToolError):
        git.is_git_checkout(repo)


def test_missing_cwd_is_a_tool_error(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    with pytest.raises(ToolError) as exc:
        git.run_git(["rev-parse", "HEAD"], missing)
    assert str(exc.value) == f"git rev-parse HEAD could not run in {missing}: No such file or directory"
    with pytest.raises(ToolError, match="could not run in"):  # check=False too: git did not run at all
        git.head_commit(missing)


def test_credentials_never_reach_messages_or_logs(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="megacpp_env.git")
    work = tmp_path / "w"
    git.init(work)
    url = "https://user:tok3n@127.0.0.1:1/x.git"
    with pytest.raises(ToolError) as exc:
        git.fetch_commit(work, url, "1" * 40)
    message = str(exc.value)
    assert "tok3n" not in message and "127.0.0.1:1/x.git" in message
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "tok3n" not in logged and "fetch --quiet --depth 1 --no-tags -- https://127.0.0.1:1/x.git" in logged
    with pytest.raises(ToolError) as exc:
        git.run_git(["ls-remote", url], work)
    assert "tok3n" not in str(exc.value)
