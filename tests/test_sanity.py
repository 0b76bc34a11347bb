"""sanity: the in-image checks (imports, statements, vLLM registry resolution also in a fresh interpreter).

vLLM itself cannot be installed here (CUDA build), so a small ``vllm`` package with the registry API the
check uses (``ModelRegistry.get_supported_archs`` / ``_try_load_model_cls``) is written to a temp dir.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from megacpp_env import sanity

REPO_ROOT = Path(__file__).resolve().parent.parent

VLLM_INIT = """
import os

class _Registry:
    def __init__(self):
        self.models = {"LlamaForCausalLM": ("vllm.models", "Llama"), "Broken": ("vllm.nope", "X")}
        extra = os.environ.get("FAKE_VLLM_EXTRA")
        if extra:
            self.models[extra] = ("vllm.models", "Qwen")

    def register(self, name, where):
        self.models[name] = where

    def get_supported_archs(self):
        return self.models.keys()

    def _try_load_model_cls(self, name):
        import importlib
        mod, cls = self.models[name]
        try:
            return getattr(importlib.import_module(mod), cls)
        except ImportError:
            return None

ModelRegistry = _Registry()
"""


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    pkg = tmp_path / "vllm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(VLLM_INIT)
    (pkg / "models.py").write_text("class Llama: pass\nclass Qwen: pass\n")
    path = os.pathsep.join([str(tmp_path), str(REPO_ROOT)])
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "megacpp_env.sanity", *args],
        capture_output=True, text=True, cwd=REPO_ROOT, env={**os.environ, **(env or {})}, check=False,
    )


def test_imports_and_statements_pass():
    proc = _cli("--source", "s", "--import", "json", "--import", "os.path", "--statement",
                "assert os.path.join('a', 'b') == 'a/b'")
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.splitlines()[-1] == "[s] ok: assert os.path.join('a', 'b') == 'a/b'"


def test_failures_exit_1_and_say_why():
    proc = _cli("--import", "no_such_module_xyz", "--statement", "assert 1 == 2", "--json")
    assert proc.returncode == 1
    doc = json.loads(proc.stdout)
    assert doc["ok"] is False
    assert doc["results"][0] == {
        "check": "import no_such_module_xyz", "ok": False,
        "detail": "ModuleNotFoundError: No module named 'no_such_module_xyz'",
    }
    assert doc["results"][1]["detail"] == "AssertionError: "


def test_vllm_model_resolves_here_and_in_a_fresh_interpreter(fake_vllm):
    results = sanity.run_checks(imports=["vllm"], statements=[], vllm_models=["LlamaForCausalLM"])
    assert [r.ok for r in results] == [True, True, True]
    assert results[1].detail == results[2].detail == "vllm.models.Llama"
    assert results[2].check == "vllm model LlamaForCausalLM (fresh interpreter)"


def test_vllm_model_missing_or_unloadable(fake_vllm):
    (missing,) = sanity.check_vllm_model("Qwen3_5ForCausalLMTextOnly")
    assert not missing.ok and "is not in vLLM's model registry" in missing.detail
    (broken,) = sanity.check_vllm_model("Broken")
    assert not broken.ok and "lists Broken but cannot load its class" in broken.detail


def test_registration_only_in_this_process_fails_the_subprocess_check(fake_vllm):
    import vllm

    vllm.ModelRegistry.register("Qwen3_5ForCausalLMTextOnly", ("vllm.models", "Qwen"))
    here, fresh = sanity.check_vllm_model("Qwen3_5ForCausalLMTextOnly")
    assert here.ok and not fresh.ok
    assert "is not in vLLM's model registry" in fresh.detail


def test_registration_that_survives_reimport_passes(fake_vllm):
    proc = _cli("--vllm-model", "Qwen3_5ForCausalLMTextOnly", env={"FAKE_VLLM_EXTRA": "Qwen3_5ForCausalLMTextOnly"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        "ok: vllm model Qwen3_5ForCausalLMTextOnly -> vllm.models.Qwen",
        "ok: vllm model Qwen3_5ForCausalLMTextOnly (fresh interpreter) -> vllm.models.Qwen",
    ]


def test_stdlib_only():
    tree = ast.parse((REPO_ROOT / "megacpp_env" / "sanity.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    assert names - {"vllm"} <= set(sys.stdlib_module_names) | {"__future__"}, names


def test_dockerfile_sanity_lines_parse(tmp_path):
    """The exact argument form the rendered Dockerfiles use is accepted by the parser."""
    args = sanity._parser().parse_args(textwrap.dedent("""
        --source vllm --import vllm --vllm-model Qwen3_5ForCausalLMTextOnly --statement x
    """).split())
    assert args.imports == ["vllm"] and args.vllm_models == ["Qwen3_5ForCausalLMTextOnly"]
