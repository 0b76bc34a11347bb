"""What every collector may use: the options of the snapshot, the environment, the inspected
interpreter and the probe's answers (waited for only when asked). One ``Context`` per snapshot."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.snapshot.tasks import Task

if TYPE_CHECKING:
    from megacpp_env.snapshot.plan import Launched, SnapshotPlan
    from megacpp_env.snapshot.probe import Probe
    from megacpp_env.snapshot.scrub import Scrubber
    from megacpp_env.spec.model import Spec


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotOptions:
    python: str | None = None
    paths: tuple[Path, ...] = ()
    repo: Path | None = None  # the training repository (default: the git work tree of the working directory)
    spec: Spec | None = None
    load_spec: Callable[[], Spec | None] | None = None  # used when spec is None; called off the critical path
    import_torch: bool = False
    cache_dir: Path | None = None
    use_cache: bool = True
    workers: int = 0
    environ: Mapping[str, str] | None = None
    command: str = ""
    timeouts: Mapping[str, float] = field(default_factory=dict)  # area -> seconds, over the registry's
    on_progress: Callable[[tuple[str, ...], float], None] | None = None  # (areas still running, seconds)


# The GIL switch interval while a snapshot runs (``collect.take_snapshot``, ``early.start``): its
# threads mostly wait on I/O and subprocesses, and with the default 5 ms one that has waited can
# stall behind another thread's Python work for the whole interval after every read.
SWITCH_INTERVAL = 0.0005


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Context:
    plan: SnapshotPlan  # the interpreter, cache, workers, environment: resolved once
    started: Launched  # what the plan launched (the speculative run, the NVML child), taken once each
    scrubber: Scrubber
    probe: Task[Probe]  # the probe of the inspected interpreter, started first
    spec: Callable[[], Spec | None]  # loaded at most once, when first asked for
    verifying: threading.Event = field(default_factory=threading.Event)  # the integrity workers have their work
    notes: list[str] = field(default_factory=list)  # cache files the collectors discarded (``live.cache``)

    def probe_notes(self) -> list[str]:
        """What the probe's cache discarded (once it has run)."""
        return list(self.probe.result().notes) if self.probe.done() and self.probe.exception() is None else []

    @property
    def opts(self) -> SnapshotOptions:
        return self.plan.opts

    @property
    def environ(self) -> Mapping[str, str]:
        return self.plan.environ

    @property
    def python(self) -> str:
        """The inspected interpreter."""
        return self.plan.python

    @property
    def python_reason(self) -> str:
        """Why that one (``interpreter.choose_interpreter``)."""
        return self.plan.interpreter.reason

    def sites(self) -> list[str]:
        return self.probe.result().site_dirs if self.probe.exception() is None else []

    def probed(self) -> Mapping[str, Any]:
        return self.probe.result().data if self.probe.exception() is None else {}

    def prefix(self) -> str:
        return str(self.probed().get("prefix", ""))

    @property
    def scripts(self) -> str:
        """The inspected interpreter's scripts directory (its compilers and tools come first on PATH)."""
        return str(Path(self.python).absolute().parent)
