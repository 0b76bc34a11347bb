"""The story of issue 13 on real pieces: a golden run, drift, a refused benchmark, the environment
rebuilt elsewhere and proved identical, and a bisect that a drifted environment cannot mislead.

The golden environment: a venv with real packages from the index (requests and its dependencies,
setuptools; pip from ensurepip); mamba at its pin from ../shared/sources/mamba.bundle with the fp32
upcast of ``dd_dt + self.dt_bias`` before softplus as an uncommitted patch, an untracked note and an
ignored file; Megatron-LM at its pin (the bare shallow megatron.git.tar) as an ``install: path``
checkout (a ``.pth`` in site-packages); the smoke C extension built locally from its checkout.
The tests run in order and share that environment (module fixture ``story``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.pylock import Pylock

from megacpp_env.cli import main
from megacpp_env.repro.document import load_capture
from megacpp_env.repro.objects import ObjectStore
from megacpp_env.repro.runrecord import read
from tests.fixtures.repro import MAMBA3, MAMBA_PIN, MEGATRON_PIN, UPCAST, make_stack, training_repo
from tests.fixtures.snapshot import make_wheel

pytestmark = pytest.mark.network

# megatron.core imports torch; where it would import from is enough here
FIND_MEGATRON = "import importlib.util, sys; origin = importlib.util.find_spec('megatron.core').origin"


class Story:
    """What the tests share, filled in as the story goes."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.gold = root / "golden"
        self.state: dict[str, object] = {}

    def cli(self, *args: str) -> int:
        return main([*args])


@pytest.fixture(scope="module")
def story(tmp_path_factory, pinned_sources, smoke_source):
    root = tmp_path_factory.mktemp("story")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEGACPP_ENV_CACHE_DIR", str(root / "cache"))
        mp.delenv("VIRTUAL_ENV", raising=False)
        s = Story(root)
        stack = make_stack(root, pinned_sources, smoke_source.git_root / "megacpp-smoke-ext.git", smoke_source.commit)
        s.venv, s.mamba, s.megatron, s.smoke = stack.venv, stack.mamba, stack.megatron, stack.smoke
        s.lock = root / "pylock.bench.toml"
        args = ["--python", str(s.venv.python), "--paths", *stack.paths]
        assert main(["snapshot", *args, "--golden", "bench", "--golden-dir", str(s.gold), "--export-lock", str(s.lock)]) == 0
        yield s


def test_the_golden_keeps_what_a_snapshot_cannot_recreate(story):
    cap = load_capture(story.gold / "bench.capture.json")
    store = ObjectStore.beside(story.gold)
    mamba = cap.checkouts[str(story.mamba)]
    assert mamba.head == MAMBA_PIN
    assert b"+        DT = F.softplus((dd_dt + self.dt_bias).float())" in store.get(mamba.diff)
    assert [f.path for f in mamba.untracked] == ["NOTES.md"]  # the ignored .pyc is not there
    assert all(b"ignored by .gitignore" not in p.read_bytes() for p in (story.gold / "objects" / "sha256").iterdir())
    assert cap.checkouts[str(story.megatron)].head == MEGATRON_PIN
    assert [(e.file, e.lines) for e in cap.path_entries] == [("megacpp-src-megatron_core.pth", ("{checkout:Megatron-LM}",))]
    smoke = cap.distributions["megacpp-smoke-ext"]
    assert (smoke.origin, smoke.build.checkout, smoke.build.source) == ("local-build", "smoke", "record")
    assert smoke.build.build_env["MEGACPP_SMOKE_EXT_FORCE_BUILD"] == "TRUE"
    idna = cap.distributions["idna"]
    assert (idna.origin, idna.installer, idna.requested) == ("index", "pip", True)
    assert idna.artifacts and idna.artifacts[0].filename == "idna-3.10-py3-none-any.whl"
    lock = Pylock.from_dict(__import__("tomllib").loads(story.lock.read_text()))
    assert {p.name for p in lock.packages} >= {"requests", "idna", "urllib3", "pip", "megacpp-smoke-ext"}


def test_run_golden_runs_cmd_on_the_golden_environment(story, capsys):
    record = story.root / "runs.jsonl"
    base = ["run", "--golden", "bench", "--golden-dir", str(story.gold), "--record", str(record)]
    code = story.cli(*base, "--", str(story.venv.python), "-c", FIND_MEGATRON + "; sys.exit(7 if origin else 1)")
    assert code == 7  # CMD's exit code
    assert "environment is golden bench" in capsys.readouterr().err
    (line,) = _read(record)
    assert (line["ran"], line["exit_code"], line["drift"]) == (True, 7, False)
    assert line["snapshot_digest"] == json.loads((story.gold / "bench.json").read_text())["digest"]
    assert line["cmd"][-1].startswith(FIND_MEGATRON) and line["wall_s"] > 0


@pytest.mark.parametrize(
    ("drift", "finding"),
    [
        ("version bump", "idna 3.10 -> 3.11"),
        ("patch edit", "local changes differ"),
        ("megatron without .git", "Megatron-LM: checkout has no .git"),
    ],
)
def test_run_golden_refuses_each_drift(story, capsys, drift, finding):
    if drift == "version bump":
        story.venv.pip("install", "--quiet", "--no-deps", "idna==3.11")
    elif drift == "patch edit":
        path = story.mamba / MAMBA3
        path.write_text(path.read_text().replace(".float())", ".to(torch.float32))"))
    else:
        shutil.copytree(story.megatron, story.root / "meg-copy", ignore=shutil.ignore_patterns(".git"))
        shutil.move(story.megatron, story.root / "meg-with-git")
        shutil.move(story.root / "meg-copy", story.megatron)
    record = story.root / f"runs-{drift.replace(' ', '-')}.jsonl"
    base = ["run", "--golden", "bench", "--golden-dir", str(story.gold), "--record", str(record)]
    assert story.cli(*base, "--", sys.executable, "-c", "print('benchmark')") == 1
    err = capsys.readouterr().err
    assert finding in err and "refused" in err
    (line,) = _read(record)
    assert (line["ran"], line["exit_code"], line["drift"]) == (False, None, True)
    assert any(finding in f for f in line["drift_summary"]["findings"])
    assert story.cli(*base, "--allow-drift", "--", sys.executable, "-c", "raise SystemExit(0)") == 0
    assert "WARNING: running on an environment that drifted" in capsys.readouterr().err
    assert _read(record)[-1]["allowed_drift"] is True


def test_reproduce_after_drift_comes_back_identical(story, capsys):
    out = story.root / "again"
    code = story.cli("reproduce", "bench", "--golden-dir", str(story.gold), "--venv", str(out / "venv"),
                     "--checkouts", str(out / "src"), "--json")  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert (code, report["identical"], report["unrecreated"]) == (0, True, []), report["diff"]["findings"]
    assert report["golden_portable_digest"] == report["reproduced_portable_digest"]
    assert report["installed"]["megacpp-smoke-ext"] == "rebuilt"
    assert report["installed"]["idna"] == "index"
    assert UPCAST in (out / "src" / "mamba" / MAMBA3).read_text()
    assert (out / "src" / "mamba" / "NOTES.md").read_text().startswith("golden run")
    assert (out / "src" / "Megatron-LM" / ".git").is_dir()
    where = subprocess.run([str(out / "venv" / "bin" / "python"), "-c", FIND_MEGATRON + "; print(origin)"],
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert where.startswith(str(out / "src" / "Megatron-LM"))
    records = json.loads((out / "venv" / "megacpp-env" / "builds" / "megacpp-smoke-ext.json").read_text())
    assert records["checkout"] == str(out / "src" / "smoke")
    story.state["again"] = out


def test_bisect_check_guards_a_real_git_bisect(story, capsys, tmp_path):
    again = story.state["again"]
    python = again / "venv" / "bin" / "python"
    (tmp_path / "wheels").mkdir()
    stale = make_wheel(tmp_path / "wheels", "cppmega", "0.0.1", {"cppmega/__init__.py": "def step():\n    return 1.0\n"})
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", str(stale)], check=True)
    checkouts = [str(again / "src" / n) for n in ("mamba", "Megatron-LM", "smoke")]
    assert story.cli("snapshot", "--python", str(python), "--paths", *checkouts, "--golden", "bisect-env",
                     "--golden-dir", str(story.gold)) == 0  # fmt: skip
    repo = training_repo(tmp_path / "training")
    check = ["bisect-check", "bisect-env", "--golden-dir", str(story.gold), "--worktree", str(repo.path)]
    _checkout(repo.path, repo.commits["good"])
    assert story.cli(*check) == 0
    _checkout(repo.path, repo.commits["src-layout"])
    assert story.cli(*check) == 125
    assert "imports from" in capsys.readouterr().err
    run = f"{sys.executable} -m megacpp_env bisect-check bisect-env --golden-dir {story.gold} && {python} check.py"
    assert _bisect(repo, run) == repo.commits["breaks"]
    assert _bisect(repo, f"{python} check.py") == repo.commits["later"]  # without the pre-check: misled
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "idna==3.11"], check=True)
    _checkout(repo.path, repo.commits["good"])
    assert story.cli(*check) == 125  # the environment drifted: skip, never "bad"


def _checkout(repo: Path, sha: str) -> None:
    subprocess.run(["git", "-C", str(repo), "checkout", "--quiet", "--detach", sha], check=True)


def _bisect(repo, command: str) -> str:
    """``git bisect run`` between the good and the tip commit; the first bad commit it names."""
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x"}  # fmt: skip
    git = ["git", "-C", str(repo.path)]
    subprocess.run([*git, "bisect", "reset", "--quiet"], env=env, check=False, capture_output=True)
    subprocess.run([*git, "bisect", "start", repo.commits["tip"], repo.commits["good"]], env=env, check=True,
                   capture_output=True)  # fmt: skip
    proc = subprocess.run([*git, "bisect", "run", "sh", "-c", command], env=env, capture_output=True, text=True,
                          check=False)  # fmt: skip
    subprocess.run([*git, "bisect", "reset", "--quiet"], env=env, check=False, capture_output=True)
    found = [line.split()[0] for line in proc.stdout.splitlines() if line.endswith("is the first bad commit")]
    assert found, proc.stdout + proc.stderr
    return found[0]


def _read(path) -> list[dict]:
    return [r.to_dict() for r in read(path)]
