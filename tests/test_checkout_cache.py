"""A checkout's facts are reused while the stat signature of everything the judge read holds (and
no git command runs then), and inspected again after any change a snapshot must see: a tracked file
edited (again), an untracked file, a commit, a remote, a provenance record, an index flag, a change
inside a submodule."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.snapshot.collectors import checkouts
from megacpp_env.snapshot.collectors.envvars import Scrubber
from megacpp_env.snapshot.options import Cache
from megacpp_env.worktree import content
from tests.fixtures.git_repos import FILE_OK, commit_all, make_repo, write_files


@pytest.fixture
def repo(tmp_path):
    path = tmp_path / "proj"
    make_repo(path, {"a.txt": "one\n", "b/c.txt": "two\n"})
    time.sleep(1.1)  # files as old as the index are "racily clean": git rewrites its index until they are not
    return path


@pytest.fixture
def collect(tmp_path, monkeypatch):
    """Collect one checkout with a private cache; the racy window is off (tested on its own below)."""
    from megacpp_env.snapshot.verify import checkout_cache

    monkeypatch.setattr(checkout_cache, "RACY_NS", -(10**18))
    calls: list[str] = []
    real = git.run_git

    def counting(args, *a, **k):
        calls.append(args[0])
        return real(args, *a, **k)

    monkeypatch.setattr(git, "run_git", counting)

    cache = Cache(root=tmp_path / "cache", key=b"k" * 32, records=tmp_path / "cache" / "r")

    def run(path: Path) -> dict:
        calls.clear()
        return checkouts.collect(None, [path], {}, Scrubber({}), cache, [])[str(path)]

    return run, calls


def _settle(repo: Path, run) -> dict:
    """Inspect until the facts are stored (git may rewrite its index on the first status after a
    change when a read is allowed to; the tool's reads are not)."""
    facts = run(repo)
    run(repo)
    return facts


def test_reused_while_unchanged(repo, collect):
    run, calls = collect
    first = run(repo)
    assert "ls-tree" in calls
    run(repo)
    again = run(repo)
    assert again == first and calls == []  # a stat of each thing the judge read; no git command


@pytest.mark.parametrize(
    "change",
    ["edit", "edit-again", "untracked", "commit", "remote", "provenance", "assume-unchanged", "same-size", "rogue-ignore"],
)
def test_inspected_again_after_a_change(repo, collect, change):
    run, calls = collect
    if change == "edit-again":
        write_files(repo, {"a.txt": "one\nedited\n"})
        time.sleep(1.1)
    _settle(repo, run)
    run(repo)
    assert calls == []
    if change.startswith("edit"):
        write_files(repo, {"a.txt": "one\nchanged again\n"})
    elif change == "untracked":
        write_files(repo, {"b/new.txt": "new\n"})
    elif change == "commit":
        write_files(repo, {"a.txt": "three\n"})
        commit_all(repo, "next")
    elif change == "remote":
        git.run_git(["remote", "add", "origin", "https://example.invalid/proj.git"], repo, config=FILE_OK)
    elif change == "provenance":
        (repo / ".megacpp-checkout.json").write_text('{"source": "x", "url": "u", "commit": "c"}')
        git.add_exclude(repo, "/.megacpp-checkout.json")
    elif change == "assume-unchanged":
        git.run_git(["update-index", "--assume-unchanged", "a.txt"], repo, config=FILE_OK)
        write_files(repo, {"a.txt": "EVIL\n"})
    elif change == "same-size":
        before = (repo / "a.txt").stat()
        write_files(repo, {"a.txt": "ONE\n"})
        os.utime(repo / "a.txt", ns=(before.st_atime_ns, before.st_mtime_ns))
    else:
        write_files(repo, {"b/.gitignore": "*\n", "b/evil.so": "x"})
    facts = run(repo)
    assert "ls-tree" in calls
    assert facts["head"] == git.head_commit(repo) and facts["diff_hash"] == content.read(repo).diff_hash()
    assert facts["untracked_hash"] == content.read(repo).untracked_hash() and facts.get("remotes") == git.remote_urls(repo)


def test_a_change_inside_the_racy_window_is_not_cached(repo, tmp_path, monkeypatch):
    """With the real window: a tree changed a moment ago is inspected again next time."""
    from megacpp_env.snapshot.verify import checkout_cache

    cache = Cache(root=tmp_path / "cache", key=b"k" * 32, records=tmp_path / "cache" / "r")
    monkeypatch.setattr(checkout_cache, "signature", lambda *a: ("same", time.time_ns()))
    inspected = []
    for _ in range(2):
        checkout_cache.cached(repo, "k", cache, lambda: inspected.append(1) or {"head": "x"}, environ={}, notes=[])
    assert len(inspected) == 2 and not list((tmp_path / "cache").glob("checkout-*"))


def test_a_change_inside_a_submodule_is_seen(tmp_path, collect):
    run, calls = collect
    sub = tmp_path / "sub"
    make_repo(sub, {"lib.txt": "x\n"})
    sup = tmp_path / "sup"
    make_repo(sup, {"README": "r\n"}, submodules={"third_party/sub": sub.as_uri()})
    git.run_git(["submodule", "update", "--init"], sup, config=FILE_OK, trusted=True)
    first = _settle(sup, run)
    run(sup)
    assert calls == []
    write_files(sup, {"third_party/sub/lib.txt": "y\n"})
    facts = run(sup)
    assert facts != first and facts["content_changed"] == ["third_party/sub/lib.txt"] and facts["submodules_hash"]
