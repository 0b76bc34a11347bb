"""Integrity verification started as the snapshot verb begins, before it imports the rest.

A snapshot's critical path is hashing the largest installed files (a full run) or planning and
stat-ing ~50,000 files (a repeat). Both start here, from the parsed arguments, before the verb
imports the rest of the tool and starts its collectors: the verb waits only until the big files
are dealt to the workers (``FIRST_WAIT`` at most), then imports the rest while they hash. The
python collector takes the run (``take``) when it asks for the same interpreter, cache directory
and worker count, else starts its own; a run nobody took is killed (``discard``).

The verification itself is speculative: it covers the dist-info directories of the interpreter's
own site-packages (``guess_dist_infos``) and those its last snapshot verified
(``remembered_dist_infos``); the collector verifies whatever the probe then finds beyond them.

Import-light: this, integrity, context and interpreter are all the verb imports before it waits.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from megacpp_env.errors import SpecError
from megacpp_env.snapshot import integrity
from megacpp_env.snapshot.context import SWITCH_INTERVAL, default_cache_dir, usable_cpus
from megacpp_env.snapshot.interpreter import check_interpreter, choose_interpreter
from megacpp_env.snapshot.proc import Programs

FIRST_WAIT = 0.5  # seconds the verb waits for the big files to be dealt before it imports the rest
STOP_WAIT = 10.0  # seconds a killed run's thread is waited for


def cache_dir_for(cache_dir: Path | None, python: str) -> Path | None:
    """One hash-cache directory per inspected interpreter path (not resolved: venvs share a base python)."""
    if cache_dir is None:
        return None
    tag = hashlib.sha256(str(Path(python).absolute()).encode()).hexdigest()[:16]
    return cache_dir / f"record-hashes-{tag}"


def guess_dist_infos(python: str) -> list[str]:
    """The ``*.dist-info`` directories of ``python``'s own site-packages, found without running it
    (a virtual environment's layout), so verification can start while the probe runs."""
    root = Path(python).absolute().parent.parent
    out: list[str] = []
    for site in sorted(root.glob("lib/python3*/site-packages")):
        try:
            out += sorted(e.path for e in os.scandir(site) if e.name.endswith(".dist-info") and e.is_dir())
        except OSError:
            continue
    return out


def remembered_dist_infos(where: Path | None) -> list[str]:
    """The dist-info directories the last snapshot of this interpreter verified (its cached plan)
    that still exist: the guess for an interpreter whose layout says nothing (a pyenv shim, a
    system python), so a repeat snapshot never waits for the probe before verifying."""
    if where is None:
        return []
    plan = integrity.load_plan(where / integrity.PLAN_FILE)
    return sorted(p for p in plan if Path(p).is_dir())


def default_workers() -> int:
    return min(32, usable_cpus())


@dataclass(frozen=True, kw_only=True, slots=True)
class Key:
    """What a run verifies with: the inspected interpreter, the tool's cache directory (None: no
    cache) and the number of workers. The collector takes a run only for an equal key."""

    python: str
    cache_dir: Path | None
    workers: int


class Run:
    """One speculative verification in a thread of its own: ``launched`` is set once the workers
    have their work (or nothing was guessed), ``begun`` once they have the big files."""

    def __init__(self, key: Key) -> None:
        self.key = key
        self.launched = threading.Event()
        self.begun = threading.Event()
        self._programs: list[Programs] = []
        self._lock = threading.Lock()
        self._stopped = False
        self._result: integrity.Verified | None = None
        self._error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="snapshot-verify", daemon=True)

    def _run(self) -> None:
        try:
            where = cache_dir_for(self.key.cache_dir, self.key.python)
            guessed = sorted({*guess_dist_infos(self.key.python), *remembered_dist_infos(where)})
            if guessed and not self._stopped:
                self._result = integrity.verify(
                    [(p, p) for p in guessed],
                    cache_dir=where,
                    workers=self.key.workers,
                    launched=self.launched,
                    begun=self.begun,
                    track=self._track,
                )
        except BaseException as exc:  # handed to whoever asks for the result
            self._error = exc
        finally:
            self.begun.set()
            self.launched.set()

    def _track(self, programs: Programs) -> None:
        """Every worker set the run starts: a stopped run kills it at once."""
        with self._lock:
            self._programs.append(programs)
            stopped = self._stopped
        if stopped:
            programs.stop()

    def start(self) -> Run:
        self.thread.start()
        return self

    def result(self) -> integrity.Verified | None:
        """What was verified (None: nothing guessed); raises what the run raised."""
        self.thread.join()
        if self._error is not None:
            raise self._error
        return self._result

    def stop(self) -> None:
        """Kill its workers and wait for its thread (which reaps them and ends with an error)."""
        with self._lock:
            self._stopped = True
            programs = list(self._programs)
        for each in programs:
            each.stop()
        self.thread.join(STOP_WAIT)


_runs: list[Run] = []
_intervals: list[float] = []


def start(python: str | None, *, use_cache: bool, environ: Mapping[str, str] = os.environ) -> None:
    """Start verifying what a snapshot with these arguments inspects, and wait (``FIRST_WAIT`` at
    most) until the big files are dealt. Nothing is started for a ``--python`` that is no
    executable (the verb reports it)."""
    if _runs:
        return
    try:
        checked = check_interpreter(python) if python else None
    except SpecError:
        return
    key = Key(
        python=choose_interpreter(checked, environ).path,
        cache_dir=default_cache_dir(environ) if use_cache else None,
        workers=default_workers(),
    )
    _intervals.append(sys.getswitchinterval())
    sys.setswitchinterval(SWITCH_INTERVAL)  # from here on: the verb's imports share the GIL with the run
    run = Run(key).start()
    _runs.append(run)
    run.begun.wait(FIRST_WAIT)


def take(key: Key) -> Run | None:
    """The early run, once, if it was started for ``key``; one started for another is stopped."""
    if not _runs:
        return None
    run = _runs.pop()
    if run.key == key:
        return run
    run.stop()
    return None


def discard() -> None:
    """Stop a run nobody took; the switch interval as it was before ``start``."""
    while _runs:
        _runs.pop().stop()
    while _intervals:
        sys.setswitchinterval(_intervals.pop())
