"""``facts extract`` judges its checkout by content (issue 31, defect 8; fixed by issue 28's worktree
judge): facts read from a tree that git's index flags or an ignore file make look clean are never
marked ``verified``, and a file counts as absent only when it is absent. Real repositories."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.errors import RefusedError
from megacpp_env.facts.extract import ExtractRequest, extract
from tests.fixtures.git_repos import make_repo

FILES: dict[str, str | bytes] = {
    "pyproject.toml": '[project]\nname = "demo"\nversion = "1.0"\ndependencies = ["numpy"]\n',
    "setup.py": "from setuptools import setup\nsetup()\n",
    "demo/__init__.py": "",
    "big/asset.bin": "blob\n",
}


def _repo(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "demo"
    sha = make_repo(repo, dict(FILES))
    return repo, sha


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _verified(repo: Path, sha: str, **kw: object) -> bool:
    return extract(ExtractRequest(source="demo", commit=sha, origin=repo, **kw)).verified  # type: ignore[arg-type]


def test_a_clean_checkout_at_the_pin_is_verified(tmp_path: Path) -> None:
    repo, sha = _repo(tmp_path)
    assert _verified(repo, sha)


def test_an_edit_under_assume_unchanged_is_not_verified(tmp_path: Path) -> None:
    repo, sha = _repo(tmp_path)
    _git(repo, "update-index", "--assume-unchanged", "setup.py")
    (repo / "setup.py").write_text("import os; os.system('evil')\n")
    with pytest.raises(RefusedError, match=r"not a clean checkout|--unverified"):
        _verified(repo, sha)


def test_a_present_modified_skip_worktree_file_is_not_absent(tmp_path: Path) -> None:
    repo, sha = _repo(tmp_path)
    _git(repo, "update-index", "--skip-worktree", "big/asset.bin")
    (repo / "big" / "asset.bin").write_text("a stand-in\n")
    facts = extract(ExtractRequest(source="demo", commit=sha, origin=repo, unverified="a test tree",
                                   unobtainable=("big/asset.bin",)))  # fmt: skip
    assert facts.read_from.absent == () and not facts.verified  # present: judged as usual


def test_a_declared_file_really_absent_is_absent_and_verified(tmp_path: Path) -> None:
    repo, sha = _repo(tmp_path)
    _git(repo, "update-index", "--skip-worktree", "big/asset.bin")
    (repo / "big" / "asset.bin").unlink()
    facts = extract(ExtractRequest(source="demo", commit=sha, origin=repo, unobtainable=("big/asset.bin",)))
    assert facts.read_from.absent == ("big/asset.bin",) and facts.verified


def test_an_untracked_project_file_hidden_by_an_ignore_file_is_not_verified(tmp_path: Path) -> None:
    repo = tmp_path / "demo"
    sha = make_repo(repo, {"setup.py": "from setuptools import setup\nsetup()\n", "demo/__init__.py": ""})
    (repo / ".git" / "info" / "exclude").write_text("pyproject.toml\n")
    (repo / "pyproject.toml").write_text(str(FILES["pyproject.toml"]))
    assert git.head_commit(repo) == sha
    with pytest.raises(RefusedError, match=r"not a clean checkout|--unverified"):
        _verified(repo, sha)
