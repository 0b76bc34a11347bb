"""Small filesystem helpers: atomic writes and hashing. Never prints, never exits."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> bool:
    """Write ``data`` to ``path`` atomically (temp file in the same dir, fsync, os.replace).

    Returns False, and leaves the file alone, when it already holds exactly ``data``.
    """
    path = Path(path)
    try:
        if path.read_bytes() == data and (mode is None or (path.stat().st_mode & 0o7777) == mode):
            return False
    except (FileNotFoundError, NotADirectoryError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode if mode is not None else 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return True


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> bool:
    return atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def canonical_json(obj: Any) -> str:
    """Sorted keys, no whitespace, ASCII: the one serialisation every content hash is taken over."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def canonical_hash(obj: Any) -> str:
    """sha256 (hex) of ``canonical_json(obj)``."""
    return sha256_bytes(canonical_json(obj).encode())
