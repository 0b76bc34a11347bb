"""flake.nix parses, and the versions it shares with stack.yaml (nix/pins.nix) agree with the spec."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from megacpp_env import __version__
from megacpp_env.spec import load_spec
from tests.fixtures.spec import REPO_ROOT, STACK_YAML

nix = pytest.mark.skipif(shutil.which("nix-instantiate") is None, reason="nix-instantiate (Debian nix-bin) not installed")


@nix
def test_flake_parses():
    subprocess.run(["nix-instantiate", "--parse", str(REPO_ROOT / "flake.nix")], check=True, capture_output=True)


@nix
def test_pins_agree_with_stack_yaml():
    out = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", str(REPO_ROOT / "nix" / "pins.nix")],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    pins = json.loads(out)
    spec = load_spec(STACK_YAML)
    for toolchain in spec.toolchains.values():
        assert (toolchain.python, toolchain.gcc, toolchain.uv) == (pins["python"], pins["gcc"], pins["uv"]), toolchain.name
    assert pins["tool"] == __version__


def test_flake_uses_the_pins_file():
    text = (REPO_ROOT / "flake.nix").read_text()
    assert "import ./nix/pins.nix" in text
    for needle in ("pins.python", "pins.gcc", "pins.tool", "pkgs.uv", "pkgs.hadolint", "pkgs.docker-client", "pkgs.git"):
        assert needle in text
