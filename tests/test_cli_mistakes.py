"""Common mistakes, as a new user makes them: each gives one clear error line (argparse's usage lines
may stand before it) and the right exit code: 2 for a usage error (with a did-you-mean where a known
name is close), 1 for a user error (a missing or broken spec, a gate outside a repository)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from megacpp_env.cli import main
from tests.fixtures.spec import REPO_ROOT

SHIPPED = (REPO_ROOT / "stack.yaml").read_text()


def _spec(edit=None):
    def make(where: Path) -> None:
        text = SHIPPED if edit is None else edit(SHIPPED)
        (where / "stack.yaml").write_text(text)
        shutil.copytree(REPO_ROOT / "facts", where / "facts")

    return make


def _nothing(where: Path) -> None:
    pass


# name -> (prepare the directory, argv, exit code, what the error line says)
CASES = {
    "typo'd verb": (_nothing, ["chek"], 2, "invalid choice: 'chek' (did you mean 'check'?)"),
    "typo'd verb, far from any": (_nothing, ["zzzz"], 2, "invalid choice: 'zzzz' (choose from 'check'"),
    "typo'd action": (_spec(), ["overlay", "aply", "x"], 2, "invalid choice: 'aply' (did you mean 'apply'?)"),
    "typo'd option": (_spec(), ["check", "--strct"], 2, "unrecognized arguments: --strct (did you mean --strict?)"),
    "typo'd format": (_spec(), ["check", "--format", "sarf"], 2, "invalid choice: 'sarf' (did you mean 'sarif'?)"),
    "typo'd platform": (_spec(), ["lock", "check", "--platform", "linux/arm46"], 2,
                        "unknown platform 'linux/arm46' (remedy: did you mean 'linux/arm64'?)"),
    "typo'd artifact set": (_spec(), ["mirror-artifacts", "flashinfer_cubin", "--to", "m"], 2,
                            "unknown artifact set 'flashinfer_cubin' (remedy: did you mean 'flashinfer_cubins'?)"),
    "typo'd target": (_spec(), ["show", "gb11"], 2, "unknown target 'gb11' (remedy: did you mean 'gb10'?)"),
    "typo'd target of doctor": (_spec(), ["doctor", "smok"], 2, "unknown target 'smok' (remedy: did you mean 'smoke'?)"),
    "typo'd source": (_spec(), ["checkout", "vlm"], 2, "unknown source 'vlm' (remedy: did you mean 'vllm'?)"),
    "typo'd source of facts": (_spec(), ["facts", "show", "mamba"], 2, "unknown source 'mamba' (remedy: did you mean"),
    "typo'd rule code": (_spec(), ["check", "--rule", "TC05"], 2, "unknown rule code 'TC05' (remedy: did you mean 'TC005'?)"),
    "unknown rule code": (_spec(), ["check", "--rule", "NOPE"], 2, "unknown rule code 'NOPE' (remedy: known: AR001"),
    "typo'd code to explain": (_nothing, ["explain", "UP15"], 2, "unknown code 'UP15' (remedy: did you mean 'UP015'?)"),
    "lock for an unknown target": (_spec(), ["lock", "check", "nope"], 2, "unknown target 'nope' (remedy: known:"),
    "missing spec": (_nothing, ["show", "gb10"], 1, "no stack.yaml in "),
    "missing spec given": (_nothing, ["show", "gb10", "--spec", "nowhere.yaml"], 1, "nowhere.yaml: spec file not found"),
    "bad YAML": (_spec(lambda t: t.replace("project: megacpp", "project: [megacpp", 1)), ["show", "gb10"], 1,
                 "invalid YAML"),
    "wrong type": (_spec(lambda t: t.replace('gcc: "15"', "gcc: 15.0", 1)), ["show", "gb10"], 1,
                   "gcc: expected a string, got float 15.0 (remedy: quote it: \"15.0\")"),
    "unknown key": (_spec(lambda t: t.replace("    platforms: [linux/arm64]", "    platform: [linux/arm64]", 1)),
                    ["render", "--check"], 1, "targets.gb10.platform: unknown key (remedy: did you mean 'platforms'?)"),
    "gate outside a repository": (_spec(), ["gate", "--base", "HEAD"], 1, "is not in a git repository"),
    "gate at an unknown ref": ("git", ["gate", "--base", "origin/nope"], 1, "unknown git ref 'origin/nope'"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_common_mistake_gives_one_clear_line(name, tmp_path, monkeypatch, capsys):
    prepare, argv, code, said = CASES[name]
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MEGACPP_ENV_SPEC", raising=False)
    if prepare == "git":
        import subprocess

        _spec()(tmp_path)
        subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    else:
        prepare(tmp_path)
    assert main(argv) == code
    out, err = capsys.readouterr()
    errors = [line for line in err.splitlines() if not line.startswith(("usage:", " "))]
    assert len(errors) == 1, err
    assert said in errors[0], errors[0]
    assert "Traceback" not in err
    assert out == ""
