"""The records a snapshot is planned with: its options (``SnapshotOptions``), where its caches live
(``Cache``), and the process-wide settings the plan applies. Import-light and importing nothing of
the snapshot: the plan, the context, the collectors and the caches all read them."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from megacpp_env.spec.model import Spec


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotOptions:
    python: str | None = None
    paths: tuple[Path, ...] = ()
    repo: Path | None = None  # the training repository (default: the git work tree of the working directory)
    spec: Spec | None = None
    spec_path: Path | None = None  # the spec file when it is not loaded yet: its directory's .venv is inspected
    load_spec: Callable[[], Spec | None] | None = None  # used when spec is None; called off the critical path
    import_torch: bool = False
    cache_dir: Path | None = None
    use_cache: bool = True
    workers: int = 0
    environ: Mapping[str, str] | None = None
    command: str = ""
    timeouts: Mapping[str, float] = field(default_factory=dict)  # area -> seconds, over the registry's
    on_progress: Callable[[tuple[str, ...], float], None] | None = None  # (areas still running, seconds)


# The GIL switch interval while a snapshot runs (``plan.launch``): its
# threads mostly wait on I/O and subprocesses, and with the default 5 ms one that has waited can
# stall behind another thread's Python work for the whole interval after every read.
SWITCH_INTERVAL = 0.0005


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Cache:
    """Where the caches live and the key that seals them (``verify.cachefile``)."""

    root: Path  # the tool's cache directory: probe, checkouts, NVML, tools
    key: bytes
    records: Path  # the integrity caches of the inspected interpreter (one directory per interpreter path)

    def file(self, name: str) -> Path:
        return self.root / name
