"""Integrity verification started as the snapshot verb begins, before it imports the rest.

A snapshot's critical path is hashing the largest installed files (a full run) or planning and
stat-ing ~50,000 files (a repeat). Both start here, when the plan is launched (``plan.launch``),
before the verb imports the rest of the tool and starts its collectors: the verb waits only until
the big files are dealt to the workers (``plan.FIRST_WAIT`` at most), then imports the rest while
they hash. The python collector takes the run from the plan's ``Launched``.

The verification itself is speculative: it covers the dist-info directories of the interpreter's
own site-packages (``guess_dist_infos``) and those its last snapshot verified
(``remembered_dist_infos``); the collector verifies whatever the probe then finds beyond them.

Import-light: this, integrity, context and interpreter are all the verb imports before it waits.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from megacpp_env.snapshot.proc import Programs
from megacpp_env.snapshot.verify import integrity

if TYPE_CHECKING:
    from megacpp_env.snapshot.options import Cache

STOP_WAIT = 10.0  # seconds a killed run's thread is waited for


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


def remembered_dist_infos(cache: Cache | None) -> list[str]:
    """The dist-info directories the last snapshot of this interpreter verified (its sealed plan)
    that still exist: the guess for an interpreter whose layout says nothing (a pyenv shim, a
    system python), so a repeat snapshot never waits for the probe before verifying."""
    if cache is None:
        return []
    plan = integrity.Plan(cache.records / integrity.PLAN_FILE, cache.key, [])
    return sorted(p for p in plan.entries if Path(p).is_dir())


class Run:
    """One speculative verification in a thread of its own: ``launched`` is set once the workers
    have their work (or nothing was guessed), ``begun`` once they have the big files."""

    def __init__(self, *, python: str, cache: Cache | None, workers: int) -> None:
        self.python, self.cache, self.workers = python, cache, workers
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
            guessed = sorted({*guess_dist_infos(self.python), *remembered_dist_infos(self.cache)})
            if guessed and not self._stopped:
                self._result = integrity.verify(
                    [(p, p) for p in guessed],
                    cache_dir=self.cache.records if self.cache else None,
                    key=self.cache.key if self.cache else None,
                    workers=self.workers,
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
        """Kill its workers (if still running) and wait for its thread (which reaps them)."""
        with self._lock:
            self._stopped = True
            programs = list(self._programs)
        if self.thread.is_alive():
            for each in programs:
                each.stop()
        self.thread.join(STOP_WAIT)
