"""Golden snapshots: named snapshots stored before a benchmark, checked before the next one."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from megacpp_env.errors import SpecError, VerificationError
from megacpp_env.fsutil import write_output
from megacpp_env.snapshot.document import Snapshot, load_snapshot

if TYPE_CHECKING:
    from megacpp_env.snapshot.diff import DiffReport
    from megacpp_env.spec.model import Spec

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
DEFAULT_DIR = ".megacpp/golden"


def golden_dir(spec: Spec | None, override: Path | None) -> Path:
    """``--golden-dir``, else the spec's ``snapshot.golden_dir`` (relative to the spec's directory),
    else ``.megacpp/golden`` in the current directory."""
    if override is not None:
        return Path(override)
    if spec is not None:
        directory = spec.root / spec.snapshot.golden_dir
        root = spec.root.resolve()
        if not directory.resolve().is_relative_to(root):  # a symlink on the way leads out
            raise SpecError(
                f"snapshot.golden_dir {spec.snapshot.golden_dir!r} resolves to {directory.resolve()}, outside {root}",
                file=str(spec.path),
                remedy="point it at a directory inside the repository, or pass --golden-dir",
            )
        return directory
    return Path(DEFAULT_DIR)


def golden_path(directory: Path, name: str) -> Path:
    if not NAME_RE.fullmatch(name):
        raise SpecError(f"golden name {name!r}: use letters, digits, '.', '_' and '-' (at most 128)", key="--golden")
    return Path(directory) / f"{name}.json"


def store_golden(snapshot: Snapshot, directory: Path, name: str) -> tuple[Path, bool]:
    """Write the snapshot as golden ``name``; returns (path, whether the file changed)."""
    path = golden_path(directory, name)
    try:
        return path, write_output(path, snapshot.to_json().encode("utf-8"))
    except OSError as exc:
        raise VerificationError(f"{path}: cannot store golden {name!r}: {exc.strerror or exc}") from None


def load_golden(directory: Path, name: str) -> Snapshot:
    """The stored golden ``name``; loaded before a live snapshot is taken, so a missing one fails fast."""
    path = golden_path(directory, name)
    if not path.is_file():
        raise VerificationError(f"no golden snapshot {name!r} in {directory} (store one with --golden {name})")
    return load_snapshot(path)


def check_golden(snapshot: Snapshot, golden: Snapshot, name: str, *, ignore: Sequence[str] = ()) -> DiffReport:
    from megacpp_env.snapshot.diff import diff_snapshots  # only a check needs it (import time on the plain path)

    return diff_snapshots(golden, snapshot, ignore=ignore, a_label=f"golden {name}", b_label="live")


def ignore_patterns(given: Sequence[str], spec: Spec | None) -> list[str]:
    """``--ignore`` patterns plus the spec's ``snapshot.ignore``."""
    return [*given, *(spec.snapshot.ignore if spec else ())]


@dataclass(frozen=True, kw_only=True, slots=True)
class Golden:
    """The golden directory and, for ``--check-golden``, the stored reference (loaded up front)."""

    directory: Path
    reference: Snapshot | None = None


def prepare(
    *, store: str | None, check: str | None, directory: Path | None, spec: Callable[[], Spec | None]
) -> Golden | None:
    """Resolve the golden directory, validate the names and load the golden to check against, all
    before a snapshot is taken (a typo fails in a second, not after the collectors ran)."""
    if not (store or check):
        return None
    where = golden_dir(spec() if directory is None else None, directory)
    if store:
        golden_path(where, store)
    return Golden(directory=where, reference=load_golden(where, check) if check else None)
