"""Issue 19 item 8: a killed `build-source` never dirties the verified checkout (the build runs in a copy
beside it), and the next run cleans the killed run's copy and builds; item 10: `--wheel-dir` keeps the
user's own wheels. Real git repositories, real `pip wheel` builds, real SIGKILLs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.errors import RefusedError
from megacpp_env.srcbuild.build import RECORD, _keep_wheel
from megacpp_env.srcbuild.plan import SourcePlan
from tests.fixtures.srcbuild import TWO_FILES, TinyRepo, make_bare_repo, make_scratch_venv

# A setup.py that, when SLOW_MARKER is set, leaves what setuptools leaves (build/, *.egg-info) in its
# working directory, says it is in the wheel step, and waits to be killed.
SLOW_SETUP = (
    "import os, pathlib, time\n"
    "from setuptools import Extension, setup\n\n"
    "marker = os.environ.get('SLOW_MARKER')\n"
    "if marker:\n"
    "    pathlib.Path('build/temp.slow').mkdir(parents=True, exist_ok=True)\n"
    "    pathlib.Path('megacpp_smoke_two.egg-info').mkdir(exist_ok=True)\n"
    "    pathlib.Path('megacpp_smoke_two/_generated.py').write_text('X = 1\\n')\n"
    "    pathlib.Path(marker).write_text(os.getcwd())\n"
    "    time.sleep(300)\n"
    "setup(ext_modules=[Extension('megacpp_smoke_two._two', ['megacpp_smoke_two/_two.c'])])\n"
)
PRE_BUILD_SLOW = "if [ -n \"$SLOW_PRE\" ]; then echo edited >> pyproject.toml; touch \"$SLOW_PRE\"; sleep 300; fi"


@pytest.fixture
def slow_repo(tmp_path: Path) -> TinyRepo:
    return make_bare_repo(tmp_path / "upstream" / "megacpp-smoke-two.git", {**TWO_FILES, "setup.py": SLOW_SETUP})


@pytest.fixture
def target_python(tmp_path: Path) -> Path:
    return make_scratch_venv(tmp_path / "venv")


def write_plan(path: Path, repo: TinyRepo, *, pre_build: tuple[str, ...] = ()) -> Path:
    plan = SourcePlan(target="t", name="megacpp_smoke_two", dist="megacpp-smoke-two", repo=repo.url,
                      commit=repo.commit, pre_build=pre_build)  # fmt: skip
    path.write_text(plan.dumps())
    return path


def build_argv(plan: Path, python: Path, root: Path) -> list[str]:
    return [sys.executable, "-m", "megacpp_env.srcbuild", "build", "--plan", str(plan), "--venv", str(python),
            "--workdir", str(root / "src" / "megacpp-smoke-two"), "--wheel-dir", str(root / "wheels"), "--json"]  # fmt: skip


def kill_when(argv: list[str], marker: Path, env: dict[str, str], timeout: float = 120) -> None:
    """Start the build, SIGKILL its whole process group once ``marker`` appears (mid-step)."""
    proc = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + timeout
    try:
        while not marker.exists():
            assert proc.poll() is None, f"the build ended (rc {proc.returncode}) before reaching the marker"
            assert time.monotonic() < deadline, "the build never reached the marker"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def pristine(checkout: Path) -> list[str]:
    """Everything git sees as changed, untracked or ignored in the checkout ([] = byte-for-byte at the pin)."""
    out = git.run_git(["status", "--porcelain", "--ignored", "--untracked-files=all"], checkout).stdout
    return [line for line in out.decode().splitlines() if line != "!! .megacpp-checkout.json"]  # the provenance


def test_sigkill_mid_wheel_leaves_the_checkout_pristine_and_the_rerun_builds(slow_repo, target_python, tmp_path):
    plan = write_plan(tmp_path / "plan.json", slow_repo)
    root, marker = tmp_path / "w", tmp_path / "in-wheel"
    argv = build_argv(plan, target_python, root)
    kill_when(argv, marker, {**os.environ, "SLOW_MARKER": str(marker)})
    checkout = root / "src" / "megacpp-smoke-two"
    assert pristine(checkout) == []  # build/, *.egg-info and the generated file went to the copy
    assert Path(marker.read_text()).is_relative_to(root / "src" / ".megacpp-smoke-two.build")
    assert (root / "src" / ".megacpp-smoke-two.build").is_dir()  # the killed run's copy, until the next run
    done = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ), timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert Path(report["wheel"]).is_file() and Path(report["wheel"]).parent == root / "wheels"
    assert pristine(checkout) == []
    assert sorted(p.name for p in (root / "src").iterdir()) == [".megacpp-smoke-two.build.lock", "megacpp-smoke-two"]


def test_sigkill_in_pre_build_twice_then_a_planted_link_is_not_followed(slow_repo, target_python, tmp_path):
    """Siblings: killed in pre_build (which edits a tracked file), killed again, then the leftover copy
    replaced by a symlink to a directory of the user's: the next run unlinks it, never empties it."""
    plan = write_plan(tmp_path / "plan.json", slow_repo, pre_build=(PRE_BUILD_SLOW,))
    root = tmp_path / "w"
    argv = build_argv(plan, target_python, root)
    for i in range(2):
        marker = tmp_path / f"in-pre-build-{i}"
        kill_when(argv, marker, {**os.environ, "SLOW_PRE": str(marker)})
        assert pristine(root / "src" / "megacpp-smoke-two") == []
    area = root / "src" / ".megacpp-smoke-two.build"
    outside = tmp_path / "users-own"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine\n")
    subprocess.run(["rm", "-rf", "--", str(area)], check=True)
    area.symlink_to(outside)
    done = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ), timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (outside / "keep.txt").read_text() == "mine\n" and not area.exists() and not area.is_symlink()
    assert pristine(root / "src" / "megacpp-smoke-two") == []


def test_a_second_build_of_the_same_checkout_waits_its_turn(slow_repo, target_python, tmp_path):
    plan = write_plan(tmp_path / "plan.json", slow_repo)
    root, marker = tmp_path / "w", tmp_path / "in-wheel"
    argv = build_argv(plan, target_python, root)
    first = subprocess.Popen(argv, env={**os.environ, "SLOW_MARKER": str(marker)}, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        second = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ), timeout=300, check=False)
        assert second.returncode == 1
        assert "another build of" in second.stderr and "is running" in second.stderr
        assert (root / "src" / ".megacpp-smoke-two.build").is_dir()  # the live build's copy was not touched
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)


def fake_wheel(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_wheel_dir_keeps_the_users_own_wheels(tmp_path):
    wheels = tmp_path / "wheels"
    users = fake_wheel(wheels / "demo-0.9-py3-none-any.whl", "the user's own\n")
    other = fake_wheel(wheels / "other-1.0-py3-none-any.whl", "another dist\n")
    first = _keep_wheel(fake_wheel(tmp_path / "b1" / "demo-1.0-cp311-cp311-linux_x86_64.whl", "build 1\n"), wheels)
    second = _keep_wheel(fake_wheel(tmp_path / "b2" / "demo-1.1-cp311-cp311-linux_x86_64.whl", "build 2\n"), wheels)
    assert not first.exists() and second.read_text() == "build 2\n"  # ours replaced
    assert users.read_text() == "the user's own\n" and other.read_text() == "another dist\n"  # theirs kept
    assert json.loads((wheels / RECORD).read_text()) == {second.name: __import__("hashlib").sha256(b"build 2\n").hexdigest()}


def test_wheel_dir_refuses_to_overwrite_a_users_file_and_forgets_a_replaced_one(tmp_path):
    wheels = tmp_path / "wheels"
    name = "demo-1.0-cp311-cp311-linux_x86_64.whl"
    mine = fake_wheel(wheels / name, "the user's own build\n")
    with pytest.raises(RefusedError, match="was not written by megacpp-env"):
        _keep_wheel(fake_wheel(tmp_path / "b" / name, "new\n"), wheels)
    assert mine.read_text() == "the user's own build\n"
    mine.unlink()
    ours = _keep_wheel(fake_wheel(tmp_path / "b" / name, "ours\n"), wheels)
    ours.write_text("the user replaced it\n")  # same name, other content: no longer ours
    newer = _keep_wheel(fake_wheel(tmp_path / "c" / "demo-2.0-cp311-cp311-linux_x86_64.whl", "x\n"), wheels)
    assert ours.read_text() == "the user replaced it\n" and newer.is_file()  # theirs now: kept


def test_a_malformed_record_owns_nothing(tmp_path):
    wheels = tmp_path / "wheels"
    users = fake_wheel(wheels / "demo-0.1-py3-none-any.whl", "u\n")
    for i, bad in enumerate(("[1, 2]", "{", '{"../demo-0.1-py3-none-any.whl": "x", "demo-0.1-py3-none-any.whl": 3}')):
        (wheels / RECORD).write_text(bad)
        _keep_wheel(fake_wheel(tmp_path / "b" / f"demo-1.{i}-py3-none-any.whl", bad), wheels)
        assert users.read_text() == "u\n"
