"""Argument parsing, exit codes and the lazy imports that keep --help fast."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from megacpp_env import __version__
from megacpp_env.cli import ERROR_EXIT, VERBS, main
from tests.fixtures.spec import REPO_ROOT, SHIPPED_TARGETS, STACK_YAML


def run_cli(*args, cwd=REPO_ROOT):
    return subprocess.run(
        [sys.executable, "-m", "megacpp_env", *args], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"megacpp-env {__version__}"


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_verb_has_help(verb, capsys):
    assert main([verb, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: megacpp-env {verb}")
    assert "--spec" in out


def test_usage_error_exits_2(capsys):
    assert main(["no-such-verb"]) == 2
    assert main(["show"]) == 2  # missing TARGET
    assert "usage:" in capsys.readouterr().err


def test_help_imports_no_heavy_module():
    code = (
        "import sys; from megacpp_env.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('yaml', 'jinja2', 'packaging', 'tomllib', 'logging', 'megacpp_env.ui') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "HEAVY="


def test_spec_error_is_one_line_exit_1(tmp_path):
    bad = tmp_path / "stack.yaml"
    bad.write_text(STACK_YAML.read_text().replace('gcc: "15"', "gcc: fifteen", 1))
    proc = run_cli("show", "gb10", "--spec", str(bad))
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "toolchains.cuda132-ubuntu2404.gcc: invalid version 'fifteen'" in lines[0]
    assert "Traceback" not in proc.stderr
    # check reports the spec's errors as its findings: one line each on stdout, then the verdict
    proc = run_cli("check", "--spec", str(bad))
    assert proc.returncode == 1 and proc.stderr == ""
    finding, verdict = proc.stdout.strip().splitlines()
    assert "error SP005 toolchains.cuda132-ubuntu2404.gcc: invalid version 'fifteen'" in finding
    assert verdict.endswith("FAILED: the spec did not load: 1 errors, 0 warnings, 0 suppressed")


def test_check_json_lists_findings_with_remedies():
    proc = run_cli("check", "--json")
    report = json.loads(proc.stdout)
    assert report["spec_digest"] and isinstance(report["findings"], list)
    assert all(f["remedy"] for f in report["findings"])
    assert proc.returncode == (0 if report["ok"] else 1)


def test_targets_and_show_json():
    names = [t["name"] for t in json.loads(run_cli("targets", "--json").stdout)]
    assert names == list(SHIPPED_TARGETS)  # in the spec's order
    view = json.loads(run_cli("show", "gb10", "--json").stdout)
    assert view["toolchain"]["cuda"] == "13.2" and view["aligned_with"] == ["cloud"]
    assert [s["name"] for s in view["sources"]] == [
        "causal_conv1d", "mamba_ssm", "flashinfer", "flashinfer_jit_cache", "vllm", "megatron_lm",
    ]


def test_unknown_target_is_a_usage_error():
    proc = run_cli("show", "nope")
    assert proc.returncode == 2 and f"unknown target 'nope' (remedy: known: {', '.join(SHIPPED_TARGETS)})" in proc.stderr
    proc = run_cli("show", SHIPPED_TARGETS[0] + "x")
    assert proc.returncode == 2 and f"(remedy: did you mean {SHIPPED_TARGETS[0]!r}?)" in proc.stderr


def test_spec_from_environment(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "megacpp_env", "targets"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
        env={**__import__("os").environ, "MEGACPP_ENV_SPEC": str(STACK_YAML)},
    )  # fmt: skip
    assert proc.returncode == 0 and "smoke" in proc.stdout


def test_missing_spec_names_where_it_looked_and_the_remedy(tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if k != "MEGACPP_ENV_SPEC"}
    proc = subprocess.run(
        [sys.executable, "-m", "megacpp_env", "targets"], cwd=tmp_path, capture_output=True, text=True, check=False, env=env
    )
    assert proc.returncode == 1
    assert proc.stderr == (
        f"megacpp-env targets: error: no stack.yaml in {tmp_path} or any parent directory (searched up to /) "
        "(remedy: run inside the project, pass --spec PATH or set MEGACPP_ENV_SPEC)\n"
    )


def test_explicit_missing_spec_names_the_file(tmp_path):
    proc = run_cli("targets", "--spec", "nope.yaml", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.startswith("megacpp-env targets: error: nope.yaml: spec file not found")


def test_spec_found_upward_from_a_subdirectory():
    proc = run_cli("targets", "--json", cwd=REPO_ROOT / "images" / "smoke")
    assert proc.returncode == 0, proc.stderr
    assert sorted(t["name"] for t in json.loads(proc.stdout)) == sorted(SHIPPED_TARGETS)


def test_check_refuses_an_unknown_rule(capsys):
    assert main(["check", "--rule", "tc005", "-q"]) == 0  # a code in lower case is that code
    assert main(["check", "--rule", "TC999"]) == 2  # a usage error, with the closest code
    err = capsys.readouterr().err
    assert "unknown rule code 'TC999'" in err and "did you mean 'TC009'?" in err


def test_spec_option_before_the_verb(capsys):
    assert main(["--spec", str(STACK_YAML), "targets", "--json"]) == 0
    assert '"smoke"' in capsys.readouterr().out


# One failing command line per verb that takes --json (a user error, or a name the spec does not have,
# which is a usage error: exit 2, JSON all the same). The test
# below checks this table covers every such verb, so a new verb cannot forget JSON on failure.
MISSING = "/nonexistent/stack.yaml"
FAILING = {
    "check": ["check", "--spec", MISSING],
    "explain": ["explain", "nope"],
    "targets": ["targets", "--spec", MISSING],
    "show": ["show", "nope", "--spec", str(STACK_YAML)],
    "render": ["render", "nope", "--spec", str(STACK_YAML)],
    "lock resolve": ["lock", "resolve", "nope", "--spec", str(STACK_YAML)],
    "lock check": ["lock", "check", "nope", "--spec", str(STACK_YAML)],
    "lock export": ["lock", "export", "nope", "--spec", str(STACK_YAML)],
    "lock diff": ["lock", "diff", "/nonexistent/a.toml", "/nonexistent/b.toml"],
    "gate": ["gate", "--base", "no-such-ref-anywhere", "--spec", MISSING],
    "mirror": ["mirror", "nope", "--to", "/nonexistent/mirror", "--spec", str(STACK_YAML)],
    "checkout": ["checkout", "nope", "--spec", str(STACK_YAML)],
    "mirror-sources": ["mirror-sources", "nope", "--to", "/nonexistent/src-mirror", "--spec", str(STACK_YAML)],
    "build-source": ["build-source", "nope", "--spec", str(STACK_YAML)],
    "verify-checkout": ["verify-checkout", "/nonexistent/checkout"],
    "overlay": ["overlay", "status", "bad/name", "--to", "."],
    "build": ["build", "nope", "--spec", str(STACK_YAML)],
    "verify-image": ["verify-image", "img:1"],  # docker is not reachable (the test makes it so)
    "snapshot": ["snapshot", "--python", "/nonexistent/python"],
    "diff": ["diff", "/nonexistent/a.json", "/nonexistent/b.json"],
    "doctor": ["doctor", "nope", "--spec", str(STACK_YAML)],
    "pin-base": ["pin-base", "nope", "--spec", str(STACK_YAML)],
    "reproduce": ["reproduce", "/nonexistent/g.json", "--venv", "/nonexistent/v", "--checkouts", "/nonexistent/c"],
    "run": ["run", "--golden", "/nonexistent/g.json"],
    "bisect-check": ["bisect-check", "/nonexistent/g.json"],
    "facts extract": ["facts", "extract", "nope", "--from", "/nonexistent/x", "--spec", str(STACK_YAML)],
    "facts check": ["facts", "check", "--spec", MISSING],
    "facts show": ["facts", "show", "nope", "--spec", str(STACK_YAML)],
    "mirror-artifacts": ["mirror-artifacts", "nope", "--to", "/nonexistent/mirror", "--spec", str(STACK_YAML)],
}


def _has_json(parser) -> bool:
    import argparse

    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return "--json" in parser._option_string_actions or any(_has_json(p) for a in subs for p in a.choices.values())


def _json_verbs():
    from megacpp_env.cli import build_parsers, subcommands

    verbs = [v for v in VERBS if not subcommands(v) and _has_json(build_parsers([v])[1])]
    return verbs + [f"{v} {w}" for v in VERBS for w in subcommands(v) if _has_json(build_parsers([v, w])[1])]


def test_every_json_verb_has_a_failing_case():
    assert sorted(FAILING) == sorted(_json_verbs())


@pytest.mark.parametrize("verb", sorted(FAILING))
def test_json_on_failure_for_every_verb(verb, capsys, monkeypatch):
    """JSON on failure is emitted once, by cli.main: {"ok": false, "error": ...} on stdout, the same
    one line on stderr, exit 1."""
    from megacpp_env import docker
    from megacpp_env.errors import ToolError

    def no_docker(*_a, **_k):
        raise ToolError("docker: not reachable here")

    monkeypatch.setattr(docker, "run_in_image", no_docker)
    usage = "nope" in FAILING[verb]  # a target or source the spec does not have: a usage error (exit 2)
    assert main([*FAILING[verb], "--json"]) == ERROR_EXIT.get(verb, 2 if usage else 1)
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["ok"] is False and data["error"]
    assert err == f"megacpp-env {verb.split()[0]}: error: {data['error']}\n"
