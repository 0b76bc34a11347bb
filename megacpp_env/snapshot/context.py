"""What every collector may use: the options of the snapshot, the environment, the inspected
interpreter and the probe's answers (waited for only when asked). One ``Context`` per snapshot."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.snapshot.options import SnapshotOptions
from megacpp_env.snapshot.tasks import Handoff, Task

if TYPE_CHECKING:
    from megacpp_env.snapshot.plan import Launched, SnapshotPlan
    from megacpp_env.snapshot.probe import Probe
    from megacpp_env.snapshot.scrub import Scrubber
    from megacpp_env.spec.model import Spec

__all__ = ["Context", "SnapshotOptions"]  # SnapshotOptions: kept importable from here


@dataclass(frozen=True, kw_only=True, slots=True)
class Context:
    plan: SnapshotPlan  # the interpreter, cache, workers, environment: resolved once
    started: Launched  # what the plan launched (the speculative run, the NVML child), taken once each
    scrubber: Scrubber
    probe: Task[Probe]  # the probe of the inspected interpreter, started first
    spec: Callable[[], Spec | None]  # loaded at most once, when first asked for
    verifying: threading.Event = field(default_factory=threading.Event)  # the integrity workers have their work
    notes: list[str] = field(default_factory=list)  # cache files the collectors discarded (``live.cache``)
    python_result: Handoff[Any] = field(default_factory=Handoff)  # the python collector's result, once it has it

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
