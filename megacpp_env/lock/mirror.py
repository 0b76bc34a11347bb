"""Mirror every artifact of a lock into a local, content-addressed store.

Layout under DIR::

    DIR/sha256/<hex>            the bytes, named by their sha256 (verified before they land there)
    DIR/files/<filename>        hard links (copies where links fail) with the original file names:
                                ``pip install --no-index --find-links DIR/files ...`` installs from it
    DIR/mirror.json             what is there: package, version, filename, sha256, url (sorted)

Downloads are verified against the lock's sha256 before they are stored; an artifact already in the
store is not fetched again. PyTorch prunes nightlies after ~60 days: a mirrored lock still rebuilds.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megacpp_env import layout
from megacpp_env.errors import StaleError, VerificationError
from megacpp_env.fsutil import CHUNK, atomic_write_text, sha256_file
from megacpp_env.lock.pylock import Artifact, Lock, read_pylock
from megacpp_env.records import as_dict

TIMEOUT_S = 60


@dataclass(frozen=True, kw_only=True, slots=True)
class MirroredFile:
    package: str
    version: str
    artifact: Artifact
    fetched: bool  # False when it was already in the store

    def to_dict(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "version": self.version,
            "filename": self.artifact.filename,
            "sha256": self.artifact.sha256,
            "url": self.artifact.url,
        }


def store_path(root: Path, sha256: str) -> Path:
    return root / "sha256" / sha256


def links_dir(root: Path) -> Path:
    """The flat find-links directory of a mirror (``pip --no-index --find-links``)."""
    return root / "files"


class DownloadError(VerificationError):
    """An artifact of the lock cannot be downloaded (unreachable, HTTP error, timeout)."""


def _download(url: str, dest: Path) -> None:
    if not url.startswith(("https://", "http://", "file://")):
        raise VerificationError(f"refusing to download {url!r}: not an http(s) or file URL")
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp, open(dest, "wb") as fh:  # noqa: S310 (checked above)
            while chunk := resp.read(CHUNK):
                fh.write(chunk)
    except urllib.error.HTTPError as exc:
        raise DownloadError(f"cannot download {url}: HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise DownloadError(f"cannot download {url}: {exc.reason}") from None
    except (OSError, http.client.HTTPException) as exc:  # timeouts, resets, truncated responses
        raise DownloadError(f"cannot download {url}: {exc or type(exc).__name__}") from None


def fetch(root: Path, artifact: Artifact) -> bool:
    """Put one artifact into the store (download + verify); False when it was already there."""
    target = store_path(root, artifact.sha256)
    if target.exists() and sha256_file(target) == artifact.sha256:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".dl-", dir=target.parent)
    os.close(fd)
    try:
        _download(artifact.url, Path(tmp))
        got = sha256_file(Path(tmp))
        if got != artifact.sha256:
            raise VerificationError(
                f"{artifact.filename}: sha256 {got} does not match the lock's {artifact.sha256} ({artifact.url})"
            )
        os.replace(tmp, target)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return True


def link(root: Path, artifact: Artifact) -> None:
    dest = links_dir(root) / artifact.filename
    src = store_path(root, artifact.sha256)
    if dest.exists():
        if dest.samefile(src) or sha256_file(dest) == artifact.sha256:
            return
        dest.unlink()
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def mirror_lock(
    lock: Lock, root: Path, *, on_file: Callable[[str], None] | None = None, max_workers: int = 8
) -> list[MirroredFile]:
    """Mirror every artifact (wheels and sdists) of ``lock`` into ``root``."""
    todo = [(p, a) for p in lock.packages for a in p.artifacts]
    missing = [f"{p.name}=={p.version}" for p, a in todo if not a.sha256 or not a.url]
    if missing or any(p.vcs for p in lock.packages):
        raise VerificationError(f"cannot mirror entries without URL and sha256: {', '.join(missing) or 'VCS sources'}")

    def one(item: tuple[Any, Artifact]) -> MirroredFile:
        pkg, art = item
        fetched = fetch(root, art)
        link(root, art)
        if on_file is not None:
            on_file(art.filename)
        return MirroredFile(package=pkg.name, version=pkg.version, artifact=art, fetched=fetched)

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(todo)))) as pool:
        files = list(pool.map(one, todo))
    write_manifest(root, files)
    return files


def write_manifest(root: Path, files: list[MirroredFile]) -> None:
    path = root / "mirror.json"
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        old = []
    merged = {(e["filename"], e["sha256"]): e for e in [*old, *(f.to_dict() for f in files)]}
    entries = [merged[k] for k in sorted(merged)]
    atomic_write_text(path, json.dumps(entries, indent=2, sort_keys=True) + "\n")


def verify_mirror(root: Path) -> list[str]:
    """Re-hash every stored file; return the names of the ones that do not match."""
    return [p.name for p in sorted((root / "sha256").glob("*")) if p.is_file() and sha256_file(p) != p.name]


@dataclass(frozen=True, kw_only=True, slots=True)
class MirroredLock:
    """One lock mirrored: how many artifacts, how many were fetched now, where pip finds them."""

    target: str
    platform: str
    files: int
    fetched: int
    find_links: str

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


def committed_lock(spec_root: Path, target: str, platform: str) -> Lock:
    """The committed lock of ``target`` on ``platform``; a missing one is stale (lock it first)."""
    path = layout.lock_path(spec_root, target, platform)
    if not path.exists():
        raise StaleError(f"no lock for {target} {platform}: {path} (run: megacpp-env lock {target})")
    return read_pylock(path)


def mirror_target(
    lock: Lock, target: str, platform: str, dest: Path, *, on_file: Callable[[str], None] | None = None
) -> MirroredLock:
    files = mirror_lock(lock, dest, on_file=on_file)
    return MirroredLock(
        target=target,
        platform=platform,
        files=len(files),
        fetched=sum(f.fetched for f in files),
        find_links=str(links_dir(dest)),
    )
