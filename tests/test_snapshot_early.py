"""``snapshot.early``: the snapshot verb starts verifying before it imports the collectors, the
python collector takes that run only when it verifies the same thing, and a run nobody takes is
stopped with every worker reaped. Real venvs, real worker processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from megacpp_env.snapshot.verify import early

REPO = Path(__file__).resolve().parent.parent

# Runs the real CLI in a fresh interpreter and reports, at the moment verification starts, whether
# the collectors were imported yet, and whether the python collector then took that run.
WATCHED_CLI = textwrap.dedent(
    """
    import json, sys
    from megacpp_env.snapshot.verify import early
    seen = {}
    start, take = early.start, early.take
    def watched_start(*args, **kwargs):
        seen["collect_imported"] = "megacpp_env.snapshot.collect" in sys.modules
        start(*args, **kwargs)
        seen["started"] = len(early._runs)
    def watched_take(key):
        run = take(key)
        seen["taken"] = run is not None
        return run
    early.start, early.take = watched_start, watched_take
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
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_verb_starts_verifying_before_it_imports_the_collectors_and_the_collector_takes_it(tmp_path, snap_venv):
    out = tmp_path / "snap.json"
    seen = _watched(tmp_path, "--python", str(snap_venv.python), "-o", str(out), "--json")
    assert seen == {"collect_imported": False, "started": 1, "taken": True, "code": 0}
    doc = json.loads(out.read_text())
    record = (snap_venv.site / "demo_pkg-1.0.dist-info" / "RECORD").read_text().splitlines()
    integrity = doc["facts"]["python"]["distributions"]["demo-pkg"]["integrity"]
    hashed = [row for row in record if row.split(",")[1]]  # the RECORD's own row has no hash
    assert (integrity["status"], integrity["files"]) == ("ok", len(hashed))  # every hashed row verified


def test_an_early_run_for_another_interpreter_is_stopped_and_not_taken(tmp_path, snap_venv):
    """Started for one interpreter, asked for by a collector of another: the collector gets
    nothing (it verifies its own), the run's workers are killed and reaped, its thread ends."""
    from megacpp_env.snapshot.verify.integrity import Verified

    early.start(str(snap_venv.python), use_cache=False, environ={"PATH": os.environ["PATH"]})
    (run,) = early._runs
    other = early.Key(python=sys.executable, cache_dir=None, workers=run.key.workers)
    try:
        assert early.take(other) is None
    finally:
        early.discard()
    assert not early._runs and not run.thread.is_alive()
    assert all(p.returncode is not None for programs in run._programs for p in programs.procs)
    try:  # stopped before or after it finished: either an error or a whole result, never a partial one
        result = run.result()
    except Exception:
        return
    assert isinstance(result, Verified) and result.reports


def test_a_run_nobody_takes_is_stopped_with_every_worker_reaped(tmp_path, snap_venv):
    early.start(str(snap_venv.python), use_cache=True, environ={"MEGACPP_ENV_CACHE_DIR": str(tmp_path / "c")})
    (run,) = early._runs
    interval = early._intervals[0]
    early.discard()
    assert not run.thread.is_alive() and run._programs
    assert all(p.returncode is not None for programs in run._programs for p in programs.procs)
    assert sys.getswitchinterval() == interval  # as it was before the run


def test_no_run_starts_for_a_python_that_is_not_an_executable(tmp_path):
    early.start(str(tmp_path / "no-python"), use_cache=False)
    assert not early._runs and not early._intervals
