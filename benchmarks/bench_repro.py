"""Benchmark the golden guard on the test stack of issue 13: `run --golden`'s warm pre-check and
`reproduce`.

The stack (built once, in a temporary directory): a venv with real packages from the index
(requests, idna, urllib3, certifi, charset-normalizer, setuptools, pip), mamba at its pin with an
uncommitted patch and an untracked file, Megatron-LM at its pin as an `install: path` checkout, the
smoke C extension built locally (needs ../shared/sources and the network).

Times:
- `run_golden`: `python -m megacpp_env run --golden bench -- true`, whole command (interpreter start,
  golden load, pre-check snapshot with a warm cache, diff, run record, `true`), after one warm-up;
- `precheck`: the pre-check alone, in process (`repro.guard.precheck`), warm, per collector;
- `reproduce`: `python -m megacpp_env reproduce bench --venv NEW --checkouts NEW`, each round into
  fresh directories (uv's and pip's caches warm after the first round).

    python benchmarks/bench_repro.py [--rounds 10] [--reproduce-rounds 2] [--json-out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from megacpp_env.repro import goldens, guard  # noqa: E402
from tests.fixtures.git_repos import run_smoke_script  # noqa: E402
from tests.fixtures.repro import make_stack, shared_sources_dir  # noqa: E402


def _cli(*args: str, env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "megacpp_env", *args], env=env, capture_output=True, text=True,
                          check=False, cwd=ROOT)  # fmt: skip
    if proc.returncode:
        print(proc.stdout[-2000:], proc.stderr[-2000:], file=sys.stderr)
    return time.perf_counter() - start, proc.returncode


def _stats(samples: list[float]) -> dict[str, float]:
    return {"min": min(samples), "median": statistics.median(samples), "max": max(samples), "n": len(samples)}


def _stack(work: Path) -> Path:
    sources = shared_sources_dir()
    if sources is None:
        raise SystemExit("no shared/sources beside the repository (the pinned upstream bundles)")
    smoke = run_smoke_script(git_root=work / "smoke-git")
    if smoke.returncode:
        raise SystemExit(smoke.stderr)
    commit = smoke.stdout.strip().splitlines()[-1]
    stack = make_stack(work, sources, work / "smoke-git" / "megacpp-smoke-ext.git", commit)
    gold = work / "golden"
    env = _env(work)
    _secs, code = _cli("snapshot", "--python", str(stack.venv.python), "--paths", *stack.paths, "--golden", "bench",
                       "--golden-dir", str(gold), "--export-lock", str(work / "pylock.bench.toml"), env=env)  # fmt: skip
    assert code == 0
    return gold


def _env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    return {**env, "MEGACPP_ENV_CACHE_DIR": str(work / "cache")}


def _precheck(gold: Path, rounds: int) -> dict[str, object]:
    ref = goldens.resolve("bench", gold)
    opts = goldens.options_like(ref.snapshot, python=None, paths=None, spec=lambda: None)
    guard.precheck(ref, opts)  # warm
    checks = [guard.precheck(ref, opts) for _ in range(rounds)]
    assert not any(c.drift for c in checks), checks[0].report.findings
    per = {k: statistics.median(c.snapshot.timing[k] for c in checks) for k in checks[0].snapshot.timing if k != "integrity"}
    return {"seconds": _stats([c.seconds for c in checks]), "collectors_median": per}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--reproduce-rounds", type=int, default=2)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="megacpp-bench-repro-") as tmp:
        work = Path(tmp)
        os.environ.update(_env(work))
        gold = _stack(work)
        env = _env(work)
        run_cmd = ["run", "--golden", "bench", "--golden-dir", str(gold), "--record", str(work / "runs.jsonl"), "--", "true"]
        _cli(*run_cmd, env=env)  # warm-up
        runs = [_cli(*run_cmd, env=env) for _ in range(args.rounds)]
        assert all(code == 0 for _s, code in runs)
        precheck = _precheck(gold, args.rounds)
        repro = []
        for i in range(args.reproduce_rounds):
            out = work / f"again-{i}"
            secs, code = _cli("reproduce", "bench", "--golden-dir", str(gold), "--venv", str(out / "venv"),
                              "--checkouts", str(out / "src"), env=env)  # fmt: skip
            assert code == 0, "reproduce did not come back identical"
            repro.append(secs)
    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()},
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "run_golden": _stats([s for s, _c in runs]),
        "precheck": precheck,
        "reproduce": {**_stats(repro), "rounds": repro},
    }
    text = json.dumps(result, indent=2, sort_keys=True)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n")


if __name__ == "__main__":
    main()
