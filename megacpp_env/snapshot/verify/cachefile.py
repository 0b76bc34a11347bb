"""Every cache file the snapshot keeps, sealed and validated before use: a cache may only skip work.

One format for all of them (the integrity workers' unit and big-file caches, the plan, the probe's
distribution listing, the checkouts' facts, NVML's fixed facts): ``MAGIC``, a keyed BLAKE2b tag of
the payload, the payload. The key is the cache directory's own secret (``.key``: 32 random bytes,
mode 0600), so an entry edited by anything but this code, truncated, or left half-written by a
crash fails its tag. An entry is read only when it is a regular file (never a FIFO, device,
directory or symbolic link: lstat first, then opened ``O_NOFOLLOW | O_NONBLOCK`` and checked again),
owned by this user, not group- or world-writable, and within its size bound; a directory is used
only when it is owned by this user and not writable by others. Anything else is discarded with a
note (``Entry.note``) and the work is done again: never trusted, never a failure, never a wait.

What this cannot do: protect a cache from this same user, who can read the key. The caches are
the user's own, like ``__pycache__``; docs/SNAPSHOT.md says what each one trusts.

Standard library only: the integrity workers (``python -I -S integrity_worker.py``) import it from
this directory.
"""

# os.path on purpose: a worker imports this before anything else.
# ruff: noqa: PTH103, PTH108, PTH116, PTH118, PTH119, PTH120

from __future__ import annotations

import contextlib
import json
import os
import stat as st_mod
from dataclasses import dataclass
from typing import Any

MAGIC = b"megacpp-env cache 1\n"
TAG_BYTES = 32
KEY_NAME = ".key"
KEY_BYTES = 32
KINDS = {
    st_mod.S_IFDIR: "a directory", st_mod.S_IFIFO: "a FIFO", st_mod.S_IFCHR: "a character device",
    st_mod.S_IFBLK: "a block device", st_mod.S_IFSOCK: "a socket", st_mod.S_IFLNK: "a symbolic link",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Entry:
    """What reading one cache file gave: its payload (None: absent or discarded) and, when it was
    discarded, why (a note for the snapshot's ``live`` section)."""

    payload: bytes | None = None
    note: str | None = None


def _tag(key: bytes, payload: bytes) -> bytes:
    from _blake2 import blake2b  # hashlib's own, without hashlib's OpenSSL import (a worker's start)

    return blake2b(payload, key=key, digest_size=TAG_BYTES).digest()


def _problem(info: os.stat_result, limit: int) -> str | None:
    """Why a file with this ``lstat``/``fstat`` must not be read (None: it may)."""
    kind = st_mod.S_IFMT(info.st_mode)
    if kind != st_mod.S_IFREG:
        return f"{KINDS.get(kind, 'not a regular file')}, not a regular file"
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}, not by this user ({os.geteuid()})"
    if info.st_mode & 0o022:
        return f"group- or world-writable (mode {info.st_mode & 0o777:04o})"
    if info.st_size > limit:
        return f"{info.st_size} bytes, over its bound of {limit}"
    return None


def dir_problem(directory: str) -> str | None:
    """Why the cache directory must not be used (None: it may): it must be a directory (a symbolic
    link to one is followed: ``~/.cache`` often is one) owned by this user and not writable by others."""
    try:
        info = os.stat(directory)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    if not st_mod.S_ISDIR(info.st_mode):
        return "is not a directory"
    if info.st_uid != os.geteuid():
        return f"is owned by uid {info.st_uid}, not by this user ({os.geteuid()})"
    if info.st_mode & 0o022:
        return f"is group- or world-writable (mode {info.st_mode & 0o777:04o}; chmod go-w it)"
    return None


def read(path: str, key: bytes | None, limit: int) -> Entry:
    """The payload of the sealed cache file at ``path`` (``Entry()`` when there is none), or a note."""
    if key is None:
        return Entry()
    name = os.path.basename(path)
    first, why = _lstat(path)
    if first is None:
        return Entry(note=f"{name}: {why}: discarded" if why else None)
    problem = _problem(first, limit)
    data = b""
    if problem is None:
        fd, why = _open(path)
        if fd is None:
            return Entry(note=f"{name}: {why}: discarded" if why else None)
        try:
            problem = _problem(os.fstat(fd), limit)  # the very file opened (a swap after the lstat)
            data = b"" if problem else _read_all(fd, limit)
        finally:
            os.close(fd)
    if problem is None:
        problem = _unsealed(data, key)
    if problem is not None:
        return Entry(note=f"{name}: {problem}: discarded")
    return Entry(payload=data[len(MAGIC) + TAG_BYTES :])


def _lstat(path: str) -> tuple[os.stat_result | None, str]:
    """(``lstat`` of ``path``, ""); (None, "") when there is nothing there; (None, why) when it cannot be
    read."""
    try:
        return os.lstat(path), ""
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"


def _open(path: str) -> tuple[int | None, str]:
    """(a descriptor of ``path`` opened for reading without following a link or waiting on a FIFO, ""),
    or (None, "") when it went away since its ``lstat``, or (None, why)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC), ""
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, f"cannot be opened ({exc.strerror or exc})"


def read_json(path: str, key: bytes | None, limit: int, notes: list[str] | None = None) -> tuple[bool, Any]:
    """(whether the sealed cache file at ``path`` held a payload, that payload as JSON, None when it is
    not JSON); why a file was discarded is appended to ``notes``."""
    entry = read(path, key, limit)
    if entry.note and notes is not None:
        notes.append(entry.note)
    if entry.payload is None:
        return False, None
    try:
        return True, json.loads(entry.payload)
    except ValueError:
        if notes is not None:
            notes.append(f"{os.path.basename(path)}: not JSON: discarded")
        return True, None


def _read_all(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            break
    return b"".join(chunks)


def _unsealed(data: bytes, key: bytes) -> str | None:
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + TAG_BYTES:
        return "not a megacpp-env cache file (or truncated)"
    tag, payload = data[len(MAGIC) : len(MAGIC) + TAG_BYTES], data[len(MAGIC) + TAG_BYTES :]
    if _tag(key, payload) != tag:
        return "its checksum does not match its content (edited, truncated or half-written)"
    return None


def write(path: str, payload: bytes, key: bytes | None) -> str | None:
    """Seal ``payload`` into ``path`` atomically (a temporary file, mode 0600, renamed over it).
    Returns a note when it could not be written (the next snapshot only does the work again)."""
    if key is None:
        return None
    import tempfile

    directory = os.path.dirname(path)
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".cache-", dir=directory)
    except OSError as exc:
        return f"{os.path.basename(path)}: not written ({exc.strerror or exc})"
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(MAGIC + _tag(key, payload) + payload)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return f"{os.path.basename(path)}: not written ({exc.strerror or exc})"
    return None


def write_json(path: str, value: object, key: bytes | None, notes: list[str]) -> None:
    """Seal ``value`` as JSON (sorted keys) into ``path``; a note when it could not be written."""
    import json

    note = write(path, json.dumps(value, sort_keys=True).encode(), key)
    if note:
        notes.append(note)


def load_key(directory: str, *, create: bool = True) -> tuple[bytes | None, str | None]:
    """(the cache directory's key, a note): None and why when the directory cannot be trusted or the
    key cannot be had; made (``create``) on first use, atomically (a link: two snapshots starting
    at once agree on one key)."""
    problem = dir_problem(directory)
    if problem is not None:
        return None, f"cache directory {directory} {problem}: caches not used"
    path = os.path.join(directory, KEY_NAME)
    entry = _read_key(path)
    if entry.payload is None and entry.note is None and create:
        _make_key(directory, path)
        entry = _read_key(path)
    if entry.payload is None:
        return None, entry.note or f"cache directory {directory}: no key could be made: caches not used"
    return entry.payload, None


def _read_key(path: str) -> Entry:
    info, why = _lstat(path)
    if info is None:
        return Entry(note=f"{path}: {why}" if why else None)
    problem = _problem(info, KEY_BYTES) or (
        None if info.st_size == KEY_BYTES else f"{info.st_size} bytes, not {KEY_BYTES}"
    )
    if problem is None and info.st_mode & 0o077:
        problem = f"readable by others (mode {info.st_mode & 0o777:04o})"
    if problem is not None:
        return Entry(note=f"{path}: {problem}: caches not used (remove it; a new key is made)")
    fd, why = _open(path)
    if fd is None:  # removed or replaced since the lstat
        return Entry(note=f"{path}: {why or 'removed while read'}: caches not used")
    try:
        again = os.fstat(fd)
        if (again.st_ino, again.st_dev) != (info.st_ino, info.st_dev):
            return Entry(note=f"{path}: replaced while read: caches not used")
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    return Entry(payload=data) if len(data) == KEY_BYTES else Entry(note=f"{path}: truncated: caches not used")


def _make_key(directory: str, path: str) -> None:
    import tempfile

    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".key-", dir=directory)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(KEY_BYTES))
        os.link(tmp, path)  # fails when another snapshot made it first: its key is the key
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def is_entry(name: str) -> bool:
    """A name this module writes (and a temporary file of it)."""
    return not name.startswith(".") or name.startswith(".cache-")
