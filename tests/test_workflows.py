"""The GitHub workflows and the composite action: supply-chain rules, zizmor offline, and the
action's own scripts run for real (offline, from the wheelhouse) on a copy of this project."""

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
from sarif_kit.validate import validation_errors

from tests.fixtures import gha
from tests.fixtures.docker import skip_or_fail
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
    assert "::error::megacpp-env render-check failed: see the log above and the report" in log
    assert "megacpp-env gate failed" not in log
    assert summary.startswith("<!-- megacpp-env-lock-gate -->")
    # the failure reaches the report (and so the comment): its row, and the end of its output
    assert "| `render-check` | failed (exit 1) |" in summary and "| `check` | passed |" in summary
    assert "<details><summary>Output of render-check (exit 1)</summary>" in summary
    assert "-# edited by hand" in summary


def test_the_action_runs_the_policy_rules(tmp_path, project, action_repo, wheelhouse):
    """A spec with an error-level rule violation (GB001: a bare sm_120), re-rendered so that every
    other check passes, fails the action, and the report says which check failed and why."""
    spec = project / "stack.yaml"
    text = spec.read_text()
    assert "kernel_arch: sm_120f " in text
    spec.write_text(text.replace("kernel_arch: sm_120f ", "kernel_arch: sm_120  ", 1))
    env = offline_env(wheelhouse)
    subprocess.run([sys.executable, "-m", "megacpp_env", "render", "--spec", str(spec)], env=env, check=True,
                   capture_output=True)  # fmt: skip
    rc, log, summary = run_action(
        tmp_path, project, action_repo, env, base="main", lock_args="--allow-unlocked",
        report=str(tmp_path / "gate.md"),
    )  # fmt: skip
    assert rc == 1
    assert "error GB001 targets.gb10.gpu.kernel_arch" in log
    # an annotation on the spec's line, and SARIF that validates (the OASIS schema sarif-kit ships)
    line = next(i for i, t in enumerate(spec.read_text().splitlines(), 1) if "kernel_arch: sm_120 " in t)
    assert f"::error file=stack.yaml,line={line},title=GB001 targets.gb10.gpu.kernel_arch::" in log
    assert "::notice file=stack.yaml," in log and "(suppressed)::" in log  # the suppressions, with reasons
    sarif = json.loads((tmp_path / "megacpp-env-sarif" / "check.sarif").read_text())
    assert validation_errors(sarif) == []
    assert {(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"]) for r in sarif["runs"][0]["results"]
            if not r.get("suppressions")} == {("GB001", line)}  # fmt: skip
    assert "::error::megacpp-env check failed: see the log above and the report" in log
    assert "render-check failed" not in log and "lock-check failed" not in log and "gate failed" not in log
    assert "## megacpp-env lock gate: FAIL" in summary and "| `check` | failed (exit 1) |" in summary
    assert "error GB001 targets.gb10.gpu.kernel_arch" in summary


def test_a_gate_error_reaches_the_report(tmp_path, project, action_repo, wheelhouse):
    lock = project / "locks" / "pylock.smoke-linux-amd64.toml"
    lock.write_text(lock.read_text() + "\n[[packages]]\nname = 'Not Normal'\n")
    rc, log, summary = run_action(
        tmp_path, project, action_repo, offline_env(wheelhouse), base="main", lock_args="--allow-unlocked",
        report=str(tmp_path / "gate.md"),
    )  # fmt: skip
    assert rc == 1
    assert "megacpp-env gate failed (exit 1)" in log
    report = (tmp_path / "gate.md").read_text()
    assert report.startswith("<!-- megacpp-env-lock-gate -->\n## megacpp-env lock gate: ERROR\n")
    assert "locks/pylock.smoke-linux-amd64.toml" in report and "not a valid PEP 751 lock" in report
    assert "| `lock-check` | failed (exit 1) |" in report  # lock --check saw the same broken lock
    assert summary == report


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
            if with_["if-no-files-found"] == "warn":  # a directory that may be missing (the SARIF logs)
                assert path.is_absolute() and (path.is_dir() or not path.exists()), with_
            else:
                assert path.is_absolute() and path.is_file(), with_  # if-no-files-found: error
                assert with_["if-no-files-found"] == "error"
            if path.exists():  # no files: a warning, and no artifact
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


# ---- the comment script itself, under node with a fake GitHub client (offline) ----------------------

SCRIPT_HARNESS = Path(__file__).parent / "fixtures" / "github_script.js"
BOT = {"type": "Bot", "login": "github-actions[bot]"}


def run_comment_script(tmp: Path, report: Path, comments: list[dict]) -> list[list]:
    """The comment job's github-script step, run by node: the GitHub calls it made, in order."""
    node = shutil.which("node")
    if node is None:
        skip_or_fail("node is not installed (the comment script is tested with it)")
    post = _load(REUSABLE)["jobs"]["comment"]["steps"][1]
    script, scenario = tmp / "script.js", tmp / "scenario.json"
    script.write_text(post["with"]["script"])
    scenario.write_text(json.dumps({"comments": comments, "env": {"REPORT": str(report)}}))
    proc = subprocess.run([node, str(SCRIPT_HARNESS), str(script), str(scenario)], capture_output=True, text=True,
                          check=False, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def writes(calls: list[list]) -> list[tuple]:
    return [(c[0], c[1].get("comment_id"), c[1]["body"]) for c in calls if c[0] in ("createComment", "updateComment")]


def test_the_comment_script_posts_updates_or_stays_silent(tmp_path, project, capsys):
    from megacpp_env.cli import main

    spec = str(project / "stack.yaml")
    quiet, failing = tmp_path / "quiet.md", tmp_path / "failing.md"
    assert main(["gate", "--base", "main", "--spec", spec, "--format", "markdown"]) == 0
    quiet.write_text(capsys.readouterr().out)
    assert quiet.read_text().splitlines()[1] == "<!-- megacpp-env-lock-gate: nothing to report -->"
    lock = project / "locks" / "pylock.smoke-linux-amd64.toml"
    lock.write_text(lock.read_text().replace('version = "', 'version = "0.', 1))  # a downgrade
    assert main(["gate", "--base", "main", "--spec", spec, "--format", "markdown"]) == 1
    failing.write_text(capsys.readouterr().out)
    ours = {"id": 5, "user": BOT, "body": failing.read_text()}
    forged = {"id": 6, "user": {"type": "User", "login": "author"}, "body": failing.read_text()}
    other_bot = {"id": 8, "user": {"type": "Bot", "login": "someone[bot]"}, "body": failing.read_text()}
    quoting = {"id": 9, "user": BOT, "body": "> <!-- megacpp-env-lock-gate -->\n"}

    # nothing to report and no comment of ours: no comment at all
    calls = run_comment_script(tmp_path, quiet, [forged, other_bot, quoting])
    assert writes(calls) == []
    assert ["info", "nothing to report and no earlier comment: no comment posted"] in calls
    assert calls[0] == ["paginate", {"owner": "megacpp", "repo": "project", "issue_number": 7, "per_page": 100}]
    # a failing report: posted; the PR author's copy, another bot's and a quote of the marker are not ours
    calls = run_comment_script(tmp_path, failing, [forged, other_bot, quoting])
    assert writes(calls) == [("createComment", None, failing.read_text())]
    # our earlier comment: updated in place, also when there is now nothing to report
    assert writes(run_comment_script(tmp_path, quiet, [forged, ours])) == [("updateComment", 5, quiet.read_text())]
    assert writes(run_comment_script(tmp_path, failing, [ours])) == []  # unchanged: not rewritten
    # not a report (an empty file, or one that lost its marker), or too long: fail, post nothing
    for body in ("", "no marker\n", "<!-- megacpp-env-lock-gate -->\n" + "x" * 70_000):
        bad = tmp_path / "bad.md"
        bad.write_text(body)
        calls = run_comment_script(tmp_path, bad, [ours])
        assert writes(calls) == [] and calls[-1][0] == "setFailed", calls


def _hostile_project(project: Path) -> None:
    """The project with the markup payload corpus in its acknowledgement file and in a lock's fields."""
    from tests.test_gate_markdown import ACK_PAYLOADS, packages, write_lock

    lock = project / "locks" / "pylock.smoke-linux-amd64.toml"
    write_lock(lock, packages("base"))
    _git(project, "commit", "-q", "-am", "payload base")
    _git(project, "update-ref", "refs/remotes/origin/main", "main")
    write_lock(lock, packages("head"))
    acks = [{"package": f"p{i}", "change": "hashes-changed", "reason": p} for i, p in enumerate(ACK_PAYLOADS)]
    acks += [{"package": f"{p}*", "change": "upgraded", "reason": "r", "target": p, "platform": p, "version": p}
             for p in ACK_PAYLOADS]  # fmt: skip
    body = "".join("[[ack]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in a.items()) + "\n" for a in acks)
    (project / "locks" / "ACKNOWLEDGED.toml").write_text(body)


def _big_project(project: Path) -> None:
    """The project with gb10/cloud locks of their real size, every package moved since the base."""
    from megacpp_env.lock.pylock import render_pylock
    from tests.test_gate_markdown import GB10_CLOUD, big_lock

    names = [(t, p, f"pylock.{t}{part}-{p.replace('/', '-')}.toml") for t, p in GB10_CLOUD for part in ("", "-cuda")]
    for t, p, name in names:
        (project / "locks" / name).write_text(render_pylock(big_lock(t, p, "base")))
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "gb10/cloud locks")
    for t, p, name in names:
        (project / "locks" / name).write_text(render_pylock(big_lock(t, p, "head")))


@pytest.mark.parametrize("make", [_hostile_project, _big_project], ids=["payload-corpus", "gb10-cloud-sized"])
def test_the_comment_path_end_to_end(tmp_path, project, action_repo, wheelhouse, gate_inputs, make):
    """gate job (the action) -> artifact -> comment job -> the script under node: what it posts is the
    report, within GitHub's limit, and no input became markup in it."""
    from tests.test_gate_markdown import SECRET, assert_no_markup_from_inputs

    make(project)
    gate = run_gate_job(tmp_path / "gate-temp", project, action_repo, offline_env(wheelhouse), gate_inputs)
    assert gate["status"] == "failure"  # violations (and, for the payload lock, a stale export)
    report = run_comment_job(tmp_path / "comment-temp", gate, gate_inputs)
    assert report is not None
    calls = run_comment_script(tmp_path, report, [])
    ((kind, _id, body),) = writes(calls)
    assert kind == "createComment" and body == report.read_text()
    assert len(body) <= 65_536 and len(body.encode()) <= 50_000
    assert SECRET not in body
    assert_no_markup_from_inputs(body)
    assert "## megacpp-env lock gate: FAIL" in body
