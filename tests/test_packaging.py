"""megacpp-env as a package: publishable metadata, an sdist that rebuilds, and installs (pip into a
fresh venv that is never activated, uv tool, pipx) that run lock, render, snapshot and build's
context staging from another directory, offline (the wheelhouse and a local index only)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from megacpp_env import __version__, build, render
from megacpp_env.spec import load_spec
from megacpp_env.uv import UV_FLOOR
from tests.fixtures.index import write_lock_spec
from tests.fixtures.install import REPO_ROOT, TOOL_LOCK, fresh_venv, offline_env, pip_into

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
PROJECT_DIRS = ("stack.yaml", "images", "locks", "overlays", "facts")
SHIPPED_TREE = ("megacpp_env/templates/Dockerfile.j2", "megacpp_env/templates/partials/srcbuild_copy.j2",
                "megacpp_env/py.typed", "megacpp_env/runtime/megacpp_env_runtime.pth",
                "megacpp_env/completions/megacpp-env.bash", "megacpp_env/completions/_megacpp-env",
                "megacpp_env/completions/megacpp-env.fish", "megacpp_env/schemas/stack.schema.json",
                "megacpp_env/_project/pyproject.toml", "megacpp_env/_project/README.md",
                "megacpp_env/_project/LICENSE")  # fmt: skip
NO_UV_PATH = "/usr/bin:/bin"


def run(argv, *, cwd, env, ok=True):
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if ok:
        assert proc.returncode == 0, f"{argv}: {proc.stdout[-2000:]}{proc.stderr[-3000:]}"
    return proc


def copy_project(dest: Path) -> Path:
    """A project that uses megacpp-env: the shipped spec, Dockerfiles, locks and overlays, no tool source."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_DIRS:
        src = REPO_ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest / name)
    return dest


# ---- metadata -------------------------------------------------------------------------------------


def test_metadata_is_publishable():
    project = PYPROJECT["project"]
    assert (project["license"], project["license-files"]) == ("Apache-2.0", ["LICENSE"])
    head = (REPO_ROOT / "LICENSE").read_text().split()[:4]
    assert head == ["Apache", "License", "Version", "2.0,"]
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]  # PEP 639: the expression only
    floor = Version(project["requires-python"].removeprefix(">="))
    for minor in range(floor.minor, 14):
        assert f"Programming Language :: Python :: 3.{minor}" in project["classifiers"]
    assert "Typing :: Typed" in project["classifiers"]
    assert {"Homepage", "Source", "Issues", "Documentation", "Changelog"} <= set(project["urls"])
    assert PYPROJECT["build-system"]["requires"] == ["setuptools>=77"]


def test_the_hashed_tool_lock_covers_the_dependencies_and_build_backend():
    wanted = {*PYPROJECT["project"]["dependencies"], *PYPROJECT["build-system"]["requires"]}
    lines = (REPO_ROOT / ".ci" / "tool-requirements.in").read_text().splitlines()
    assert {line for line in lines if line and not line.startswith("#")} == wanted
    text = TOOL_LOCK.read_text()
    assert "uv pip compile --universal --python-version 3.11 --generate-hashes .ci/tool-requirements.in" in text
    pins = {}
    for block in text.split("\n"):
        if block and not block.startswith((" ", "#")):
            req = Requirement(block.rstrip(" \\"))
            pins[req.name] = next(iter(req.specifier)).version
    for spec in wanted:
        req = Requirement(spec)
        assert req.specifier.contains(pins[req.name]), (spec, pins.get(req.name))
    assert text.count("--hash=sha256:") >= len(pins)


# ---- the sdist and the wheel -------------------------------------------------------------------------


def test_sdist_holds_what_a_rebuild_needs(built_dists):
    prefix = f"megacpp_env-{__version__}/"
    with tarfile.open(built_dists.sdist) as tar:
        members = {m.name.removeprefix(prefix): m for m in tar.getmembers()}
        for name in ("LICENSE", "README.md", "pyproject.toml", "PKG-INFO", *SHIPPED_TREE):
            assert name in members and members[name].isfile(), name
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shipped = tar.extractfile(members[f"megacpp_env/_project/{name}"]).read()
            assert shipped == (REPO_ROOT / name).read_bytes(), name
    # uv build made the wheel from this sdist, so a rebuild from the sdist alone works
    assert built_dists.wheel.name == f"megacpp_env-{__version__}-py3-none-any.whl"


def test_wheel_ships_templates_license_and_metadata(built_dists):
    with zipfile.ZipFile(built_dists.wheel) as whl:
        names = set(whl.namelist())
        dist_info = f"megacpp_env-{__version__}.dist-info"
        assert set(SHIPPED_TREE) <= names
        assert f"{dist_info}/licenses/LICENSE" in names
        meta = whl.read(f"{dist_info}/METADATA").decode()
    assert "License-Expression: Apache-2.0" in meta and "License-File: LICENSE" in meta
    assert "Classifier: Programming Language :: Python :: 3.13" in meta
    assert "Project-URL: Source, https://github.com/megacpp/megacpp-env" in meta
    assert f"Requires-Dist: uv>={UV_FLOOR}" in meta
    tracked = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "megacpp_env"],
                             cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    assert {n for n in names if n.startswith("megacpp_env/")} == set(tracked)  # every file of the package, no more


# ---- installs that run from another directory ------------------------------------------------------------


@pytest.fixture(scope="module")
def venv_bin(tmp_path_factory, built_dists, wheelhouse):
    """A fresh venv with the wheel installed from the wheelhouse; never activated."""
    bin_dir = fresh_venv(tmp_path_factory.mktemp("venv") / "venv")
    run([bin_dir / "python", "-m", "pip", "install", "-q", built_dists.wheel], cwd=tmp_path_factory.getbasetemp(),
        env=offline_env(wheelhouse))  # fmt: skip
    return bin_dir


def test_pip_installed_wheel_locks_renders_and_snapshots_from_elsewhere(venv_bin, local_indexes, tmp_path, wheelhouse):
    assert shutil.which("uv", path=NO_UV_PATH) is None, "this test needs a PATH without uv"
    project = tmp_path / "project"
    write_lock_spec(project, local_indexes.nightly.url)
    deep = project / "src" / "deep"
    deep.mkdir(parents=True)
    env = offline_env(wheelhouse, PATH=NO_UV_PATH, HOME=str(tmp_path / "home"),
                      UV_DEFAULT_INDEX=local_indexes.pypi.url, UV_CACHE_DIR=str(tmp_path / "uv-cache"))  # fmt: skip
    for key in ("UV_OFFLINE", "UV_NO_INDEX", "UV_FIND_LINKS"):
        env.pop(key)  # lock resolves from the local index
    exe = venv_bin / "megacpp-env"
    run([exe, "lock", "resolve", "smoke"], cwd=deep, env=env)  # spec found upward, uv found through the uv package
    locked = (project / "locks" / "pylock.smoke-linux-amd64.toml").read_text()
    assert 'name = "attrs"' in locked and 'name = "fastpath"' in locked
    run([exe, "lock", "check", "smoke"], cwd=deep, env=env)
    run([exe, "render", "smoke"], cwd=deep, env=env)
    rendered = render.render_all(load_spec(project / "stack.yaml"), ["smoke"])  # Dockerfile, resolutions, plans
    assert {f.relpath for f in rendered} >= {"images/smoke/Dockerfile", "images/smoke/resolutions.json"}
    for expected in rendered:
        assert (project / expected.relpath).read_bytes() == expected.content, expected.relpath
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    active = {**env, "VIRTUAL_ENV": str(venv_bin.parent)}  # the venv activated: snapshot inspects it
    run([exe, "snapshot", "-o", elsewhere / "snap.json"], cwd=elsewhere, env=active)
    snap = json.loads((elsewhere / "snap.json").read_text())
    assert snap["host"]["inspected_python_reason"] == f"the active virtual environment (VIRTUAL_ENV={venv_bin.parent})"
    assert snap["host"]["tool"] == f"megacpp-env {__version__}" and snap["host"]["spec"] is None
    assert snap["facts"]["python"]["interpreter"]["prefix"] == str(venv_bin.parent)
    assert snap["facts"]["python"]["distributions"]["megacpp-env"]["integrity"]["status"] == "ok"


def test_build_from_an_installed_tool_stages_an_installable_context(venv_bin, tmp_path, wheelhouse):
    """The project has no megacpp-env source: build stages the installed tool's files. The staged tree
    installs exactly as the Dockerfile installs it, and hashes as a build from this checkout does."""
    project = copy_project(tmp_path / "project")
    env = offline_env(wheelhouse, PATH=NO_UV_PATH, HOME=str(tmp_path / "home"))
    dry = run([venv_bin / "megacpp-env", "build", "smoke", "--dry-run"], cwd=project / "images", env=env).stdout
    assert "is not megacpp-env's source: the build context is staged in a temporary directory" in dry
    assert f"the installed package {venv_bin.parent}/lib/" in dry
    staged = tmp_path / "context"
    code = (
        "import sys; from pathlib import Path; from megacpp_env import build; from megacpp_env.spec import load_spec\n"
        "plan = build.plan_build(load_spec(sys.argv[1]), build.BuildOptions(target='smoke'))\n"
        "build.stage_context(plan.staged, Path(sys.argv[2])); print(plan.content_hash)"
    )
    digest = run([venv_bin / "python", "-c", code, project / "stack.yaml", staged], cwd=tmp_path, env=env).stdout
    here = load_spec(REPO_ROOT / "stack.yaml")
    assert digest.strip() == build.content_hash(here, here.target("smoke"), "linux/amd64")  # same inputs, same tag
    for name in ("stack.yaml", "LICENSE", "pyproject.toml", "README.md", "megacpp_env/templates/Dockerfile.j2",
                 "images/smoke/Dockerfile", "locks/smoke.linux-amd64.requirements.txt"):  # fmt: skip
        assert (staged / name).is_file(), name
    # the Dockerfile's install step: pip install --no-deps --no-index --no-build-isolation <tool dir>
    image_venv = fresh_venv(tmp_path / "image-venv", with_pip=False)
    pip_into(image_venv, "setuptools>=77", env=env)
    pip_into(image_venv, "--no-deps", "--no-index", "--no-build-isolation", staged, env=env)
    assert (
        run([image_venv / "megacpp-env", "--version"], cwd=tmp_path, env=env).stdout == f"megacpp-env {__version__}\n"
    )


def test_uv_tool_install_runs_outside_the_repository(built_dists, wheelhouse, tmp_path):
    from uv import find_uv_bin

    env = offline_env(wheelhouse, UV_TOOL_DIR=str(tmp_path / "tools"), UV_TOOL_BIN_DIR=str(tmp_path / "bin"),
                      UV_CACHE_DIR=str(tmp_path / "uv-cache"), HOME=str(tmp_path / "home"))  # fmt: skip
    run([find_uv_bin(), "tool", "install", "--python", sys.executable, built_dists.wheel], cwd=tmp_path, env=env)
    _checks_pass(tmp_path / "bin" / "megacpp-env", copy_project(tmp_path / "project"), env)


def test_pipx_install_runs_outside_the_repository(built_dists, wheelhouse, tmp_path):
    env = offline_env(wheelhouse, PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(tmp_path / "bin"),
                      PIPX_MAN_DIR=str(tmp_path / "man"), HOME=str(tmp_path / "home"))  # fmt: skip
    run([sys.executable, "-m", "pipx", "install", "--python", sys.executable, built_dists.wheel], cwd=tmp_path, env=env)
    _checks_pass(tmp_path / "bin" / "megacpp-env", copy_project(tmp_path / "project"), env)


def _checks_pass(exe: Path, project: Path, env: dict[str, str]) -> None:
    env = {**env, "PATH": NO_UV_PATH}
    where = project / "images" / "smoke"
    assert run([exe, "render", "--check"], cwd=where, env=env).stdout == ""
    out = run([exe, "lock", "check", "smoke"], cwd=where, env=env).stdout
    assert out.splitlines()[0] == "ok: smoke linux/amd64: locks/pylock.smoke-linux-amd64.toml"
    assert run([exe, "check"], cwd=where, env=env).returncode == 0
