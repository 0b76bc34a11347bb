"""`.pre-commit-hooks.yaml`, run by pre-commit's own `try-repo` on a project that uses megacpp-env.

pre-commit clones this repository and installs it into the hooks' environment with pip; the test
points pip at the wheelhouse (PIP_NO_INDEX, PIP_FIND_LINKS), so it runs offline.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.fixtures.install import REPO_ROOT, offline_env

HOOKS = yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text())


def _git(repo, *args):
    config = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", *config, *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def project(tmp_path):
    repo = tmp_path / "project"
    repo.mkdir()
    for name in ("stack.yaml", "images", "locks", "overlays", "facts"):
        src = REPO_ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, repo / name)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    return repo


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory):
    """One pre-commit store for the module: on a clean checkout (CI) the hook environment is made once."""
    return tmp_path_factory.mktemp("pre-commit-home")


def try_repo(project, tmp_path, wheelhouse, home):
    env = offline_env(wheelhouse, PRE_COMMIT_HOME=str(home), HOME=str(tmp_path / "home"))
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(REPO_ROOT), "--all-files", "--color", "never"],
        cwd=project, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    results = dict(re.findall(r"^(megacpp-env [^.]+?)\.{2,}(Passed|Failed|Skipped)", proc.stdout, flags=re.M))
    return proc, results


def test_hooks_are_declared_for_the_four_checks():
    assert [(h["id"], h["entry"]) for h in HOOKS] == [
        ("megacpp-env-check", "megacpp-env check"),
        ("megacpp-env-render-check", "megacpp-env render --check"),
        ("megacpp-env-lock-check", "megacpp-env lock --check"),
        ("megacpp-env-gate", "megacpp-env gate --base HEAD"),
    ]
    assert all(h["language"] == "python" and h["pass_filenames"] is False for h in HOOKS)


def test_try_repo_runs_every_hook(project, tmp_path, wheelhouse, pre_commit_home):
    proc, results = try_repo(project, tmp_path, wheelhouse, pre_commit_home)
    assert results == {
        "megacpp-env check": "Passed",
        "megacpp-env render --check": "Passed",
        # strict by default: gb10/cloud cannot be locked here (their index is unreachable), so a
        # project like this one adds `args: [--allow-unlocked]` to the hook (README)
        "megacpp-env lock --check": "Failed",
        "megacpp-env gate": "Passed",
    }, proc.stdout + proc.stderr
    assert "unlocked: gb10 linux/arm64" in proc.stdout
    assert "ok: smoke linux/amd64" in proc.stdout


def test_try_repo_reports_a_stale_dockerfile_with_its_diff(project, tmp_path, wheelhouse, pre_commit_home):
    dockerfile = project / "images" / "smoke" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "# edited by hand\n")
    proc, results = try_repo(project, tmp_path, wheelhouse, pre_commit_home)
    assert results["megacpp-env render --check"] == "Failed"
    assert "-# edited by hand" in proc.stdout
    assert "stale: images/smoke/Dockerfile (run `megacpp-env render` and commit the result)" in proc.stdout
