"""The GitHub workflows and the composite action: supply-chain rules, zizmor offline, and the
action's own scripts run for real (offline, from the wheelhouse) on a copy of this project."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.fixtures import gha
from tests.fixtures.install import REPO_ROOT, copy_tree, offline_env

GITHUB = REPO_ROOT / ".github"
ACTION = GITHUB / "actions" / "lock-gate" / "action.yml"
WORKFLOWS = sorted((GITHUB / "workflows").glob("*.yml"))
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
EXPR = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _steps(doc: dict) -> list[dict]:
    if "runs" in doc:
        return doc["runs"]["steps"]
    return [s for job in doc["jobs"].values() for s in job.get("steps", [])]


def test_zizmor_offline_finds_nothing():
    zizmor = shutil.which("zizmor", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    assert zizmor, "zizmor (PyPI) is a test dependency: pip install -e '.[test]'"
    proc = subprocess.run([zizmor, "--offline", "--no-progress", str(GITHUB)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout
    for path in [ACTION, *WORKFLOWS]:
        assert f"completed {path}" in proc.stderr  # every workflow and the action were audited


@pytest.mark.parametrize("path", [ACTION, *WORKFLOWS], ids=lambda p: p.name if p != ACTION else "action.yml")
def test_every_action_is_pinned_by_sha_with_its_tag(path):
    text = path.read_text()
    uses = re.findall(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$", text, flags=re.M)
    assert uses or path == ACTION  # the composite action runs only its own scripts
    for ref, comment in uses:
        if ref.startswith("$/"):
            assert (REPO_ROOT / ref[2:]).exists(), ref  # the same repository at the running commit
            continue
        assert PINNED.match(ref), ref
        assert re.fullmatch(r"\s*# v\d+\.\d+\.\d+", comment), (ref, comment)


@pytest.mark.parametrize("path", [ACTION, *WORKFLOWS], ids=lambda p: p.name if p != ACTION else "action.yml")
def test_no_expression_is_pasted_into_a_script(path):
    for step in _steps(_load(path)):
        assert "${{" not in step.get("run", ""), step.get("name")
        script = step.get("with", {}).get("script", "")
        assert "${{" not in script, step.get("name")


def test_permissions_are_per_job_and_least():
    for path in WORKFLOWS:
        doc = _load(path)
        assert doc["permissions"] == {}, path.name
        for name, job in doc["jobs"].items():
            assert "permissions" in job, (path.name, name)
    jobs = _load(GITHUB / "workflows" / "lock-gate-reusable.yml")["jobs"]
    assert jobs["gate"]["permissions"] == {"contents": "read"}
    assert jobs["comment"]["permissions"] == {"pull-requests": "write"}
    assert not any("checkout" in s.get("uses", "") for s in jobs["comment"]["steps"])  # runs no PR code
    caller = _load(GITHUB / "workflows" / "lock-gate.yml")["jobs"]["lock-gate"]
    assert caller["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert caller["uses"] == "$/.github/workflows/lock-gate-reusable.yml"


def test_checkouts_keep_no_credentials():
    for path in WORKFLOWS:
        for step in _steps(_load(path)):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, path.name


def test_the_action_installs_the_tool_from_its_hashed_lock():
    install = _load(ACTION)["runs"]["steps"][0]["run"]
    assert "--require-hashes" in install and "--only-binary=:all:" in install
    assert '-r "$tool/.ci/tool-requirements.txt"' in install
    assert "--no-deps --no-index" in install and "--no-build-isolation" in install


# ---- the action's scripts, run as GitHub runs a composite action (bash -eo pipefail per step) ----


def run_action(tmp: Path, workdir: Path, action_repo: Path, env: dict[str, str], **inputs: str) -> tuple[int, str, str]:
    doc = yaml.safe_load((action_repo / ".github" / "actions" / "lock-gate" / "action.yml").read_text())
    values = {f"inputs.{k}": str(v.get("default", "")) for k, v in doc["inputs"].items()}
    values |= {f"inputs.{k.replace('_', '-')}": v for k, v in inputs.items()}
    values["runner.temp"] = str(tmp)
    summary, log = tmp / "summary.md", []
    summary.touch()
    for step in doc["runs"]["steps"]:
        if step.get("if") == "inputs.base != ''" and not values["inputs.base"]:
            continue
        assert step.get("if") in (None, "inputs.base != ''"), step["if"]
        output = tmp / f"output-{step.get('id', 'step')}"
        output.write_text("")
        step_env = {k: EXPR.sub(lambda m: values.get(m[1], ""), str(v)) for k, v in step.get("env", {}).items()}
        cwd = workdir / EXPR.sub(lambda m: values[m[1]], step.get("working-directory", "."))
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
            cwd=cwd, capture_output=True, text=True, check=False,
            env={**env, **step_env, "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary),
                 "GITHUB_ACTION_PATH": str(action_repo / ".github" / "actions" / "lock-gate")},
        )  # fmt: skip
        log.append(proc.stdout + proc.stderr)
        for line in output.read_text().splitlines():
            key, _, value = line.partition("=")
            values[f"steps.{step.get('id')}.outputs.{key}"] = value
        if proc.returncode != 0:
            return proc.returncode, "".join(log), summary.read_text()
    return 0, "".join(log), summary.read_text()


def _git(repo: Path, *args: str) -> None:
    config = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", *config, *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture(scope="module")
def action_repo(tmp_path_factory):
    """The action as GitHub downloads it: this repository's files at one commit."""
    return copy_tree(tmp_path_factory.mktemp("action") / "megacpp-env")


@pytest.fixture
def project(tmp_path):
    """A project that uses the gate: the shipped spec, Dockerfiles and locks, committed on main."""
    repo = tmp_path / "project"
    repo.mkdir()
    for name in ("stack.yaml", "images", "locks", "overlays", "facts"):
        src = REPO_ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, repo / name)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    return repo


def test_the_action_passes_a_fresh_project_and_writes_the_report(tmp_path, project, action_repo, wheelhouse):
    env = offline_env(wheelhouse)
    rc, log, summary = run_action(
        tmp_path, project, action_repo, env, base="main", lock_args="--allow-unlocked", strict_targets="smoke",
        report=str(tmp_path / "gate.md"),
    )  # fmt: skip
    assert rc == 0, log
    report = (tmp_path / "gate.md").read_text()
    assert report.startswith("<!-- megacpp-env-lock-gate -->")
    assert summary == report
    assert "ok: smoke linux/amd64" in log


def test_the_action_fails_on_a_stale_dockerfile_and_still_gates(tmp_path, project, action_repo, wheelhouse):
    dockerfile = project / "images" / "smoke" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "# edited by hand\n")
    rc, log, summary = run_action(
        tmp_path, project / "images", action_repo, offline_env(wheelhouse), base="main",
        lock_args="--allow-unlocked", report=str(tmp_path / "gate.md"),
    )  # fmt: skip
    assert rc == 1
    assert "-# edited by hand" in log  # render --check's diff, run from a subdirectory (spec found upward)
    assert "::error::megacpp-env render --check failed: see the log above" in log
    assert "megacpp-env gate failed" not in log
    assert summary.startswith("<!-- megacpp-env-lock-gate -->")


# ---- the reusable workflow's jobs, simulated offline: which steps run, what paths they pass on ----

REUSABLE = GITHUB / "workflows" / "lock-gate-reusable.yml"


def _bash(script: str, cwd: Path, env: dict[str, str]) -> int:
    cmd = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False).returncode


def run_gate_job(temp: Path, project: Path, action_repo: Path, env: dict[str, str], inputs: dict) -> dict:
    """The gate job as the runner runs it: each step's `if`, inputs, env and outputs; `uses:` steps by
    what they do with files (checkout: the project is the workspace; upload-artifact: copies `path`)."""
    job = _load(REUSABLE)["jobs"]["gate"]
    temp.mkdir(exist_ok=True)
    ctx = gha.Context({"inputs": inputs, "runner": {"temp": str(temp)}, "github": {"base_ref": "main"},
                       "steps": {}}, workspace=project)  # fmt: skip
    artifacts: dict[str, Path] = {}
    logs: list[str] = []
    for step in job["steps"]:
        sid, uses = step.get("id", ""), step.get("uses", "")
        if not gha.step_runs(step.get("if"), ctx):
            ctx.values["steps"][sid] = {"outcome": "skipped", "outputs": {}}
            continue
        with_ = {k: gha.interpolate(v, ctx) for k, v in step.get("with", {}).items()}
        outputs, ok = {}, True
        if uses.startswith("actions/checkout@"):
            _git(project, "update-ref", "refs/remotes/origin/main", "main")  # fetch-depth: 0 fetches the base
        elif uses.startswith("actions/setup-python@"):
            outputs = {"python-path": sys.executable}
        elif uses == "$/.github/actions/lock-gate":
            action_inputs = {k.replace("-", "_"): v for k, v in with_.items() if k != "python"}
            rc, log, _summary = run_action(temp, project, action_repo, env, **action_inputs)
            ok, logs = rc == 0, [*logs, log]
        elif uses.startswith("actions/upload-artifact@"):
            path = Path(with_["path"])
            assert path.is_absolute() and path.is_file(), with_  # if-no-files-found: error
            assert with_["if-no-files-found"] == "error"
            artifacts[with_["name"]] = path
        else:
            assert "run" in step and not uses, step
            out = temp / f"gh-output-{sid}"
            out.write_text("")
            step_env = {**env, **{k: gha.interpolate(v, ctx) for k, v in step.get("env", {}).items()},
                        "GITHUB_OUTPUT": str(out)}  # fmt: skip
            ok = _bash(step["run"], project, step_env) == 0
            outputs = dict(line.partition("=")[::2] for line in out.read_text().splitlines())
        ctx.values["steps"][sid] = {"outcome": "success" if ok else "failure", "outputs": outputs}
        if not ok:
            ctx.status = "failure"
    job_outputs = {k: gha.interpolate(v, ctx) for k, v in job.get("outputs", {}).items()}
    return {"status": ctx.status, "outputs": job_outputs, "artifacts": artifacts, "hashed": ctx.hashed, "log": logs}


def run_comment_job(temp: Path, gate: dict, inputs: dict, same_repo: bool = True) -> Path | None:
    """The comment job up to its script: whether it runs, and the report file the script would read."""
    job = _load(REUSABLE)["jobs"]["comment"]
    repo = "megacpp/project"
    github = {"repository": repo, "event": {"pull_request": {"head": {"repo": {"full_name": repo if same_repo else "fork/x"}}}}}
    ctx = gha.Context({"inputs": inputs, "runner": {"temp": str(temp)}, "github": github,
                       "needs": {"gate": {"result": gate["status"], "outputs": gate["outputs"]}}},
                      workspace=temp / "workspace", status="success")  # fmt: skip
    if not gha.step_runs(job["if"], ctx):
        return None
    download, post = job["steps"]
    with_ = {k: gha.interpolate(v, ctx) for k, v in download["with"].items()}
    source = gate["artifacts"][with_["name"]]  # download-artifact fails when the artifact is missing
    target = Path(with_["path"])
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target / source.name)  # a single-file artifact lands as path/<file name>
    report = Path(gha.interpolate(post["env"]["REPORT"], ctx))
    assert "process.env.REPORT" in post["with"]["script"]
    return report


@pytest.fixture
def gate_inputs():
    doc = _load(REUSABLE)[True]["workflow_call"]["inputs"]  # YAML 1.1 reads the key `on` as true
    return {k: v.get("default") for k, v in doc.items()} | {"lock-args": "--allow-unlocked", "strict-targets": "smoke"}


def test_the_comment_job_finds_the_report_the_gate_wrote(tmp_path, project, action_repo, wheelhouse, gate_inputs):
    gate = run_gate_job(tmp_path / "gate-temp", project, action_repo, offline_env(wheelhouse), gate_inputs)
    assert gate["status"] == "success", gate["log"]
    assert gate["outputs"] == {"report": "megacpp-env-gate.md"}
    assert gate["artifacts"]["megacpp-env-lock-gate"] == tmp_path / "gate-temp" / "megacpp-env-gate.md"
    report = run_comment_job(tmp_path / "comment-temp", gate, gate_inputs)
    assert report == tmp_path / "comment-temp" / "report" / "megacpp-env-gate.md"
    assert report.read_text().startswith("<!-- megacpp-env-lock-gate -->")
    assert run_comment_job(tmp_path / "fork-temp", gate, gate_inputs, same_repo=False) is None
    assert run_comment_job(tmp_path / "off-temp", gate, gate_inputs | {"comment": False}) is None
    assert not gate["hashed"]  # no hashFiles: it cannot see runner.temp


def test_a_failing_gate_still_posts_its_report(tmp_path, project, action_repo, wheelhouse, gate_inputs):
    dockerfile = project / "images" / "smoke" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "# edited by hand\n")
    gate = run_gate_job(tmp_path / "gate-temp", project, action_repo, offline_env(wheelhouse), gate_inputs)
    assert gate["status"] == "failure"
    report = run_comment_job(tmp_path / "comment-temp", gate, gate_inputs)
    assert report is not None and report.read_text().startswith("<!-- megacpp-env-lock-gate -->")


def test_no_report_no_upload_and_no_comment(tmp_path, project, action_repo, gate_inputs):
    (tmp_path / "empty").mkdir()
    gate = run_gate_job(tmp_path / "gate-temp", project, action_repo, offline_env(tmp_path / "empty"), gate_inputs)
    assert gate["status"] == "failure"  # the install step found no wheels: no report was written
    assert gate["outputs"] == {"report": ""} and not gate["artifacts"]
    assert run_comment_job(tmp_path / "comment-temp", gate, gate_inputs) is None


def test_hashfiles_cannot_see_runner_temp(tmp_path):
    """Why the old `hashFiles(format('{0}/megacpp-env-gate.md', runner.temp))` gate never uploaded."""
    workspace, temp = tmp_path / "work", tmp_path / "temp"
    workspace.mkdir(), temp.mkdir()
    (temp / "megacpp-env-gate.md").write_text("report")
    (workspace / "inside.md").write_text("report")
    ctx = gha.Context({"runner": {"temp": str(temp)}}, workspace=workspace)
    assert gha.evaluate("hashFiles(format('{0}/megacpp-env-gate.md', runner.temp))", ctx) == ""
    assert gha.evaluate("hashFiles('inside.md')", ctx) != ""
    assert not gha.step_runs("${{ !cancelled() && hashFiles(format('{0}/megacpp-env-gate.md', runner.temp)) != '' }}", ctx)
    for path in WORKFLOWS:  # no expression of a workflow uses it (comments may name it)
        assert not [e for e in EXPR.findall(path.read_text()) if "hashfiles" in e.lower()], path.name


def test_dependabot_keeps_every_pinned_action_current():
    """Each file with a SHA-pinned `uses:` lies in a directory Dependabot's github-actions updater
    scans (`/` covers .github/workflows; a composite action needs its own directory)."""
    config = _load(GITHUB / "dependabot.yml")
    assert config["version"] == 2
    (update,) = [u for u in config["updates"] if u["package-ecosystem"] == "github-actions"]
    scanned = set(update["directories"])
    assert update["cooldown"]["default-days"] >= 1  # zizmor's dependabot-cooldown audit
    for path in [ACTION, *WORKFLOWS]:
        pinned = [u for u in re.findall(r"^\s*(?:-\s+)?uses:\s*(\S+)", path.read_text(), flags=re.M) if PINNED.match(u)]
        where = "/" if path.parent == GITHUB / "workflows" else "/" + str(path.parent.relative_to(REPO_ROOT))
        assert not pinned or where in scanned, (path.name, where)
    assert all((REPO_ROOT / d.lstrip("/")).is_dir() for d in scanned)
    zizmor = shutil.which("zizmor", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    proc = subprocess.run([zizmor, "--offline", "--no-progress", str(GITHUB / "dependabot.yml")], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert proc.returncode == 0 and "No findings to report" in proc.stdout, proc.stdout + proc.stderr
