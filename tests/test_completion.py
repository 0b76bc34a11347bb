"""Shell completion: the shipped scripts are what shtab generates from the full parser, and bash
really completes verbs and options with them."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess

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
    assert _complete("lock", "--ch") == ["--check"]
    assert _complete("completion", "") == ["bash", "zsh"]
    assert "--golden" in _complete("snapshot", "--g")
