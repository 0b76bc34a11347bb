"""A snapshot's plan, resolved once: the inspected interpreter, the cache (its directories and its
sealing key), the number of integrity workers, the environment and the collectors. ``launch``
starts what runs beside the snapshot's own imports, the speculative integrity run
(``verify.early``) and the NVML reader in a child (``collectors.nvml_child``), and stops whatever
nobody took when the snapshot ends. Nothing here is module-global: the verb and every collector get
the plan and its ``Launched`` processes through the ``Context``.

This is the one place that decides where the caches live (``cache_root``) and whether they are
used: ``--no-cache``, an untrusted cache directory (not this user's, writable by others) or a key
that cannot be had each turn every cache off, with a note.

Import-light: the verb resolves and launches the plan before it imports the collectors.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from megacpp_env.snapshot.interpreter import Interpreter, choose_interpreter
from megacpp_env.snapshot.options import SWITCH_INTERVAL, Cache, SnapshotOptions, usable_cpus
from megacpp_env.snapshot.verify import cachefile

if TYPE_CHECKING:
    import subprocess

    from megacpp_env.snapshot.probe import Probe
    from megacpp_env.snapshot.tasks import Task
    from megacpp_env.snapshot.verify.early import Run

_T = TypeVar("_T")
FIRST_WAIT = 0.5  # seconds the verb waits for the big files to be dealt before it imports the rest
MAX_WORKERS = 32


def cache_root(opts: SnapshotOptions, environ: Mapping[str, str]) -> Path:
    """``opts.cache_dir``, ``$MEGACPP_ENV_CACHE_DIR``, else ``$XDG_CACHE_HOME/megacpp-env`` (``~/.cache``)."""
    if opts.cache_dir is not None:
        return Path(opts.cache_dir)
    if environ.get("MEGACPP_ENV_CACHE_DIR"):
        return Path(environ["MEGACPP_ENV_CACHE_DIR"])
    base = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", "~")).expanduser() / ".cache")
    return Path(base) / "megacpp-env"


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotPlan:
    opts: SnapshotOptions
    environ: Mapping[str, str]
    interpreter: Interpreter
    cache: Cache | None  # None: --no-cache, or the cache cannot be trusted (``notes`` says why)
    workers: int
    notes: tuple[str, ...] = ()

    @property
    def python(self) -> str:
        return self.interpreter.path


def resolve(opts: SnapshotOptions) -> SnapshotPlan:
    """The plan of a snapshot with these options (cheap: no process is started)."""
    environ = dict(os.environ if opts.environ is None else opts.environ)
    spec_path = opts.spec.path if opts.spec is not None else opts.spec_path
    chosen = choose_interpreter(opts.python, environ, spec_dir=spec_path.parent if spec_path else None)
    cache, notes = (None, ()) if not opts.use_cache else _cache(cache_root(opts, environ), chosen.path)
    workers = opts.workers or min(MAX_WORKERS, usable_cpus())
    return SnapshotPlan(opts=opts, environ=environ, interpreter=chosen, cache=cache, workers=workers, notes=notes)


def _cache(root: Path, python: str) -> tuple[Cache | None, tuple[str, ...]]:
    tag = hashlib.sha256(str(Path(python).absolute()).encode()).hexdigest()[:16]
    records = root / f"record-hashes-{tag}"  # per interpreter path, not resolved: venvs share a base python
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
        records.mkdir(exist_ok=True, mode=0o700)
    except OSError as exc:
        return None, (f"cache directory {root}: {exc.strerror or exc}: caches not used",)
    problem = cachefile.dir_problem(str(records))
    key, note = cachefile.load_key(str(root))
    if key is None or problem is not None:
        return None, (note or f"cache directory {records} {problem}: caches not used",)
    return Cache(root=root, key=key, records=records), ()


@dataclass(kw_only=True, slots=True)
class Launched:
    """What a plan started: the speculative integrity run and the NVML reader, each taken once by
    its collector (``take_run``, ``take_nvml``); ``launch`` stops and reaps both when the snapshot
    ends (a run already finished is only joined)."""

    run: Run | None = None
    nvml: subprocess.Popen[str] | None = None
    probe: Task[Probe] | None = None  # the probe of the inspected interpreter (always taken: the context's)
    taken: set[str] = field(default_factory=set)

    def take_run(self) -> Run | None:
        return self._take("run", self.run)

    def take_nvml(self) -> subprocess.Popen[str] | None:
        return self._take("nvml", self.nvml)

    def _take(self, what: str, value: _T) -> _T | None:
        if what in self.taken:
            return None
        self.taken.add(what)
        return value


@contextmanager
def launch(plan: SnapshotPlan, *, nvml: bool = True) -> Iterator[Launched]:
    """Start the speculative verification (and wait, ``FIRST_WAIT`` at most, until its big files are
    dealt), the probe of the inspected interpreter (its start is paid every time: the sooner the
    better) and the NVML child (``nvml``, unless pynvml is imported here: a caller's or a test's
    stand-in is then used in this process); on the way out, stop and reap what was not taken, and
    put the GIL switch interval back."""
    from megacpp_env.snapshot.collectors import nvml_child
    from megacpp_env.snapshot.tasks import Task
    from megacpp_env.snapshot.verify.early import Run
    from megacpp_env.snapshot.verify.probe_cache import run_probe

    interval = sys.getswitchinterval()
    launched = Launched()
    try:
        if nvml and "pynvml" not in sys.modules:
            launched.nvml = nvml_child.spawn_quietly()
        sys.setswitchinterval(SWITCH_INTERVAL)  # the verb's imports share the GIL with the run
        launched.run = Run(python=plan.python, cache=plan.cache, workers=plan.workers).start()
        launched.probe = Task(run_probe, plan.python, plan.environ, plan.cache, name="snapshot-probe")
        launched.run.begun.wait(FIRST_WAIT)
        yield launched
    finally:
        if launched.run is not None:
            launched.run.stop()
        if launched.nvml is not None:
            nvml_child.reap(launched.nvml)
        sys.setswitchinterval(interval)
