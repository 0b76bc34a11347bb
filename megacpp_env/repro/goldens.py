"""Find a golden by name (in the golden directory) or by file, with its capture and object store,
and the snapshot options that inspect what the golden inspected.

Shared by ``reproduce``, ``run --golden`` and ``bisect-check``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.errors import MegacppEnvError, VerificationError
from megacpp_env.repro.document import Capture, capture_path, load_capture
from megacpp_env.repro.objects import ObjectStore
from megacpp_env.snapshot import golden as goldens
from megacpp_env.snapshot.context import SnapshotOptions
from megacpp_env.snapshot.document import Snapshot, load_snapshot

if TYPE_CHECKING:
    from megacpp_env.spec.model import Spec


@dataclass(frozen=True, kw_only=True, slots=True)
class GoldenRef:
    name: str
    path: Path  # the snapshot document
    snapshot: Snapshot

    @property
    def capture_file(self) -> Path:
        return capture_path(self.path)

    @property
    def store(self) -> ObjectStore:
        return ObjectStore.beside(self.path.parent)

    def capture(self) -> Capture | None:
        """The capture stored with the golden; None for a golden stored without one."""
        return load_capture(self.capture_file) if self.capture_file.is_file() else None


def is_file_argument(arg: str) -> bool:
    return arg.endswith(".json") or os.sep in arg or Path(arg).is_file()


def resolve(arg: str, directory: Path) -> GoldenRef:
    """GOLDEN: a golden name (``DIR/NAME.json`` in the golden directory) or a snapshot file."""
    if is_file_argument(arg):
        path = Path(arg)
        if not path.is_file():
            raise VerificationError(f"no such snapshot file {arg} (a golden name has no '/' and no .json)")
        return GoldenRef(name=path.name.removesuffix(".json"), path=path.resolve(), snapshot=load_snapshot(path))
    snap = goldens.load_golden(directory, arg)
    return GoldenRef(name=arg, path=goldens.golden_path(directory, arg).resolve(), snapshot=snap)


def inspected_paths(snapshot: Snapshot) -> tuple[Path, ...]:
    """Every checkout directory the golden inspected (found by its spec or given with ``--paths``),
    as the real paths its facts record (``host.paths`` keeps them as they were spelled)."""
    out: list[Path] = []
    for entry in snapshot.area("checkouts").values():
        if isinstance(entry, Mapping) and isinstance(entry.get("path"), str):
            out.append(Path(entry["path"]))
    return tuple(sorted(set(out)))


def inspected_python(snapshot: Snapshot) -> str | None:
    """The interpreter the golden inspected, if it is still there: the executable its hashed facts
    record (``facts.python.interpreter.executable``). ``host.inspected_python`` is outside the digest,
    so an edit there would pass the tamper check; it never chooses what runs."""
    interp = snapshot.area("python").get("interpreter")
    found: Any = interp.get("executable") if isinstance(interp, Mapping) else None
    if not isinstance(found, str) or not found.startswith("/") or "\0" in found:
        return None
    return found if Path(found).is_file() else None


def options_like(
    snapshot: Snapshot, *, python: str | None, paths: Sequence[Path] | None, spec: Callable[[], Spec | None],
    environ: Mapping[str, str] | None = None, command: str = "",
) -> SnapshotOptions:  # fmt: skip
    """Snapshot options that inspect what ``snapshot`` inspected (its interpreter, its checkouts, its
    spec and ``--torch``), each overridable."""
    torch = snapshot.area("torch").get("imported")
    return SnapshotOptions(
        python=python or inspected_python(snapshot),
        paths=tuple(paths) if paths is not None else inspected_paths(snapshot),
        load_spec=spec,
        import_torch=isinstance(torch, dict),
        environ=environ,
        command=command,
    )


def golden_spec_path(snapshot: Snapshot) -> Path | None:
    """The spec the golden was taken with, when that file still exists and agrees with the golden's
    hashed facts (``spec_agrees``): ``host.spec`` is outside the digest, so it is only a hint."""
    spec = snapshot.host.get("spec")
    return Path(spec) if isinstance(spec, str) and spec.startswith("/") and Path(spec).is_file() else None


def spec_agrees(spec: Spec, snapshot: Snapshot) -> bool:
    """Every checkout the golden keyed by a source name is a source of ``spec`` at the same pin: the
    pins and names the spec decides are then the ones the hashed facts record (a source the golden did
    not find is inspected too, and shows as drift)."""
    for key, entry in snapshot.area("checkouts").items():
        if not isinstance(entry, Mapping) or entry.get("source") != key:
            continue
        source = spec.sources.get(key)
        if source is None or entry.get("expected") not in (None, source.commit):
            return False
    return True


def spec_loader(snapshot: Snapshot, fallback: Callable[[], Spec | None]) -> Callable[[], Spec | None]:
    """The spec the golden was taken with when that file is still there and agrees with the golden's
    hashed facts (its checkouts are keyed by that spec's source names), else ``fallback`` (``--spec``
    or the one found upward)."""
    path = golden_spec_path(snapshot)
    if path is None:
        return fallback

    def load() -> Spec | None:
        from megacpp_env.spec import load_spec

        try:
            found = load_spec(path)
        except MegacppEnvError:
            return fallback()
        return found if spec_agrees(found, snapshot) else fallback()

    return load


def spec_once(path: Path | None) -> Callable[[], Spec | None]:
    """The spec at ``path`` (when that file exists), loaded at most once and only when first asked for:
    a golden's command loads it only when the golden is found by name or its own spec is gone, and then
    in a snapshot collector's thread, off the critical path (docs/DESIGN.md, "Verbs")."""
    from megacpp_env.spec.discover import load_present

    return functools.cache(lambda: load_present(path))


def find(arg: str, override: Path | None, spec: Callable[[], Spec | None]) -> GoldenRef:
    """GOLDEN in ``--golden-dir`` when given, else in the spec's golden directory (the spec is
    loaded only then), else in ``.megacpp/golden`` here."""
    return resolve(arg, goldens.golden_dir(spec() if override is None else None, override))
