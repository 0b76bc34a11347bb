"""Run the registered collectors (``snapshot.registry``) and assemble a ``Snapshot``.

The plan (``snapshot.plan``) is resolved and launched first, unless the verb did it already; the
probe of the inspected interpreter runs next (every other collector needs its site directories);
then each collector runs in its own daemon thread with its own deadline. One that fails or runs
past its deadline leaves ``{"error": why}`` in its area and never stops the others (the verb then
exits non-zero: ``document.errors``). What the caches discarded goes to ``live.cache``.
"""

from __future__ import annotations

import datetime as dt
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env import __version__
from megacpp_env.errors import MegacppEnvError
from megacpp_env.snapshot import registry
from megacpp_env.snapshot.collectors import python_env, system, torch_facts
from megacpp_env.snapshot.context import Context
from megacpp_env.snapshot.document import Snapshot
from megacpp_env.snapshot.options import SnapshotOptions, usable_cpus
from megacpp_env.snapshot.parts import Parts
from megacpp_env.snapshot.plan import Launched, SnapshotPlan, launch, resolve
from megacpp_env.snapshot.scrub import Scrubber
from megacpp_env.snapshot.tasks import Task
from megacpp_env.snapshot.verify import probe_cache

if TYPE_CHECKING:
    from megacpp_env.spec.model import Spec

__all__ = ["SnapshotOptions", "take_snapshot", "usable_cpus"]

LAUNCH_WAIT = 1.0
PROGRESS_TICK = 0.1


class _Bounded:
    """One collector in a daemon thread: ``result`` or ``error``, and how long it took."""

    def __init__(self, name: str, fn: Callable[[], Any]) -> None:
        self.name, self.fn = name, fn
        self.result: Any = None
        self.error = ""
        self.seconds = 0.0
        self.thread = threading.Thread(target=self._run, name=f"snapshot-{name}", daemon=True)

    def _run(self) -> None:
        start = time.perf_counter()
        try:
            self.result = self.fn()
        except MegacppEnvError as exc:
            self.error = str(exc)
        except Exception as exc:  # a collector never aborts the snapshot; the reason is recorded
            self.error = f"{type(exc).__name__}: {exc}"
        self.seconds = round(time.perf_counter() - start, 3)


def _run_all(
    jobs: dict[str, Callable[[], Any]],
    timeouts: Mapping[str, float],
    on_progress: Callable[[tuple[str, ...], float], None] | None = None,
) -> dict[str, _Bounded]:
    runs = {name: _Bounded(name, fn) for name, fn in jobs.items()}
    start = time.monotonic()
    for run in runs.values():
        run.thread.start()
    if on_progress is not None:
        _report_while_running(runs, start, timeouts, on_progress)
    for name, run in runs.items():
        run.thread.join(max(0.0, start + timeouts[name] - time.monotonic()))
        if run.thread.is_alive():
            run.error = f"timed out after {timeouts[name]:g}s"
            run.seconds = timeouts[name]
    return runs


def _report_while_running(
    runs: dict[str, _Bounded],
    start: float,
    timeouts: Mapping[str, float],
    on_progress: Callable[[tuple[str, ...], float], None],
) -> None:
    """Tell ``on_progress`` which collectors are still running, every PROGRESS_TICK seconds."""
    while True:
        now = time.monotonic()
        pending = [n for n, r in runs.items() if r.thread.is_alive() and now < start + timeouts[n]]
        if not pending:
            return
        on_progress(tuple(pending), now - start)
        runs[pending[0]].thread.join(PROGRESS_TICK)


def _jobs(ctx: Context) -> dict[str, Callable[[], Any]]:
    """Every collector starts at once, in its own thread, which imports its module; those that need
    the probe wait for it there. Those marked ``after_launch`` wait (at most ``LAUNCH_WAIT``) until
    the integrity workers have their work: the planning before that is GIL-bound and on the
    critical path, and their imports and Python work would share the GIL with it."""

    def later(fn: Callable[[], Any]) -> Callable[[], Any]:
        return lambda: (ctx.verifying.wait(LAUNCH_WAIT), fn())[1]

    jobs = {}
    for c in registry.collectors():
        job = c.start(ctx)
        jobs[c.area] = later(job) if c.after_launch else job
    return jobs


def _once(opts: SnapshotOptions) -> Callable[[], Spec | None]:
    """The spec, loaded at most once and only when first asked for (off the critical path)."""
    box: list[Spec | None] = []
    lock = threading.Lock()

    def get() -> Spec | None:
        with lock:
            if not box:
                box.append(opts.spec if opts.spec is not None or opts.load_spec is None else opts.load_spec())
            return box[0]

    return get


def take_snapshot(
    opts: SnapshotOptions, *, plan: SnapshotPlan | None = None, started: Launched | None = None
) -> Snapshot:
    """Collect every area, with ``plan`` and what it ``started`` (``plan.launch``), or a plan of
    ``opts`` launched here. The GIL switch interval is lowered meanwhile (``launch``): the threads
    mostly wait on I/O and subprocesses, and with the default 5 ms one that has waited can stall
    behind another thread's Python work (an import, YAML parsing) for the whole interval after
    every read."""
    plan = plan if plan is not None else resolve(opts)
    if started is not None:
        return _take(plan, started)
    with launch(plan) as launched:
        return _take(plan, launched)


def _context(plan: SnapshotPlan, started: Launched) -> Context:
    return Context(
        plan=plan,
        started=started,
        scrubber=Scrubber(plan.environ),
        probe=Task(probe_cache.run_probe, plan.python, plan.environ, plan.cache, name="snapshot-probe"),
        spec=_once(plan.opts),
    )


def _take(plan: SnapshotPlan, started: Launched) -> Snapshot:
    begun = time.perf_counter()
    opts = plan.opts
    ctx = _context(plan, started)
    timeouts = {**{c.area: c.timeout for c in registry.collectors()}, **opts.timeouts}
    runs = _run_all(_jobs(ctx), timeouts, opts.on_progress)
    facts: dict[str, Any] = {}
    live: dict[str, Any] = {}
    timing: dict[str, Any] = {}
    for name, run in runs.items():
        timing[name] = run.seconds
        _place(name, {"error": run.error} if run.error else run.result, facts, live)
    notes = _python_result(facts, timing)
    notes = [*plan.notes, *ctx.probe_notes(), *notes, *ctx.notes]
    if notes:
        live["cache"] = {"notes": sorted(set(notes))}
    facts = ctx.scrubber.clean_tree(dict(sorted(facts.items())))
    live = ctx.scrubber.clean_tree(dict(sorted(live.items())))
    timing["total"] = round(time.perf_counter() - begun, 3)
    return Snapshot(facts=facts, live=live, host=_host(ctx), timing=timing)


def _place(area: str, result: Any, facts: dict[str, Any], live: dict[str, Any]) -> None:
    """A hashed area's result under ``facts``, an unhashed one's under ``live``; ``Parts`` split."""
    if isinstance(result, Parts):
        facts[area], live[area] = result.facts, result.live
    elif registry.hashed(area):
        facts[area] = result
    else:
        live[area] = result


def _python_result(facts: dict[str, Any], timing: dict[str, Any]) -> list[str]:
    """The python collector returns its facts with timings, cache notes and a file -> distribution
    map, which attributes torch's loaded libraries to the distributions that installed them."""
    result = facts.get("python")
    if not isinstance(result, python_env.PythonResult):
        return []
    facts["python"] = result.facts
    timing["integrity"] = result.stats
    timing["probe"] = result.probe_seconds
    if isinstance(facts.get("torch"), dict):
        torch_facts.attach_libraries(facts["torch"], result.owner_of, result.facts["distributions"])
    return list(result.notes)


def _cwd() -> str | None:
    try:
        return str(Path.cwd())
    except OSError:  # removed while we ran
        return None


def _host(ctx: Context) -> dict[str, Any]:
    spec = ctx.spec()
    host: dict[str, Any] = {
        **system.host_facts(),
        "tool": f"megacpp-env {__version__}",
        "tool_python": sys.executable,
        "inspected_python": ctx.python,
        "inspected_python_reason": ctx.python_reason,
        "command": ctx.opts.command,
        "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "spec": str(spec.path) if spec else None,
        "spec_digest": spec.digest() if spec else None,
        "paths": [str(p) for p in ctx.opts.paths],  # as spelled; the facts key checkouts by real path
        "cwd": _cwd(),
    }
    cleaned: dict[str, Any] = ctx.scrubber.clean_tree(host)
    return cleaned
