"""Mirror every artifact of a lock into a local, content-addressed store.

Layout under DIR::

    DIR/sha256/<hex>            the bytes, named by their sha256 (verified before they land there)
    DIR/files/<filename>        hard links (copies where links fail) with the original file names:
                                ``pip install --no-index --find-links DIR/files ...`` installs from it
    DIR/mirror.json             what is there: package, version, filename, sha256, url (sorted)

Downloads are verified against the lock's sha256 before they are stored; an artifact already in the
store is not fetched again. PyTorch prunes nightlies after ~60 days: a mirrored lock still rebuilds.

Nothing is written outside DIR. File names come from URLs, so each is percent-decoded and then
validated as a wheel or sdist name of the package it belongs to (``packaging.utils``); a hash names a
file only when it is 64 hex digits. Every file is created and replaced relative to a directory
descriptor of ``DIR/sha256`` or ``DIR/files`` opened with ``O_NOFOLLOW``, by a plain name, with
``O_NOFOLLOW``/``O_EXCL``: a symlink planted in the mirror is never followed.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import secrets
import stat
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env import layout, netio
from megacpp_env.chars import dangerous_char
from megacpp_env.errors import InputError, RefusedError, StaleError, VerificationError
from megacpp_env.fsutil import CHUNK, atomic_write_text, read_text_input, sweep_staging
from megacpp_env.lock.pylock import Artifact, Lock, LockedPackage, read_pylock
from megacpp_env.lock.state import jobs_for
from megacpp_env.records import Record

if TYPE_CHECKING:
    from megacpp_env.spec.model import Spec
    from megacpp_env.ui import Progress

TIMEOUT_S = 60
DEADLINE_S = 1800.0  # one download, start to end (MEGACPP_NET_DEADLINE overrides)
SHA256_RE = re.compile(r"[0-9a-f]{64}")
_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True, kw_only=True, slots=True)
class MirroredFile:
    package: str
    version: str
    artifact: Artifact
    filename: str  # validated
    fetched: bool  # False when it was already in the store

    def to_dict(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "version": self.version,
            "filename": self.filename,
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


# ---- names -----------------------------------------------------------------------------------------


def artifact_filename(artifact: Artifact, package: LockedPackage | None = None) -> str:
    """The artifact's file name from its URL, percent-decoded, validated as a wheel or sdist name (of
    ``package``, when given). Anything that could name another directory is refused."""
    from packaging.utils import (
        InvalidSdistFilename,
        InvalidWheelFilename,
        canonicalize_name,
        parse_sdist_filename,
        parse_wheel_filename,
    )

    name = artifact.filename
    bad = dangerous_char(name)
    if not name or "/" in name or "\\" in name or name in (".", "..") or bad is not None:
        raise RefusedError(f"artifact URL {artifact.url!r} does not end in a file name")
    try:
        if name.endswith(".whl"):
            project, version = parse_wheel_filename(name)[:2]
        else:
            project, version = parse_sdist_filename(name)
    except (InvalidWheelFilename, InvalidSdistFilename) as exc:
        raise RefusedError(f"artifact {name!r} ({artifact.url}) is not a wheel or sdist file name: {exc}") from None
    if package is not None and canonicalize_name(project) != package.name:
        raise RefusedError(f"artifact {name!r} of {package.name} is named for another project ({project})")
    if package is not None and package.version and str(version) != _normal_version(package.version):
        raise RefusedError(f"artifact {name!r} of {package.name} {package.version} has version {version}")
    return name


def _normal_version(text: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        return str(Version(text))
    except InvalidVersion:
        return text


def _sha256(artifact: Artifact) -> str:
    if not SHA256_RE.fullmatch(artifact.sha256):
        raise RefusedError(f"artifact {artifact.url}: sha256 {artifact.sha256!r} is not 64 lowercase hex digits")
    return artifact.sha256


# ---- the store, by directory descriptor -----------------------------------------------------------


def check_destination(root: Path) -> Path:
    """``--to DIR`` before anything runs: an existing non-directory is a one-line error."""
    root = Path(root)
    if (root.exists() or root.is_symlink()) and not root.is_dir():
        raise InputError(f"{root} exists and is not a directory", key="--to")
    return root


def open_root(root: Path) -> int:
    """A descriptor of ``root`` (created if missing). An existing non-directory is a one-line error."""
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(f"{root} exists and is not a directory", key="--to") from None
    except NotADirectoryError:
        raise InputError(f"{root}: a parent is not a directory", key="--to") from None
    except OSError as exc:
        raise InputError(f"{root}: cannot create the mirror: {exc.strerror or exc}", key="--to") from None
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _subdir(root_fd: int, name: str) -> int:
    """``root/name`` as a descriptor; a symlink (or anything but a directory) there is refused."""
    with suppress(FileExistsError):
        os.mkdir(name, 0o755, dir_fd=root_fd)
    try:
        return os.open(name, _NOFOLLOW_DIR, dir_fd=root_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise RefusedError(f"mirror: {name}/ is not a plain directory (a symlink?); refusing to write") from None
        raise


@contextmanager
def _store(root: Path) -> Iterator[tuple[int, int, int]]:
    """(root, sha256/, files/) descriptors, closed on exit."""
    fds = [open_root(root)]
    try:
        fds += [_subdir(fds[0], "sha256"), _subdir(fds[0], "files")]
        yield fds[0], fds[1], fds[2]
    finally:
        for fd in fds:
            os.close(fd)


def _regular(name: str, dir_fd: int, *, remove: bool = True) -> os.stat_result | None:
    """lstat of ``name`` in the directory; None when absent or (``remove``: removed) not a regular
    file. A planted symlink, FIFO or device node is never followed and never read."""
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    if stat.S_ISREG(st.st_mode):
        return st
    if stat.S_ISDIR(st.st_mode):
        raise RefusedError(f"mirror: {name} is a directory; refusing to replace it")
    if remove:
        os.unlink(name, dir_fd=dir_fd)
    return None


def _hash_at(name: str, dir_fd: int) -> str:
    import hashlib

    h = hashlib.sha256()
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _download(url: str, fd: int) -> None:
    if url.startswith("file://"):
        _copy_file_url(url, fd)
        return
    if not url.startswith(("https://", "http://")):
        raise VerificationError(f"refusing to download {url!r}: not an http(s) or file URL")
    with os.fdopen(fd, "wb", closefd=False) as fh:
        try:  # a total deadline: a server trickling bytes cannot stall the mirror
            resp = netio.fetch(
                netio.Request(url=url, limit=0, deadline=netio.deadline_s(DEADLINE_S)),
                sink=lambda chunk: _write(fh, chunk),
            )
        except netio.NetError as exc:
            raise DownloadError(f"cannot download {netio.printable(url)}: {exc.detail}") from None
    if resp.status != 200:
        raise DownloadError(f"cannot download {netio.printable(url)}: HTTP {resp.status} {resp.reason}".rstrip())


def _write(fh: Any, chunk: bytes) -> None:
    fh.write(chunk)


def _copy_file_url(url: str, fd: int) -> None:
    """A ``file://`` artifact (a local index): a regular file only (a FIFO would block forever)."""
    try:
        path = urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
        if not stat.S_ISREG(Path(path).stat().st_mode):
            raise DownloadError(f"cannot download {url}: not a regular file")
        with (
            urllib.request.urlopen(url, timeout=TIMEOUT_S) as resp,  # noqa: S310 (file:// only)
            os.fdopen(fd, "wb", closefd=False) as fh,
        ):
            while chunk := resp.read(CHUNK):
                fh.write(chunk)
    except urllib.error.URLError as exc:
        raise DownloadError(f"cannot download {url}: {exc.reason}") from None
    except OSError as exc:
        raise DownloadError(f"cannot download {url}: {exc.strerror or exc}") from None


def _locked_temp(sha_fd: int) -> tuple[str, int]:
    """A new ``.dl-*`` file, flock-held, that is still the one at its name: a sweep by a concurrent
    download (another thread of this run, or another run) may take it between create and lock; then
    it is gone and another is made."""
    while True:
        tmp = f".dl-{secrets.token_hex(8)}"
        fd = os.open(tmp, _NEW_FILE, 0o644, dir_fd=sha_fd)
        fcntl.flock(fd, fcntl.LOCK_EX)  # held until the rename: a concurrent sweep keeps it
        try:
            if os.stat(tmp, dir_fd=sha_fd, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                return tmp, fd
        except FileNotFoundError:
            pass
        os.close(fd)


def _fetch_into(sha_fd: int, artifact: Artifact) -> bool:
    sha = _sha256(artifact)
    if _regular(sha, sha_fd) is not None and _hash_at(sha, sha_fd) == sha:
        return False
    sweep_staging(Path(), ".dl-", dir_fd=sha_fd)  # what killed downloads left (unlocked: their process is gone)
    tmp, fd = _locked_temp(sha_fd)
    try:
        _download(artifact.url, fd)
        got = _hash_at(tmp, sha_fd)
        if got != sha:
            raise VerificationError(
                f"{artifact.filename}: sha256 {got} does not match the lock's {sha} ({artifact.url})"
            )
        os.replace(tmp, sha, src_dir_fd=sha_fd, dst_dir_fd=sha_fd)
    finally:
        os.close(fd)
        with suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=sha_fd)
    return True


def _link_into(sha_fd: int, files_fd: int, sha: str, filename: str) -> None:
    st = _regular(filename, files_fd)
    if st is not None:
        src = os.lstat(sha, dir_fd=sha_fd)
        if (st.st_dev, st.st_ino) == (src.st_dev, src.st_ino) or _hash_at(filename, files_fd) == sha:
            return
        os.unlink(filename, dir_fd=files_fd)
    try:
        os.link(sha, filename, src_dir_fd=sha_fd, dst_dir_fd=files_fd, follow_symlinks=False)
    except OSError:
        _copy_at(sha_fd, sha, files_fd, filename)


def _copy_at(src_fd: int, src: str, dst_fd: int, dst: str) -> None:
    fin = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src_fd)
    fout = os.open(dst, _NEW_FILE, 0o644, dir_fd=dst_fd)
    with os.fdopen(fin, "rb") as r, os.fdopen(fout, "wb") as w:
        while chunk := r.read(CHUNK):
            w.write(chunk)


# ---- the operations ----------------------------------------------------------------------------------


def fetch(root: Path, artifact: Artifact) -> bool:
    """Put one artifact into the store (download + verify); False when it was already there."""
    with _store(root) as (_root_fd, sha_fd, _files_fd):
        return _fetch_into(sha_fd, artifact)


def mirror_lock(
    lock: Lock, root: Path, *, on_file: Callable[[str], None] | None = None, max_workers: int = 8
) -> list[MirroredFile]:
    """Mirror every artifact (wheels and sdists) of ``lock`` into ``root``."""
    todo = [(p, a) for p in lock.packages for a in p.artifacts]
    missing = [f"{p.name}=={p.version}" for p, a in todo if not a.sha256 or not a.url]
    if missing or any(p.vcs for p in lock.packages):
        raise VerificationError(f"cannot mirror entries without URL and sha256: {', '.join(missing) or 'VCS sources'}")
    named = [(p, a, artifact_filename(a, p), _sha256(a)) for p, a in todo]  # all refused before any write
    with _store(root) as (_root_fd, sha_fd, files_fd):

        def one(item: tuple[LockedPackage, Artifact, str, str]) -> MirroredFile:
            pkg, art, filename, sha = item
            fetched = _fetch_into(sha_fd, art)
            _link_into(sha_fd, files_fd, sha, filename)
            if on_file is not None:
                on_file(filename)
            return MirroredFile(package=pkg.name, version=pkg.version, artifact=art, filename=filename, fetched=fetched)

        with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(named)))) as pool:
            files = list(pool.map(one, named))
    write_manifest(root, files)
    return files


def _old_manifest(path: Path) -> list[dict[str, str]]:
    """The entries of an existing mirror.json; a malformed one is an error (it is the mirror's index)."""
    try:
        data = json.loads(read_text_input(path))
    except InputError as exc:
        if exc.detail == "no such file":
            return []
        raise
    except (ValueError, RecursionError):
        raise InputError("not valid JSON (remove it, or mirror into another --to)", file=str(path)) from None
    keys = ("filename", "sha256")
    if not isinstance(data, list) or not all(
        isinstance(e, dict) and all(isinstance(e.get(k), str) for k in keys) for e in data
    ):
        raise InputError("not a mirror manifest (remove it, or mirror into another --to)", file=str(path))
    return data


def write_manifest(root: Path, files: list[MirroredFile]) -> None:
    path = Path(root) / "mirror.json"
    merged = {(e["filename"], e["sha256"]): e for e in [*_old_manifest(path), *(f.to_dict() for f in files)]}
    entries = [merged[k] for k in sorted(merged)]
    atomic_write_text(path, json.dumps(entries, indent=2, sort_keys=True) + "\n")


def verify_mirror(root: Path) -> list[str]:
    """Re-hash every stored file; return the names of the ones that do not match (or are not files)."""
    with _store(root) as (_root_fd, sha_fd, _files_fd):
        names = sorted(os.listdir(sha_fd))  # noqa: PTH208 (a directory descriptor, not a path)
        return [
            n
            for n in names
            if not n.startswith(".") and (_regular(n, sha_fd, remove=False) is None or _hash_at(n, sha_fd) != n)
        ]


@dataclass(frozen=True, kw_only=True, slots=True)
class MirroredLock(Record):
    """One lock mirrored: how many artifacts, how many were fetched now, where pip finds them."""

    target: str
    platform: str
    files: int
    fetched: int
    find_links: str


def committed_lock(spec_root: Path, target: str, platform: str, path: Path | None = None) -> Lock:
    """The committed lock of ``target`` on ``platform`` (or its toolchain lock at ``path``); a missing
    one is stale (lock it first)."""
    path = path or layout.lock_path(spec_root, target, platform)
    if not path.exists():
        raise StaleError(f"no lock for {target} {platform}: {path} (run: megacpp-env lock resolve {target})")
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


def mirror_locks(
    dest: Path,
    spec: Spec,
    target: str,
    platforms: list[str] | None,
    *,
    progress: Callable[[int], Progress],
) -> tuple[Path, list[MirroredLock]]:
    """``mirror TARGET --to DEST``: every committed lock of the target (a platform it lacks is an
    error), each artifact fetched and sha256-verified. The destination is checked first: an existing
    file there is a one-line error."""
    dest = check_destination(dest)
    rows = []
    for job in jobs_for(spec, [target], platforms):
        lock = committed_lock(spec.root, *job.key, path=job.lock_path)
        bar = progress(sum(len(p.artifacts) for p in lock.packages))
        try:
            rows.append(mirror_target(lock, *job.key, dest, on_file=bar.step))
        finally:
            bar.close()
    return dest, rows
