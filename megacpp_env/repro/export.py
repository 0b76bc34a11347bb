"""``snapshot --export-lock FILE``: a PEP 751 lock of what the inspected environment actually runs.

Distributions from an index: the exact version, the artifact hashes asked from the index (one
``uv pip compile --no-deps --generate-hashes`` over the exact pins, for the inspected interpreter's
version; ``UV_DEFAULT_INDEX``/``UV_INDEX`` apply) and, of its wheels, the one whose tags are the
installed ``WHEEL``'s. Direct installs: ``vcs`` (URL and commit), ``directory`` (a source tree,
editable or not), ``archive`` (a wheel file, with the hash ``direct_url.json`` records). The text is
written by the lock writer and read back through the validating reader (``packaging.pylock``)
before it lands. A distribution no index reachable from here has is an error naming each one.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from packaging.pylock import is_valid_pylock_path
from packaging.utils import canonicalize_name, parse_wheel_filename

from megacpp_env import __version__, uv
from megacpp_env.errors import SpecError, ToolError, VerificationError
from megacpp_env.fsutil import atomic_write_text
from megacpp_env.lock.pylock import Artifact as LockArtifact
from megacpp_env.lock.pylock import Directory, Lock, LockedPackage, Vcs, read_pylock_text, render_pylock
from megacpp_env.repro.capture import wheel_tags
from megacpp_env.repro.document import Artifact
from megacpp_env.snapshot.document import Snapshot


@dataclass(frozen=True, kw_only=True, slots=True)
class ExportedLock:
    path: str
    lock: Lock
    artifacts: dict[str, tuple[Artifact, ...]] = field(default_factory=dict)  # dist key -> the installed wheel


def check_lock_path(path: Path) -> Path:
    """PEP 751 names a lock ``pylock.toml`` or ``pylock.<name>.toml`` (one dot-free name)."""
    if not is_valid_pylock_path(Path(path)):
        raise SpecError(
            f"{path}: not a PEP 751 lock file name", key="--export-lock",
            remedy="name it pylock.toml or pylock.<name>.toml, e.g. pylock.bench-7b.toml",
        )  # fmt: skip
    if not Path(path).absolute().parent.is_dir():
        raise SpecError(f"{path}: directory {Path(path).absolute().parent} does not exist", key="--export-lock")
    return Path(path)


def _dists(snapshot: Snapshot) -> dict[str, Mapping[str, Any]]:
    found = snapshot.area("python").get("distributions") or {}
    return {k: v for k, v in sorted(found.items()) if isinstance(v, Mapping)}


def _resolved(dists: Mapping[str, Mapping[str, Any]], version: str) -> dict[str, LockedPackage]:
    """Each index distribution's artifacts as the index lists them for exactly its version."""
    if not dists:
        return {}
    with tempfile.TemporaryDirectory(prefix="megacpp-export-") as tmp:
        pins = Path(tmp) / "pins.in"
        pins.write_text("".join(f"{d['name']}=={d['version']}\n" for d in dists.values()), encoding="utf-8")
        out = Path(tmp) / "pylock.toml"
        try:
            uv.run_uv(["pip", "compile", "--no-config", "--quiet", str(pins), "--no-deps", "--generate-hashes",
                       "--python-version", version, "-o", str(out)])  # fmt: skip
        except ToolError as exc:
            raise VerificationError(f"cannot export a lock: the index has not every installed version: {exc}") from None
        lock = read_pylock_text(out.read_text(encoding="utf-8"), path="uv pip compile output")
    return {p.name: p for p in lock.packages}


def _installed_wheel(pkg: LockedPackage, tags: tuple[str, ...]) -> LockedPackage:
    """Of the index's artifacts, the wheel the installed ``WHEEL`` tags name (all when none does)."""
    want = frozenset(tags)
    chosen = [a for a in pkg.artifacts if a.kind == "wheel" and _tags(a.filename) == want]
    return replace(pkg, artifacts=tuple(chosen)) if chosen else pkg


def _tags(filename: str) -> frozenset[str]:
    try:
        return frozenset(str(t) for t in parse_wheel_filename(filename)[3])
    except ValueError:
        return frozenset()


def _direct(d: Mapping[str, Any]) -> LockedPackage | None:
    url = d.get("direct_url") or {}
    base = LockedPackage(name=canonicalize_name(str(d["name"])), version=str(d["version"]), direct=True)
    if "vcs_info" in url:
        vcs = url["vcs_info"]
        return replace(
            base, vcs=Vcs(type=str(vcs.get("vcs", "git")), url=str(url["url"]), commit=str(vcs.get("commit_id")))
        )
    if "dir_info" in url:
        path = unquote(urlsplit(str(url["url"])).path)
        return replace(base, directory=Directory(path=path, editable=bool(url["dir_info"].get("editable"))))
    info = url.get("archive_info") or {}
    sha = (info.get("hashes") or {}).get("sha256") or str(info.get("hash", "")).removeprefix("sha256=")
    if sha:
        return replace(base, artifacts=(LockArtifact(kind="archive", url=str(url["url"]), sha256=sha),))
    return None


def export_lock(snapshot: Snapshot, path: Path) -> ExportedLock:
    dists = _dists(snapshot)
    version = str((snapshot.area("python").get("interpreter") or {}).get("version", ""))
    index = {k: d for k, d in dists.items() if not d.get("direct_url")}
    resolved = _resolved(index, version)
    packages, artifacts, missing = [], {}, []
    for key, d in dists.items():
        pkg = _direct(d) if d.get("direct_url") else resolved.get(canonicalize_name(str(d["name"])))
        if pkg is None:
            missing.append(f"{d['name']} {d['version']}")
            continue
        if not d.get("direct_url"):
            pkg = _installed_wheel(pkg, wheel_tags(Path(str(d["location"])) / str(d["metadata_dir"])))
        packages.append(pkg)
        artifacts[key] = tuple(
            Artifact(filename=a.filename, sha256=a.sha256, url=a.url) for a in pkg.artifacts if a.kind == "wheel"
        )
    if missing:
        raise VerificationError(f"cannot export a lock: no hash is known for {', '.join(missing)}")
    lock = Lock(packages=tuple(packages), requires_python=f"=={version}", created_by=f"megacpp-env {__version__}")
    text = render_pylock(lock)
    read_pylock_text(text, path=str(path))  # validated (packaging.pylock) before it lands
    atomic_write_text(path, text)
    return ExportedLock(path=str(path), lock=lock, artifacts=artifacts)
