"""uv.py: which uv binary megacpp-env runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from uv import find_uv_bin

from megacpp_env import uv
from megacpp_env.errors import ToolNotFoundError


def test_the_uv_package_binary_is_found_without_path(monkeypatch, tmp_path):
    monkeypatch.delenv("MEGACPP_ENV_UV", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: a venv that is not activated
    exe = uv.uv_executable()
    assert exe == find_uv_bin()
    assert subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout.startswith("uv ")


def test_override_wins_and_a_missing_override_is_named(monkeypatch, tmp_path):
    fake = tmp_path / "my-uv"
    fake.write_text("#!/bin/sh\necho uv 0.0.0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("MEGACPP_ENV_UV", str(fake))
    assert uv.uv_executable() == str(fake)
    monkeypatch.setenv("MEGACPP_ENV_UV", str(tmp_path / "gone"))
    with pytest.raises(ToolNotFoundError, match=r"^MEGACPP_ENV_UV='.*gone': no such executable$"):
        uv.uv_executable()


def test_without_the_uv_package_path_is_used_then_the_error_names_both(tmp_path):
    # A fresh interpreter in which `import uv` fails (as in a distro package without the uv wheel).
    shadow = tmp_path / "shadow"
    (shadow / "uv").mkdir(parents=True)
    (shadow / "uv" / "__init__.py").write_text("raise ImportError('no uv wheel here')\n")
    onpath = tmp_path / "bin"
    onpath.mkdir()
    code = (
        "from megacpp_env import uv\n"
        "try:\n    print(uv.uv_executable())\nexcept Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MEGACPP_ENV_UV"}
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), os.path.dirname(os.path.dirname(uv.__file__))])
    env["PATH"] = str(onpath)

    def which() -> str:
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout

    assert which() == (
        "ToolNotFoundError uv not found: neither the uv package's binary nor `uv` on PATH (install it: pip install uv)\n"
    )
    (onpath / "uv").symlink_to(find_uv_bin())
    assert which() == f"{onpath / 'uv'}\n"


RACE = """
import sys, threading
sys.setswitchinterval(1e-6)
from megacpp_env.uv import uv_executable
barrier = threading.Barrier(16)
found, errors = set(), []
def work():
    barrier.wait()
    try:
        found.add(uv_executable())
    except Exception as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
threads = [threading.Thread(target=work) for _ in range(16)]
for t in threads: t.start()
for t in threads: t.join()
print(len(found), errors[:1])
"""


def test_concurrent_first_lookups_agree(tmp_path):
    # `lock` resolves platforms in parallel threads; uv.find_uv_bin() reads sysconfig, whose first use
    # is not thread-safe on CPython 3.11 (a thread saw EXE None and raised TypeError in 3 of 5 runs
    # without megacpp_env.uv's lock). A fresh interpreter each time, so sysconfig starts cold.
    env = {k: v for k, v in os.environ.items() if k != "MEGACPP_ENV_UV"} | {"PATH": str(tmp_path)}
    for _ in range(5):
        out = subprocess.run([sys.executable, "-c", RACE], env=env, capture_output=True, text=True, check=True).stdout
        assert out == "1 []\n"
