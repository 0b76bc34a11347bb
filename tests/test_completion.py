"""Shell completion: the shipped scripts are what shtab generates from the full parser, and bash
really completes verbs and options with them."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from megacpp_env import completions
from megacpp_env.cli import VERBS, main
from tests.fixtures.spec import REPO_ROOT


def _generator():
    spec = importlib.util.spec_from_file_location("gen_completions", REPO_ROOT / "scripts" / "completions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("shell", sorted(completions.FILES))
def test_shipped_scripts_are_current(shell):
    assert completions.script(shell) == _generator().generate(shell), (
        f"{completions.path(shell)} is stale: run `python scripts/completions.py`"
    )


@pytest.mark.parametrize("shell", sorted(completions.FILES))
def test_completion_verb_prints_the_script(shell, capsys):
    assert main(["completion", shell]) == 0
    assert capsys.readouterr().out == completions.script(shell)


def _complete(*words: str) -> list[str]:
    script = completions.path("bash")
    line = " ".join(["megacpp-env", *words])
    code = (
        f"source {script}\n"
        f"COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}\n"
        f"COMP_WORDS=(megacpp-env {' '.join(repr(w) for w in words)}); COMP_CWORD={len(words)}\n"
        "_shtab_megacpp_env\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", code], capture_output=True, text=True, check=True)
    return sorted(filter(None, proc.stdout.splitlines()))


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_bash_completes_verbs_and_their_options():
    assert _complete("") == sorted(VERBS)
    assert _complete("ren") == ["render"]
    assert "--check" in _complete("render", "--")
    assert _complete("lock", "") == ["check", "diff", "export", "resolve"]
    assert _complete("lock", "check", "--al") == ["--allow-unlocked"]
    assert _complete("lock", "diff", "--f") == ["--format"]
    assert _complete("completion", "") == ["bash", "fish", "zsh"]
    assert "--golden" in _complete("snapshot", "--g")


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_bash_completes_target_and_source_names_from_the_spec(tmp_path, monkeypatch):
    """The names come from the spec found upward from the working directory, by running
    `megacpp-env completion --names KIND` (this venv's megacpp-env first on PATH)."""
    import os
    import sys

    from megacpp_env.spec import load_spec

    spec = load_spec(REPO_ROOT / "stack.yaml")
    monkeypatch.setenv("PATH", os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    monkeypatch.delenv("MEGACPP_ENV_SPEC", raising=False)
    monkeypatch.chdir(REPO_ROOT / "images")  # a subdirectory: the spec is found upward
    assert _complete("build", "") == sorted(spec.targets)
    assert _complete("show", "cu") == ["cuda_smoke"]
    assert _complete("render", "smoke", "") == sorted(spec.targets)
    assert _complete("checkout", "") == sorted(spec.sources)
    assert _complete("facts", "show", "mamba") == [n for n in sorted(spec.sources) if n.startswith("mamba")]
    monkeypatch.chdir(tmp_path)  # no spec here: nothing offered, nothing printed
    assert _complete("build", "") == []


def test_names_verb(capsys, tmp_path, monkeypatch):
    from megacpp_env.spec import load_spec

    spec = load_spec(REPO_ROOT / "stack.yaml")
    assert main(["completion", "--names", "targets", "--spec", str(REPO_ROOT / "stack.yaml")]) == 0
    assert capsys.readouterr().out.split() == list(spec.targets)
    monkeypatch.delenv("MEGACPP_ENV_SPEC", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["completion", "--names", "sources"]) == 1
    assert capsys.readouterr() == ("", "")  # silent: a completion prints nothing into the command line
    assert main(["completion"]) == 2


def test_fish_script_is_generated_by_shtab():
    """shtab (>= 1.13) generates fish too; the fish script completes verbs and the spec's names."""
    text = completions.script("fish")
    assert "complete -c megacpp-env" in text
    assert "(megacpp-env completion --names targets 2>/dev/null)" in text
