"""`.pre-commit-hooks.yaml`, run by pre-commit's own `try-repo` on a project that uses megacpp-env.

pre-commit clones this repository and installs it into the hooks' environment with pip; the test
points pip at the wheelhouse (PIP_NO_INDEX, PIP_FIND_LINKS), so it runs offline.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

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


def try_repo(project, tmp_path, wheelhouse, home, *, all_files=True):
    env = offline_env(wheelhouse, PRE_COMMIT_HOME=str(home), HOME=str(tmp_path / "home"))
    scope = ["--all-files"] if all_files else []  # else: the staged files, as at `git commit`
    proc = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(REPO_ROOT), *scope, "--color", "never"],
        cwd=project, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    results = dict(re.findall(r"^(megacpp-env [^.]+?)\.{2,}(?:\([^)]*\))?(Passed|Failed|Skipped)", proc.stdout, flags=re.M))
    return proc, results


ALL = ["megacpp-env check", "megacpp-env render --check", "megacpp-env lock check", "megacpp-env gate",
       "megacpp-env render (fix)"]  # fmt: skip


def test_hooks_are_declared_for_the_four_checks_and_the_fixer():
    assert [(h["id"], h["entry"]) for h in HOOKS] == [
        ("megacpp-env-check", "megacpp-env check"),
        ("megacpp-env-render-check", "megacpp-env render --check"),
        ("megacpp-env-lock-check", "megacpp-env lock check"),
        ("megacpp-env-gate", "megacpp-env gate --base HEAD"),
        ("megacpp-env-render-fix", "megacpp-env render --fail-on-write"),
    ]
    assert [h["name"] for h in HOOKS] == ALL
    # always_run: pre-commit passes no deleted path, so only that runs a hook after `git rm`
    assert all(h["language"] == "python" and h["pass_filenames"] is False and h["always_run"] is True for h in HOOKS)


def test_try_repo_runs_every_hook(project, tmp_path, wheelhouse, pre_commit_home):
    proc, results = try_repo(project, tmp_path, wheelhouse, pre_commit_home)
    assert results == {
        "megacpp-env check": "Passed",
        "megacpp-env render --check": "Passed",
        # passes by default: the hook's args are [--allow-unlocked], so gb10/cloud (index unreachable
        # here) are reported, not failed
        "megacpp-env lock check": "Passed",
        "megacpp-env gate": "Passed",
        "megacpp-env render (fix)": "Passed",
    }, proc.stdout + proc.stderr


def test_try_repo_reports_a_stale_dockerfile_with_its_diff_and_the_fixer_fixes_it(
    project, tmp_path, wheelhouse, pre_commit_home
):
    dockerfile = project / "images" / "smoke" / "Dockerfile"
    rendered = dockerfile.read_text()
    dockerfile.write_text(rendered + "# edited by hand\n")
    proc, results = try_repo(project, tmp_path, wheelhouse, pre_commit_home)
    assert results["megacpp-env render --check"] == "Failed"
    assert "-# edited by hand" in proc.stdout
    assert "stale: images/smoke/Dockerfile (run `megacpp-env render` and commit the result)" in proc.stdout
    assert results["megacpp-env render (fix)"] == "Failed"  # it wrote: the result is to be reviewed
    assert "wrote: images/smoke/Dockerfile" in proc.stdout
    assert dockerfile.read_text() == rendered


def test_the_gate_hook_works_on_a_first_commit(tmp_path, wheelhouse, pre_commit_home):
    repo = tmp_path / "fresh"
    repo.mkdir()
    for name in ("stack.yaml", "images", "locks", "overlays", "facts"):
        src = REPO_ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, repo / name)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")  # nothing committed yet: HEAD is unborn
    proc, results = try_repo(repo, tmp_path, wheelhouse, pre_commit_home, all_files=False)
    assert results == dict.fromkeys(ALL, "Passed"), proc.stdout + proc.stderr


# ---- every file a hook's command reads is matched by the hook's `files:` ----

# Runs one CLI command with an audit hook that records every file opened and every directory listed
# under the project (the real reads of the real code, not a list kept by hand).
TRACER = """
import json, os, sys
root, out, argv = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3:]
seen = set()
def hook(event, args):
    if event not in ("open", "os.listdir", "os.scandir") or not args or not isinstance(args[0], (str, os.PathLike)):
        return
    path = os.path.realpath(os.fspath(args[0]))
    if path.startswith(root + os.sep):
        seen.add(os.path.relpath(path, root) + ("/" if event != "open" else ""))
sys.addaudithook(hook)
from megacpp_env.cli import main
try:
    main(argv)
finally:
    with open(out, "w") as f:
        json.dump(sorted(p for p in seen if not p.startswith(".git" + os.sep)), f)
"""


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """hook id -> the project files (and directories, with a trailing /) its command reads."""
    repo = tmp_path_factory.mktemp("traced") / "project"
    repo.mkdir()
    for name in ("stack.yaml", "images", "locks", "overlays", "facts"):
        src = REPO_ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, repo / name)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    reads = {}
    for hook in HOOKS:
        out = repo.parent / f"{hook['id']}.json"
        argv = [*hook["entry"].split()[1:], *hook.get("args", [])]
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEGACPP_ENV_")}
        subprocess.run([sys.executable, "-c", TRACER, str(repo), str(out), *argv], cwd=repo, env=env,
                       capture_output=True, check=False)  # fmt: skip
        reads[hook["id"]] = json.loads(out.read_text())
    return reads


@pytest.mark.parametrize("hook", HOOKS, ids=lambda h: h["id"])
def test_files_matches_every_input_the_command_reads(hook, traced):
    reads = traced[hook["id"]]
    assert "stack.yaml" in reads
    files = [r for r in reads if not r.endswith("/")]
    missed = [f for f in files if not re.search(hook["files"], f)]
    assert not missed, f"{hook['id']}: files: {hook['files']} misses {missed}"
    for listed in (r for r in reads if r.endswith("/")):  # a new file there is an input too
        kinds = {Path(f).suffix for f in files if f.startswith(listed) and "/" not in f[len(listed) :]}
        for suffix in kinds or {""}:
            assert re.search(hook["files"], f"{listed}new{suffix}"), (hook["id"], listed, suffix)


# One file of each input kind; editing it must run exactly the hooks whose command reads it.
INPUT_KINDS = [
    "stack.yaml",
    "facts/causal_conv1d.toml",
    "overlays/smoke-ext/files/megacpp_smoke_ext/__init__.py",
    "images/smoke/Dockerfile",
    "images/smoke/resolutions.json",
    "images/smoke/sources/megacpp_smoke_ext.json",
    "locks/pylock.smoke-linux-amd64.toml",
    "locks/smoke.linux-amd64.requirements.txt",
    "locks/ACKNOWLEDGED.toml",
]


def test_every_input_kind_is_read_by_some_command(traced):
    every = {r for reads in traced.values() for r in reads}
    assert set(INPUT_KINDS) <= every
    kinds = {re.sub(r"/[^/]+$", "/*", r) for r in every if not r.endswith("/")}
    assert kinds >= {"facts/*", "images/smoke/sources/*", "locks/*", "overlays/smoke-ext/files/megacpp_smoke_ext/*"}


# A deletion staged with `git rm`: pre-commit passes no deleted path to a hook, so a hook that ran only
# when its `files:` matched was "Skipped" (every one of them, before always_run). Each must run, and
# those whose command reads the deleted file must say what is wrong.
DELETIONS = {
    "locks/pylock.smoke-linux-amd64.toml": {"megacpp-env lock check": "Failed", "megacpp-env gate": "Failed"},
    "images/smoke/Dockerfile": {"megacpp-env render --check": "Failed", "megacpp-env render (fix)": "Failed"},
    "locks/smoke.linux-amd64.requirements.txt": {"megacpp-env lock check": "Failed"},
    "facts/causal_conv1d.toml": {"megacpp-env check": "Failed"},
}


@pytest.mark.parametrize("path", sorted(DELETIONS))
def test_a_deletion_runs_every_hook(path, project, tmp_path, wheelhouse, pre_commit_home, traced):
    _git(project, "rm", "-q", path)
    proc, results = try_repo(project, tmp_path, wheelhouse, pre_commit_home, all_files=False)
    assert set(results) == set(ALL), proc.stdout + proc.stderr
    assert "Skipped" not in results.values(), proc.stdout
    failed = {name for name, r in results.items() if r == "Failed"}
    assert failed >= set(DELETIONS[path]), proc.stdout + proc.stderr
    readers = {h["name"] for h in HOOKS if path in traced[h["id"]]}
    assert set(DELETIONS[path]) <= readers  # each failing hook reads the file: it failed for it


def test_an_unrelated_edit_runs_every_hook_and_passes(project, tmp_path, wheelhouse, pre_commit_home):
    (project / "README.md").write_text("notes\n")
    _git(project, "add", "README.md")
    proc, results = try_repo(project, tmp_path, wheelhouse, pre_commit_home, all_files=False)
    assert results == dict.fromkeys(ALL, "Passed"), proc.stdout + proc.stderr
