"""Round-3 adversarial cases for source builds (issue 19 items 8 and 10): SIGKILLs of `build-source`
in its wheel and pre-build steps and at random moments, then a re-run; planted files and links where
the out-of-tree build copy goes; a concurrent build; `--jobs` out of range; `--wheel-dir` holding the
user's own wheels. A real tiny C extension repository, real `pip wheel` builds, all under ``tmp``.

    python -m benchmarks.adversarial_r3.srcbuild      prints the counts as JSON

Bad counts (must be 0): tracebacks, hangs, escapes (a write or removal outside the build's own
places), false_oks (exit 0 where a refusal is due), partials (a killed build left the checkout
changed, or a finished one left its build copy), wedges (the next run after a kill failed).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 240.0  # per command: longer is a hang
KEYS = ("commands", "tracebacks", "hangs", "leaked", "planted", "escapes", "false_oks", "partials", "wedges")
IDENTITY = {
    "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.invalid", "GIT_COMMITTER_NAME": "a",
    "GIT_COMMITTER_EMAIL": "a@example.invalid", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}  # fmt: skip
SETUP = (
    "import os, pathlib, time\n"
    "from setuptools import Extension, setup\n\n"
    "marker = os.environ.get('SLOW_MARKER')\n"
    "if marker:\n"
    "    pathlib.Path('build/temp.slow').mkdir(parents=True, exist_ok=True)\n"
    "    pathlib.Path('adv_ext.egg-info').mkdir(exist_ok=True)\n"
    "    pathlib.Path(marker).write_text(os.getcwd())\n"
    "    time.sleep(600)\n"
    "setup(ext_modules=[Extension('adv_ext._core', ['adv_ext/_core.c'])])\n"
)
FILES = {
    "pyproject.toml": (
        '[build-system]\nrequires = ["setuptools>=70.1"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "adv-ext"\nversion = "0.1.0"\n\n[tool.setuptools]\npackages = ["adv_ext"]\n'
    ),
    "setup.py": SETUP,
    "adv_ext/__init__.py": "from adv_ext._core import one\n",
    "adv_ext/_core.c": (
        "#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n"
        "static PyObject *one(PyObject *s, PyObject *a) { return PyLong_FromLong(1); }\n"
        'static PyMethodDef m[] = {{"one", one, METH_NOARGS, "1"}, {NULL, NULL, 0, NULL}};\n'
        'static struct PyModuleDef d = {PyModuleDef_HEAD_INIT, "_core", NULL, -1, m};\n'
        "PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&d); }\n"
    ),
}
PRE_SLOW = 'if [ -n "$SLOW_PRE" ]; then echo edited >> pyproject.toml; touch "$SLOW_PRE"; sleep 600; fi'


class Run:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.counts = dict.fromkeys(KEYS, 0)
        self.repo_url, self.commit = _repo(tmp / "upstream")
        self.python = _venv(tmp / "venv")

    # ---- running the tool -----------------------------------------------------------------------
    def plan(self, name: str, *, pre_build: tuple[str, ...] = ()) -> Path:
        from megacpp_env.srcbuild.plan import SourcePlan

        path = self.tmp / f"{name}.plan.json"
        plan = SourcePlan(target="adv", name="adv_ext", dist="adv-ext", repo=self.repo_url, commit=self.commit,
                          pre_build=pre_build)  # fmt: skip
        path.write_text(plan.dumps())
        return path

    def argv(self, plan: Path, root: Path, *extra: str) -> list[str]:
        return [sys.executable, "-m", "megacpp_env.srcbuild", "build", "--plan", str(plan), "--venv",
                str(self.python), "--workdir", str(root / "src" / "adv-ext"), "--wheel-dir", str(root / "wheels"),
                "--json", *extra]  # fmt: skip

    def call(self, argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
        self.counts["commands"] += 1
        try:
            done = subprocess.run(argv, capture_output=True, text=True, env=env or _env(), timeout=TIMEOUT,
                                  check=False, cwd=self.tmp)  # fmt: skip
        except subprocess.TimeoutExpired:
            self.counts["hangs"] += 1
            return 124, "", ""
        # the tool's own traceback (a build's output is quoted as "  | ..." lines in a step error)
        if any(line.startswith("Traceback (most recent call last)") for line in done.stderr.splitlines()):
            self.counts["tracebacks"] += 1
        return done.returncode, done.stdout, done.stderr

    def killed(self, argv: list[str], env: dict[str, str], marker: Path | None, delay: float = 0.0) -> None:
        """Start, then SIGKILL the whole process group once ``marker`` appears (or after ``delay``)."""
        self.counts["commands"] += 1
        proc = subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=self.tmp)  # fmt: skip
        deadline = time.monotonic() + (delay if marker is None else TIMEOUT)
        try:
            while time.monotonic() < deadline and proc.poll() is None:
                if marker is not None and marker.exists():
                    break
                time.sleep(0.05)
            else:
                if marker is not None and proc.poll() is None:
                    self.counts["hangs"] += 1
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)

    # ---- judging --------------------------------------------------------------------------------
    def dirty(self, root: Path) -> bool:
        checkout = root / "src" / "adv-ext"
        if not (checkout / ".git").exists():
            return False  # killed before the checkout existed: nothing to dirty
        out = subprocess.run(["git", "-C", str(checkout), "status", "--porcelain", "--ignored",
                              "--untracked-files=all"], capture_output=True, text=True, check=False).stdout  # fmt: skip
        return any(line != "!! .megacpp-checkout.json" for line in out.splitlines())

    def rerun_ok(self, plan: Path, root: Path) -> None:
        """The run after a kill must build, and leave the checkout pristine and no build copy behind."""
        rc, out, _err = self.call(self.argv(plan, root))
        try:
            wheel = Path(json.loads(out).get("wheel", "/nonexistent")) if rc == 0 else None
        except (ValueError, AttributeError):
            wheel = None
        if wheel is None or not wheel.is_file():
            self.counts["wedges"] += 1
            return
        leftovers = [p.name for p in (root / "src").iterdir() if p.name.endswith(".build")]
        if self.dirty(root) or leftovers:
            self.counts["partials"] += 1


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def _git(args: list[str], cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          env={**os.environ, **IDENTITY})  # fmt: skip
    return done.stdout.strip()


def _repo(base: Path) -> tuple[str, str]:
    work, bare = base / "work", base / "adv-ext.git"
    for rel, text in FILES.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    _git(["init", "-q", "-b", "main", "."], work)
    _git(["add", "-A"], work)
    _git(["commit", "-q", "-m", "adv"], work)
    _git(["clone", "-q", "--bare", str(work), str(bare)], base)
    return bare.as_uri(), _git(["rev-parse", "HEAD"], work)


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, capture_output=True)
    python = path / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    (Path(purelib) / "zz-borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


# ---- the cases ----------------------------------------------------------------------------------


def kills(r: Run) -> None:
    """SIGKILL in the wheel step, in pre_build (which edits a tracked file), and at random moments."""
    plain, pre = r.plan("plain"), r.plan("pre", pre_build=(PRE_SLOW,))
    for i, (plan, var) in enumerate([(plain, "SLOW_MARKER"), (pre, "SLOW_PRE"), (plain, "SLOW_MARKER")]):
        root, marker = r.tmp / f"kill-{i}", r.tmp / f"kill-{i}.marker"
        if i == 2:  # sibling: two kills in a row before the re-run
            r.killed(r.argv(plan, root), _env(**{var: str(r.tmp / "kill-2a.marker")}), r.tmp / "kill-2a.marker")
        r.killed(r.argv(plan, root), _env(**{var: str(marker)}), marker)
        r.counts["partials"] += r.dirty(root)
        r.rerun_ok(plan, root)
    rng = random.Random(19)
    for i in range(3):  # at a random moment: checkout, copy, compile or install
        root = r.tmp / f"random-{i}"
        r.killed(r.argv(plain, root), _env(), None, delay=rng.uniform(0.3, 4.0))
        r.counts["partials"] += r.dirty(root)
        r.rerun_ok(plain, root)


def planted(r: Run) -> None:
    """A link to the user's directory, and a plain file, where the build copy goes."""
    plan = r.plan("planted")
    for kind in ("link", "file", "dir-with-link"):
        root = r.tmp / f"planted-{kind}"
        outside = r.tmp / f"users-{kind}"
        outside.mkdir()
        (outside / "keep.txt").write_text("mine\n")
        area = root / "src" / ".adv-ext.build"
        area.parent.mkdir(parents=True)
        if kind == "link":
            area.symlink_to(outside)
        elif kind == "file":
            area.write_text("not a directory\n")
        else:
            area.mkdir()
            (area / "escape").symlink_to(outside)
        r.rerun_ok(plan, root)
        kept = (outside / "keep.txt").is_file() and (outside / "keep.txt").read_bytes() == b"mine\n"
        if not kept or not outside.is_dir() or sorted(p.name for p in outside.iterdir()) != ["keep.txt"]:
            r.counts["escapes"] += 1


def concurrent(r: Run) -> None:
    """A second build of the same checkout while one runs: refused, and the live build's copy untouched."""
    plan, root, marker = r.plan("busy"), r.tmp / "busy", r.tmp / "busy.marker"
    r.counts["commands"] += 1
    first = subprocess.Popen(r.argv(plan, root), env=_env(SLOW_MARKER=str(marker)), start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=r.tmp)  # fmt: skip
    try:
        deadline = time.monotonic() + TIMEOUT
        while not marker.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        rc, _out, _err = r.call(r.argv(plan, root))
        r.counts["false_oks"] += rc == 0
        if not Path(marker.read_text() if marker.exists() else "/nonexistent").is_dir():
            r.counts["escapes"] += 1  # the running build's copy was removed under it
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    r.rerun_ok(plan, root)


def usage(r: Run) -> None:
    """`--jobs` out of range is a usage error (exit 2), never exported."""
    plan, root = r.plan("usage"), r.tmp / "usage"
    for value in ("-3", "0", "-0", "abc", "1e9", "99999", "4x", "", "+2", "٣"):
        rc, _out, _err = r.call(r.argv(plan, root, f"--jobs={value}"))
        r.counts["false_oks"] += rc != 2
    base = [sys.executable, "-m", "megacpp_env", "build-source", "causal_conv1d", "--target", "cloud",
            "--dry-run", "--spec", str(ROOT / "stack.yaml")]  # fmt: skip
    for value in ("-3", "0"):
        rc, _out, _err = r.call([*base, f"--jobs={value}"])
        r.counts["false_oks"] += rc != 2


def wheel_dir(r: Run) -> None:
    """The user's own wheels in --wheel-dir: other versions stay; one with the new wheel's name is refused."""
    plan, root = r.plan("wheels"), r.tmp / "wheels-case"
    wheels = root / "wheels"
    wheels.mkdir(parents=True)
    own = {"adv_ext-0.0.1-py3-none-any.whl": "u1\n", "adv_ext-9.9-cp311-cp311-linux_x86_64.whl": "u2\n"}
    for name, text in own.items():
        (wheels / name).write_text(text)
    for _ in range(2):  # twice: the second replaces the tool's first wheel only
        rc, out, _err = r.call(r.argv(plan, root))
        if rc != 0:
            r.counts["wedges"] += 1
            return
    made = Path(json.loads(out)["wheel"])
    if any(not (wheels / n).is_file() or (wheels / n).read_bytes() != t.encode() for n, t in own.items()):
        r.counts["escapes"] += 1
    made.unlink()
    made.write_text("the user's build with the same name\n")
    (wheels / ".megacpp-wheels.json").write_text("{}")
    rc, _out, _err = r.call(r.argv(plan, root))
    r.counts["false_oks"] += rc == 0
    if made.read_bytes() != b"the user's build with the same name\n":
        r.counts["escapes"] += 1


def run(tmp: Path) -> dict[str, int]:
    sys.path.insert(0, str(ROOT))
    r = Run(tmp)
    for case in (kills, planted, concurrent, usage, wheel_dir):
        case(r)
    return r.counts


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="adv-srcbuild-") as scratch:
        print(json.dumps(run(Path(scratch)), sort_keys=True))
