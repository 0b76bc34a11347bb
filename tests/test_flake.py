"""flake.nix parses and evaluates (with stub inputs), and the versions it shares with stack.yaml
(nix/pins.nix) agree with the spec."""

from __future__ import annotations

import json
import re
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
    for needle in ("pins.python", "pins.gcc", "pins.tool", "pins.uv"):
        assert needle in text


# ---- the flake's outputs, evaluated offline with stub inputs (no nixpkgs download) ----

STUB_EVAL = r"""
let
  flake = import (REPO + "/flake.nix");
  drv = name: extra: { type = "derivation"; inherit name; pname = name; outPath = "/nix/store/stub-" + name; } // extra;
  pyNames = [ "setuptools" "jinja2" "pyyaml" "packaging" "uv" "tomli-w" "nvidia-ml-py" "pytestCheckHook"
              "hypothesis" "pytest" "jsonschema" "mypy" "types-pyyaml" ];
  python = {
    pkgs = builtins.listToAttrs (map (n: { name = n; value = drv n { }; }) pyNames) // {
      buildPythonApplication = args: drv args.pname { inherit args; };
    };
    withPackages = f: drv "python-env" { members = map (p: p.pname) (f python.pkgs); };
  };
  pkgsFor = system: {
    PYTHON_ATTR = python;
    GCC_ATTR = drv "gcc" { };
    uv = drv "uv-bin" { }; ruff = drv "ruff" { }; git = drv "git" { };
    docker-client = drv "docker-client" { }; hadolint = drv "hadolint" { };
    lib = {
      makeBinPath = ps: builtins.concatStringsSep ":" (map (p: "${p}/bin") ps);
      licenses.asl20 = "asl20";
    };
    mkShell = args: drv "shell" { inherit args; };
  };
  nixpkgs = {
    lib.genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
    legacyPackages = builtins.listToAttrs (map (s: { name = s; value = pkgsFor s; }) [ "x86_64-linux" "aarch64-linux" ]);
  };
  out = flake.outputs { self = { }; inherit nixpkgs; };
  pkg = out.packages.SYSTEM.default;
  shell = out.devShells.SYSTEM.default.args;
in {
  nixpkgs_url = flake.inputs.nixpkgs.url;
  input_names = builtins.attrNames flake.inputs;
  systems = builtins.attrNames out.packages;
  same_default = out.packages.SYSTEM.default == out.packages.SYSTEM.megacpp-env;
  pname = pkg.args.pname;
  version = pkg.args.version;
  pyproject = pkg.args.pyproject;
  build_system = map (p: p.pname) pkg.args.build-system;
  dependencies = map (p: p.pname) pkg.args.dependencies;
  relaxed = pkg.args.pythonRelaxDeps;
  wrapper = pkg.args.makeWrapperArgs;
  main_program = pkg.args.meta.mainProgram;
  app = out.apps.SYSTEM.default;
  shell_packages = map (p: p.name) shell.packages;
  shell_python = (builtins.head (builtins.filter (p: p.name == "python-env") shell.packages)).members;
}
"""


def _eval_flake(system: str) -> dict:
    from megacpp_env.spec import load_spec as _load

    spec = _load(STACK_YAML)
    tc = next(iter(spec.toolchains.values()))
    expr = (
        STUB_EVAL.replace("REPO", json.dumps(str(REPO_ROOT)))
        .replace("SYSTEM", system)
        .replace("PYTHON_ATTR", "python" + tc.python.replace(".", ""))
        .replace("GCC_ATTR", "gcc" + tc.gcc)
    )
    proc = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "--expr", expr],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@nix
@pytest.mark.parametrize("system", ["x86_64-linux", "aarch64-linux"])
def test_flake_outputs_evaluate_with_stub_inputs(system):
    import tomllib

    from packaging.requirements import Requirement

    out = _eval_flake(system)
    # nixpkgs is pinned to a revision, not a branch; no other input floats either
    assert out["input_names"] == ["nixpkgs"]
    assert re.fullmatch(r"github:NixOS/nixpkgs/[0-9a-f]{40}", out["nixpkgs_url"]), out["nixpkgs_url"]
    assert out["systems"] == ["aarch64-linux", "x86_64-linux"]
    assert out["same_default"] is True
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert (out["pname"], out["version"], out["pyproject"]) == (project["project"]["name"], __version__, True)
    assert out["build_system"] == ["setuptools"]
    # every runtime dependency of pyproject.toml is met by a nixpkgs python package
    wanted = sorted(Requirement(r).name.lower() for r in project["project"]["dependencies"])
    assert sorted(out["dependencies"]) == wanted
    assert out["relaxed"] == ["uv"]  # nixpkgs' uv is older than the floor; flake.nix says why
    assert out["wrapper"] == ["--suffix", "PATH", ":", "/nix/store/stub-git/bin"]
    assert out["main_program"] == "megacpp-env"
    assert out["app"] == {"type": "app", "program": "/nix/store/stub-megacpp-env/bin/megacpp-env"}
    # the tool is on the dev shell's PATH, next to the interpreter with the tool's and the tests' deps
    assert "megacpp-env" in out["shell_packages"]
    assert {"uv-bin", "git", "docker-client", "hadolint", "ruff", "gcc"} <= set(out["shell_packages"])
    assert set(wanted) | {"pytest", "hypothesis"} <= set(out["shell_python"])


@nix
def test_a_missing_nixpkgs_attribute_fails_the_evaluation():
    """The stub is strict: an attribute the flake needs but the stub lacks is an error, not a pass."""
    expr = STUB_EVAL.replace("REPO", json.dumps(str(REPO_ROOT))).replace("SYSTEM", "x86_64-linux")
    expr = expr.replace("PYTHON_ATTR", "python313").replace("GCC_ATTR", "gcc15").replace('hadolint = drv "hadolint" { };', "")
    proc = subprocess.run(["nix-instantiate", "--eval", "--strict", "--json", "--expr", expr], capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "hadolint" in proc.stderr
