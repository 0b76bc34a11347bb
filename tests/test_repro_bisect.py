"""`bisect-check`: 0 when the environment is the golden's and the project imports from the worktree,
125 (git bisect: skip) when not, 128 (abort) for its own errors, so nothing but the test marks a
commit bad. The worktree under bisect is outside the digest even when the golden inspected it."""

from __future__ import annotations

import json

import pytest

from megacpp_env import git
from megacpp_env.cli import main
from megacpp_env.repro.bisect import outside_git
from megacpp_env.snapshot.document import Snapshot
from tests.fixtures.repro import training_repo
from tests.fixtures.snapshot import make_wheel


@pytest.fixture
def setup(tmp_path, monkeypatch, snap_venv):
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    (tmp_path / "stale").mkdir()
    snap_venv.install(make_wheel(tmp_path / "stale", "cppmega", "0.0.1", {"cppmega/__init__.py": "STALE = 1\n"}))
    repo = training_repo(tmp_path / "training")
    gold = tmp_path / "golden"
    base = ["--spec", str(tmp_path / "none.yaml"), "--golden-dir", str(gold)]
    assert main(["snapshot", *base, "--python", str(snap_venv.python), "--paths", str(repo.path), "--golden", "env"]) == 0

    def check(*args: str) -> int:
        return main(["bisect-check", "env", *base, "--worktree", str(repo.path), *args])

    return repo, check


def _at(repo, label: str) -> None:
    git.checkout_detached(repo.path, repo.commits[label])


def test_match_at_one_commit_skip_at_another(setup, snap_venv, capsys):
    repo, check = setup
    _at(repo, "breaks")  # the worktree moved since the golden (which inspected it): not the environment
    assert check("--json") == 0
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["match"] is True and verdict["golden_digest"] == verdict["live_digest"]
    assert verdict["origin"] == str(repo.path / "cppmega" / "__init__.py")
    _at(repo, "src-layout")
    assert check() == 125
    err = capsys.readouterr().err
    stale = snap_venv.site / "cppmega" / "__init__.py"
    assert f"package cppmega imports from {stale}, not from the worktree {repo.path}\n" in err


def test_a_drifted_environment_is_a_skip(setup, snap_venv, capsys):
    _repo, check = setup
    (snap_venv.site / "demo_pkg" / "ops" / "x.py").write_text("patched = True\n")
    assert check() == 125
    assert "environment drifted: demo_pkg 1.0: 1 file modified since install" in capsys.readouterr().err


def test_uncommitted_changes_to_tracked_files_are_a_skip(setup, capsys):
    repo, check = setup
    (repo.path / "check.py").write_text("print('edited')\n")
    assert check() == 125
    assert "uncommitted changes to 1 tracked file(s) (check.py)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["bisect-check", "no-such-golden", "--golden-dir", "/nonexistent"],
        ["bisect-check"],  # usage
        ["bisect-check", "env", "--no-such-option"],
    ],
)
def test_its_own_errors_abort_the_bisect(args):
    assert main(args) == 128


def test_git_exec_path_is_not_the_environment():
    exec_path = git.git_text(["--exec-path"])
    golden = Snapshot(facts={"env": {"variables": {"PATH": "/usr/bin:/bin"}}})
    env = outside_git({"PATH": f"{exec_path}:{exec_path}:/usr/bin:/bin"}, golden)
    assert env["PATH"] == "/usr/bin:/bin"
    kept = Snapshot(facts={"env": {"variables": {"PATH": f"{exec_path}:/usr/bin"}}})
    assert outside_git({"PATH": f"{exec_path}:/usr/bin"}, kept)["PATH"] == f"{exec_path}:/usr/bin"
