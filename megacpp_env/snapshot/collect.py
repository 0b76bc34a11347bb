"""Run the collectors and assemble a ``Snapshot``.

The probe of the inspected interpreter runs first (every other collector needs its site
directories); then each collector runs in its own daemon thread with its own deadline. One that
fails or runs past its deadline leaves ``{"error": why}`` in its area and never stops the others.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from megacpp_env import __version__
from megacpp_env.errors import MegacppEnvError
from megacpp_env.snapshot import (
    checkouts,
    compilers,
    envvars,
    gpu,
    python_env,
    runtime,
    system,
    torch_facts,
)
from megacpp_env.snapshot.document import Snapshot

if TYPE_CHECKING:
    from megacpp_env.spec.model import Spec

T = TypeVar("T")
LAUNCH_WAIT = 1.0
SWITCH_INTERVAL = 0.0005
TIMEOUTS = {
    "system": 10.0,
    "compilers": 30.0,
    "gpu": 30.0,
    "python": 900.0,
    "torch": 240.0,
    "checkouts": 120.0,
    "env": 10.0,
    "runtime": 10.0,
}


def default_cache_dir(environ: Mapping[str, str]) -> Path:
    if environ.get("MEGACPP_ENV_CACHE_DIR"):
        return Path(environ["MEGACPP_ENV_CACHE_DIR"])
    base = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", "~")).expanduser() / ".cache")
    return Path(base) / "megacpp-env"


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotOptions:
    python: str | None = None
    paths: tuple[Path, ...] = ()
    spec: Spec | None = None
    load_spec: Callable[[], Spec | None] | None = None  # used when spec is None; called off the critical path
    import_torch: bool = False
    cache_dir: Path | None = None
    use_cache: bool = True
    workers: int = 0
    environ: Mapping[str, str] | None = None
    command: str = ""
    timeouts: Mapping[str, float] = field(default_factory=dict)


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


def _run_all(jobs: dict[str, Callable[[], Any]], timeouts: Mapping[str, float]) -> dict[str, _Bounded]:
    runs = {name: _Bounded(name, fn) for name, fn in jobs.items()}
    start = time.monotonic()
    for run in runs.values():
        run.thread.start()
    for name, run in runs.items():
        run.thread.join(max(0.0, start + timeouts[name] - time.monotonic()))
        if run.thread.is_alive():
            run.error = f"timed out after {timeouts[name]:g}s"
            run.seconds = timeouts[name]
    return runs


def _python_job(
    python: str,
    probe: Future[python_env.Probe],
    scrubber: envvars.Scrubber,
    opts: SnapshotOptions,
    environ: Mapping[str, str],
    launched: threading.Event,
) -> Callable[[], python_env.PythonResult]:
    """Verification starts at once on the venv's own site-packages (``speculate``), while the
    probe runs; the collector then checks what the probe found against what was verified."""
    cache_dir = (opts.cache_dir or default_cache_dir(environ)) if opts.use_cache else None
    cpus = usable_cpus()
    workers = opts.workers or min(32, cpus)
    early = _in_thread(python_env.speculate, python, cache_dir=cache_dir, workers=workers, cpus=cpus, launched=launched)

    def run() -> python_env.PythonResult:
        found = probe.result()
        return python_env.collect(
            found,
            scrubber,
            python=python,
            cache_dir=cache_dir,
            workers=workers,
            cpus=cpus,
            speculative=lambda: early.result() if early.exception() is None else None,
        )

    return run


def _in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot")
    future = pool.submit(fn, *args, **kwargs)
    pool.shutdown(wait=False)
    return future


def _jobs(
    opts: SnapshotOptions,
    environ: Mapping[str, str],
    python: str,
    probe: Future[python_env.Probe],
    scrubber: envvars.Scrubber,
    spec: Callable[[], Spec | None],
) -> dict[str, Callable[[], Any]]:
    """Every collector starts at once; those that need the probe wait for it in their own thread."""

    def sites() -> list[str]:
        return probe.result().site_dirs if probe.exception() is None else []

    def probed() -> Mapping[str, Any]:
        return probe.result().data if probe.exception() is None else {}

    def prefix() -> str:
        return str(probed().get("prefix", ""))

    launched = threading.Event()

    def later(fn: Callable[[], Any]) -> Callable[[], Any]:
        """Collectors that import heavy modules wait (briefly) until the integrity workers are
        launched: the planning before that is GIL-bound and on the critical path."""
        return lambda: (launched.wait(LAUNCH_WAIT), fn())[1]

    scripts = str(Path(python).absolute().parent)
    tool_cache = (opts.cache_dir or default_cache_dir(environ)) if opts.use_cache else None
    return {
        "python": _python_job(python, probe, scrubber, opts, environ, launched),
        "system": system.collect,
        "compilers": lambda: compilers.collect(environ, scripts, sites, tool_cache),
        "gpu": later(gpu.collect),
        "torch": lambda: torch_facts.collect(python, environ, sites(), import_torch=opts.import_torch),
        "checkouts": later(lambda: checkouts.collect(spec(), opts.paths, environ, scrubber)),
        "env": lambda: envvars.collect(environ, prefix(), scrubber),
        "runtime": lambda: runtime.collect(environ, sites(), probed().get("runtime")),
    }


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


def take_snapshot(opts: SnapshotOptions) -> Snapshot:
    """Collect every area. The GIL switch interval is lowered meanwhile: the threads mostly wait on
    I/O and subprocesses, and with the default 5 ms one that has waited can stall behind another
    thread's Python work (an import, YAML parsing) for the whole interval after every read."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        return _take(opts)
    finally:
        sys.setswitchinterval(interval)


def _take(opts: SnapshotOptions) -> Snapshot:
    started = time.perf_counter()
    environ = dict(os.environ if opts.environ is None else opts.environ)
    scrubber = envvars.Scrubber(environ)
    python = python_env.interpreter_for(opts.python, environ)
    probe = _in_thread(python_env.run_probe, python, environ)
    spec = _once(opts)
    runs = _run_all(_jobs(opts, environ, python, probe, scrubber, spec), {**TIMEOUTS, **opts.timeouts})
    facts: dict[str, Any] = {}
    timing: dict[str, Any] = {}
    for name, run in runs.items():
        timing[name] = run.seconds
        facts[name] = {"error": run.error} if run.error else run.result
    if isinstance(facts.get("python"), python_env.PythonResult):
        result: python_env.PythonResult = facts["python"]
        facts["python"] = result.facts
        timing["integrity"] = result.stats
        timing["probe"] = result.probe_seconds
        if isinstance(facts.get("torch"), dict):
            torch_facts.attach_libraries(facts["torch"], result.owner_of, result.facts["distributions"])
    facts = scrubber.clean_tree(dict(sorted(facts.items())))
    timing["total"] = round(time.perf_counter() - started, 3)
    return Snapshot(facts=facts, host=_host(opts, spec(), python, scrubber), timing=timing)


def _host(opts: SnapshotOptions, spec: Spec | None, python: str, scrubber: envvars.Scrubber) -> dict[str, Any]:
    host: dict[str, Any] = {
        **system.host_facts(),
        "tool": f"megacpp-env {__version__}",
        "tool_python": sys.executable,
        "inspected_python": python,
        "command": opts.command,
        "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "spec": str(spec.path) if spec else None,
        "spec_digest": spec.digest() if spec else None,
        "paths": [str(p) for p in opts.paths],  # as spelled; the facts key checkouts by real path
    }
    cleaned: dict[str, Any] = scrubber.clean_tree(host)
    return cleaned
