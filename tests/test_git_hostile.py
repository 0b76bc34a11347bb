"""Reading a repository never runs what the repository names (issue 12, class 4, git side):
``core.fsmonitor``, clean/smudge/process filters (also through ``include.path`` and in submodules),
textconv and external diff drivers, hooks and the environment's program redirects. Each trap writes
a marker file; the markers must not exist after ``verify-checkout`` and ``snapshot``."""

from __future__ import annotations

import json
import os
import shlex
import subprocess

import pytest

from megacpp_env import git
from megacpp_env.cli import main
from tests.fixtures.git_repos import commit_all, make_repo


def _trap(marker_dir, name):
    """A shell command that leaves a marker and behaves like ``cat`` (so git would work if it ran it)."""
    return f"touch {shlex.quote(str(marker_dir / name))}; cat"


def _git_config(repo, *args):
    subprocess.run(["git", "config", *args], cwd=repo, check=True)


def _arm(repo, markers, *, via_include=False):
    (repo / ".gitattributes").write_text("* filter=evil diff=evil merge=evil\n")
    commit_all(repo, "attributes")
    cfg = {
        "core.fsmonitor": _trap(markers, "fsmonitor") + " >/dev/null; true",
        "filter.evil.clean": _trap(markers, "clean"),
        "filter.evil.smudge": _trap(markers, "smudge"),
        "filter.evil.process": _trap(markers, "process"),
        "filter.evil.required": "true",
        "diff.evil.textconv": _trap(markers, "textconv"),
        "diff.evil.command": _trap(markers, "diffcmd"),
        "diff.external": _trap(markers, "external"),
        "core.pager": _trap(markers, "pager"),
        "pager.status": _trap(markers, "pager-status"),
        "core.hooksPath": str(markers / "hooks"),
    }
    hooks = markers / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("post-index-change", "post-checkout", "pre-commit", "reference-transaction"):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch {shlex.quote(str(markers / hook))}\n")
        (hooks / hook).chmod(0o755)
    if via_include:
        inc = repo / ".git" / "evil.inc"
        for key, value in cfg.items():
            _git_config(repo, "--file", str(inc), key, value)
        _git_config(repo, "include.path", str(inc))
    else:
        for key, value in cfg.items():
            _git_config(repo, key, value)
    (repo / "a.txt").write_text("changed but the same size!\n"[: len("a\n")])  # same size: git must compare content
    os.utime(repo / "a.txt", (0, 0))


@pytest.mark.parametrize("via_include", [False, True])
def test_verify_checkout_and_snapshot_run_nothing_the_repository_names(
    tmp_path, monkeypatch, capsys, snap_venv, via_include
):
    markers = tmp_path / "markers"
    markers.mkdir()
    repo = tmp_path / "checkout"
    make_repo(repo, {"a.txt": "a\n", "b.bin": "b\n"})
    _arm(repo, markers, via_include=via_include)
    monkeypatch.setenv("GIT_EXTERNAL_DIFF", _trap(markers, "env-external"))
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.fsmonitor")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", _trap(markers, "env-fsmonitor") + " >/dev/null; true")
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["verify-checkout", str(repo), "--json"]) == 1  # dirty and no pin: not ok, but no command ran
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["dirty"] is True
    out = tmp_path / "snap.json"
    rc = main(
        [
            "snapshot",
            "--spec",
            str(tmp_path / "none.yaml"),
            "--python",
            str(snap_venv.python),
            "-o",
            str(out),
            "--paths",
            str(repo),
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert sorted(p.name for p in markers.iterdir()) == ["hooks"]
    facts = json.loads(out.read_text())["facts"]["checkouts"][str(repo.resolve())]
    assert "error" not in facts and facts["dirty"] is True


def test_a_submodule_config_runs_nothing_either(tmp_path, upstream):
    """``git status`` in a superproject inspects submodules with *their* config; each submodule is now
    inspected on its own, with its own drivers neutralised."""
    from megacpp_env.worktree.status import checkout_state

    markers = tmp_path / "markers"
    markers.mkdir()
    work = tmp_path / "w"
    git.init(work)
    git.fetch_commit(work, upstream.url, upstream.commit)
    git.checkout_detached(work, upstream.commit)
    git.submodule_update(work, allow_file_protocol=True)
    sub = next(work / s.path for s in git.submodule_status(work))
    (sub / ".git").read_text()  # a gitfile: config lives in the superproject's .git/modules
    _arm(sub, markers)
    state = checkout_state(work)
    assert state.dirty is True
    assert sorted(p.name for p in markers.iterdir()) == ["hooks"]


def test_an_untracked_nested_repository_is_recorded_not_a_traceback(tmp_path, monkeypatch, capsys, snap_venv):
    """It gave a traceback (read_bytes of a directory) and wiped the whole checkouts section."""
    repo = tmp_path / "checkout"
    make_repo(repo, {"a.txt": "a\n"})
    make_repo(repo / "nested", {"n.txt": "n\n"})  # untracked, with its own .git
    os.mkfifo(repo / "a-fifo")  # untracked FIFO: must not be opened (it would block)
    other = tmp_path / "other"
    make_repo(other, {"o.txt": "o\n"})
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "snap.json"
    rc = main(
        [
            "snapshot",
            "--spec",
            str(tmp_path / "none.yaml"),
            "--python",
            str(snap_venv.python),
            "-o",
            str(out),
            "--paths",
            str(repo),
            str(other),
        ]
    )
    assert rc == 0, capsys.readouterr().err
    checkouts = json.loads(out.read_text())["facts"]["checkouts"]
    assert "error" not in checkouts
    mine = checkouts[str(repo.resolve())]
    # the nested repository and the FIFO (git's listing passes over a FIFO; the judge lists it, never opens it)
    assert mine["untracked"] == 2 and mine["dirty"] is True and "error" not in mine
    assert "error" not in checkouts[str(other.resolve())]
    assert main(["verify-checkout", str(repo)]) == 1
    assert "Traceback" not in capsys.readouterr().err
