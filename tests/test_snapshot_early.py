"""The snapshot's plan (``snapshot.plan``): the verb resolves and launches it before it imports the
collectors, so verification starts first (``verify.early``); the python collector takes that run;
a run nobody takes is stopped with every worker reaped; nothing is module-global. Real venvs, real
worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from megacpp_env.snapshot import plan as plan_mod
from megacpp_env.snapshot.options import SnapshotOptions

REPO = Path(__file__).resolve().parent.parent

# Runs the real CLI in a fresh interpreter and reports, at the moment verification starts, whether
# the collectors were imported yet, and whether the python collector then took that run.
WATCHED_CLI = textwrap.dedent(
    """
    import json, sys
    from megacpp_env.snapshot import plan
    from megacpp_env.snapshot.verify import early
    seen = {"started": 0}
    start, take = early.Run.start, plan.Launched.take_run
    def watched_start(self):
        seen.setdefault("collect_imported", "megacpp_env.snapshot.collect" in sys.modules)
        seen["started"] += 1
        return start(self)
    def watched_take(self):
        run = take(self)
        seen["taken"] = run is not None
        return run
    early.Run.start, plan.Launched.take_run = watched_start, watched_take
    from megacpp_env.cli import main
    code = main(sys.argv[1:])
    print(json.dumps({**seen, "code": code}))
    """
)


def _watched(tmp_path: Path, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    env.update(MEGACPP_ENV_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    done = subprocess.run(
        [sys.executable, "-c", WATCHED_CLI, "snapshot", "--spec", str(tmp_path / "none.yaml"), *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    return {**json.loads(done.stdout.splitlines()[-1]), "stderr": done.stderr}


def test_the_verb_starts_verifying_before_it_imports_the_collectors_and_the_collector_takes_it(tmp_path, snap_venv):
    out = tmp_path / "snap.json"
    seen = _watched(tmp_path, "--python", str(snap_venv.python), "-o", str(out), "--json")
    assert {k: v for k, v in seen.items() if k != "stderr"} == {
        "collect_imported": False, "started": 1, "taken": True, "code": 0,
    }, seen["stderr"]  # fmt: skip
    doc = json.loads(out.read_text())
    record = (snap_venv.site / "demo_pkg-1.0.dist-info" / "RECORD").read_text().splitlines()
    integrity = doc["facts"]["python"]["distributions"]["demo-pkg"]["integrity"]
    hashed = [row for row in record if row.split(",")[1]]  # the RECORD's own row has no hash
    assert (integrity["status"], integrity["files"]) == ("ok", len(hashed))  # every hashed row verified


def test_a_run_nobody_takes_is_stopped_with_every_worker_reaped(tmp_path, snap_venv):
    opts = SnapshotOptions(python=str(snap_venv.python), cache_dir=tmp_path / "c", environ={"PATH": os.environ["PATH"]})
    plan = plan_mod.resolve(opts)
    interval = sys.getswitchinterval()
    with plan_mod.launch(plan, nvml=True) as started:
        run, child = started.run, started.nvml
        assert run is not None
    assert not run.thread.is_alive()
    assert all(p.returncode is not None for programs in run._programs for p in programs.procs)
    assert child is None or child.returncode is not None  # the NVML child too
    assert sys.getswitchinterval() == interval  # as it was before the launch


def test_what_was_taken_is_taken_once(tmp_path, snap_venv):
    plan = plan_mod.resolve(SnapshotOptions(python=str(snap_venv.python), use_cache=False))
    with plan_mod.launch(plan, nvml=False) as started:
        assert started.take_run() is not None and started.take_run() is None
        assert started.take_nvml() is None


def test_no_run_starts_for_a_python_that_is_not_an_executable(tmp_path):
    seen = _watched(tmp_path, "--python", str(tmp_path / "no-python"))
    assert seen["started"] == 0 and seen["code"] == 1 and "not an executable" in seen["stderr"]


def test_the_cache_directory_rule_is_the_plans_alone(tmp_path, snap_venv):
    """--no-cache, an explicit directory, $MEGACPP_ENV_CACHE_DIR, $XDG_CACHE_HOME, ~/.cache: one rule,
    and a cache directory another user could write turns every cache off, with a note."""
    base = {"python": str(snap_venv.python)}
    assert plan_mod.resolve(SnapshotOptions(**base, use_cache=False, environ={})).cache is None
    env = {"MEGACPP_ENV_CACHE_DIR": str(tmp_path / "a"), "XDG_CACHE_HOME": str(tmp_path / "x"), "HOME": str(tmp_path)}
    assert plan_mod.resolve(SnapshotOptions(**base, environ=env)).cache.root == tmp_path / "a"
    env.pop("MEGACPP_ENV_CACHE_DIR")
    assert plan_mod.resolve(SnapshotOptions(**base, environ=env)).cache.root == tmp_path / "x" / "megacpp-env"
    env.pop("XDG_CACHE_HOME")
    assert plan_mod.resolve(SnapshotOptions(**base, environ=env)).cache.root == tmp_path / ".cache" / "megacpp-env"
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    found = plan_mod.resolve(SnapshotOptions(**base, cache_dir=shared, environ=env))
    assert found.cache is None and "writable" in found.notes[0]
