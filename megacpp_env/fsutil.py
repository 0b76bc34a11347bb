"""Small filesystem helpers: atomic writes, bounded reads, user-given output paths, hashing.
Never prints, never exits.

Two rules hold for every file the tool writes or reads:
- a rename only ever replaces a regular file (never a device node, FIFO or socket): ``/dev/null``
  named as an output is written to, not replaced;
- nothing is read without a bound: an input is read up to a size limit (``/dev/zero`` as an input
  is a one-line error, not an endless read).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import hashlib
import json
import os
import secrets
import select
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from megacpp_env.errors import InputError, RefusedError

CHUNK = 1 << 20
MAX_INPUT_BYTES = 64 << 20  # the largest lock, manifest, snapshot or config file the tool reads


def _regular_size(path: Path) -> int | None:
    """The size of ``path`` when it is a regular file (symlinks followed), else None."""
    try:
        st = Path(path).stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def _refuse_special(path: Path) -> None:
    """Raise when ``path`` exists and a rename onto it would replace something that is not a file."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise RefusedError(f"{path} is {file_kind(st.st_mode)}, not a regular file; refusing to replace it")


def file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISREG, "a regular file"),
    )
    return next((what for test, what in kinds if test(mode)), "a special file")


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None) -> bool:
    """Write ``data`` to ``path`` atomically (temp file in the same dir, fsync, os.replace).

    Returns False, and leaves the file alone, when it already holds exactly ``data``. Refuses
    (RefusedError) to replace anything but a regular file or a symlink.
    """
    path = Path(path)
    _refuse_special(path)
    _sweep(path.parent.glob(f".{glob.escape(path.name)}.*.tmp"))  # what killed writers of it left
    if _regular_size(path) == len(data):
        same_mode = mode is None or (path.stat().st_mode & 0o7777) == mode
        if same_mode and read_bounded(path, len(data)) == data:
            return False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    fcntl.flock(fd, fcntl.LOCK_EX)  # held while this process lives: a SIGKILL releases it (see _sweep)
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


STALE_S = 60.0  # a leftover must be at least this old (and unlocked) before it is removed


def _sweep(leftovers: Iterable[Path]) -> None:
    """Remove the temp files (or directories) of writers that were killed: old enough, and their
    ``flock`` no longer held (a live writer holds it; the kernel drops it when a process dies)."""
    now = time.time()
    for stale in leftovers:
        try:
            st = os.lstat(stale)
        except FileNotFoundError:
            continue
        if now - st.st_mtime < STALE_S or not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            continue
        lock = stale / OWNER if stat.S_ISDIR(st.st_mode) else stale
        if _abandoned(lock):
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)


def _abandoned(lock: Path) -> bool:
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # a live process holds it
    finally:
        os.close(fd)
    return True


OWNER = ".owner"


@contextlib.contextmanager
def owned_tempdir(prefix: str) -> Iterator[Path]:
    """A temporary directory (``tempfile``'s location) that a SIGKILL cannot leave behind for good:
    its owner holds a ``flock`` on ``DIR/.owner``, and the next one made with the same prefix removes
    old directories whose owner is gone."""
    base = Path(tempfile.gettempdir())
    _sweep(base.glob(f"{glob.escape(prefix)}*"))
    path = Path(tempfile.mkdtemp(prefix=prefix))
    fd = os.open(path / OWNER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield path
    finally:
        os.close(fd)
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def staging_dir(parent: Path, prefix: str) -> Iterator[Path]:
    """A new directory ``parent/<prefix>XXXXXXXX`` to make something in before renaming it into
    place. Its maker holds a ``flock`` on the directory itself (it follows a rename; the kernel drops
    it when the process dies), so the next maker with the same prefix removes what killed runs left
    (``sweep_staging``). Removed here when the block raises; the caller renames it on success."""
    sweep_staging(parent, prefix)
    path, fd = _locked_mkdtemp(parent, prefix)
    try:
        yield path
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    finally:
        os.close(fd)


def _locked_mkdtemp(parent: Path, prefix: str) -> tuple[Path, int]:
    while True:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits while a sweeper that took it first removes it
        with contextlib.suppress(FileNotFoundError):
            if os.lstat(path).st_ino == os.fstat(fd).st_ino:
                return path, fd
        os.close(fd)


def sweep_staging(parent: Path, prefix: str, *, suffix: str = "", dir_fd: int | None = None) -> list[str]:
    """Remove ``parent``'s entries named ``<prefix>*<suffix>`` (``dir_fd``: the directory open, then
    ``parent`` is only named) that are this user's directories or files and that no live process
    holds (``flock``). The lock is held while removing, so a maker that races with the sweep sees
    its directory gone and makes another. Returns the names removed."""
    removed: list[str] = []
    try:
        listed = os.listdir(parent if dir_fd is None else dir_fd)  # noqa: PTH208 (takes a dir_fd)
        names = [n for n in listed if n.startswith(prefix) and n.endswith(suffix)]
    except OSError:
        return removed
    for name in names:
        where = name if dir_fd is not None else str(Path(parent) / name)
        try:
            st = os.lstat(where, dir_fd=dir_fd)
            if st.st_uid != os.getuid() or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
                continue
            fd = os.open(where, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a live process holds it
        try:
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(where, ignore_errors=True, dir_fd=dir_fd)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(where, dir_fd=dir_fd)
            removed.append(name)
        finally:
            os.close(fd)
    return removed


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> bool:
    return atomic_write_bytes(path, text.encode("utf-8"), mode=mode)


def atomic_symlink(path: Path, target: str) -> bool:
    """Make ``path`` a symlink to ``target`` atomically (a temp link beside it, os.replace). Returns
    False when it already is one. Refuses (RefusedError) to replace anything but a regular file or a
    symlink."""
    path = Path(path)
    _refuse_special(path)
    if path.is_symlink() and os.readlink(path) == target:  # noqa: PTH115 (Path.readlink normalises the text)
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    tmp.symlink_to(target)  # fails, rather than follows anything, should the name be taken
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return True


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


# ---- user-given output paths ---------------------------------------------------------------------


def check_output_path(path: Path, *, option: str = "--output", example: str = "out.json") -> Path:
    """Refuse, before any work is done, an output path that cannot be written: a directory, a missing
    or unwritable parent directory. Special files (``/dev/null``, a FIFO) are accepted: they are
    written to, never replaced."""
    path = Path(path)
    st = _stat_or_none(path, lambda why: InputError(f"{path}: {why}", key=option))
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError(f"{path} is a directory; name a file (e.g. {path / example})", key=option)
    if st is not None and not stat.S_ISREG(st.st_mode):
        return path  # a device or FIFO: written in place
    parent = path.parent if st is None else Path(os.path.realpath(path)).parent
    blocker = next((p for p in (parent, *parent.parents) if p.exists() and not p.is_dir()), None)
    if blocker is not None:
        raise InputError(f"{path}: {blocker} is not a directory", key=option)
    if not parent.is_dir():
        raise InputError(f"{path}: directory {parent} does not exist", key=option)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{path}: directory {parent} is not writable", key=option)
    return path


def _stat_or_none(path: Path, error: Callable[[str], InputError]) -> os.stat_result | None:
    """``path``'s stat through symlinks; None when there is nothing there; ``error(why)`` raised else."""
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise error(str(exc.strerror or exc)) from None


OUTPUT_WAIT_ENV = "MEGACPP_ENV_OUTPUT_WAIT"  # seconds a FIFO output waits for its reader (to open it, to read)
OUTPUT_WAIT_S = 30.0


def write_output(path: Path, data: bytes) -> bool:
    """Write a user-given output: a regular file (or a new path) atomically, through symlinks to the
    file they name; anything else (``/dev/null``, ``/dev/stdout``, a FIFO) by a plain write, never by a
    rename. Returns False when a regular file already held ``data``. Every way the write can fail (a
    full disk or ``/dev/full``, a FIFO nobody reads, a reader that went away) is an ``InputError``
    naming the file; none blocks for good (``_write_special``)."""
    path = Path(path)
    st = _stat_or_none(path, lambda why: InputError(f"cannot write: {why}", file=str(path)))
    if st is None or stat.S_ISREG(st.st_mode):
        try:
            return atomic_write_bytes(Path(os.path.realpath(path)), data)
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror or exc}", file=str(path)) from None
    if stat.S_ISDIR(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        raise InputError(f"is {file_kind(st.st_mode)}; name a file", file=str(path))
    _write_special(path, data, fifo=stat.S_ISFIFO(st.st_mode))
    return True


def _write_special(path: Path, data: bytes, *, fifo: bool) -> None:
    """Write ``data`` to a device or FIFO in place, never blocking for good: a FIFO's reader must open
    it, and then take more, within ``$MEGACPP_ENV_OUTPUT_WAIT`` seconds (default 30) each time."""
    wait = _output_wait()
    fd = _open_special(path, wait if fifo else 0.0)
    try:
        _write_all(fd, memoryview(data), wait)
    except BrokenPipeError:
        raise InputError("its reader went away before the output was written", file=str(path)) from None
    except TimeoutError:
        raise InputError(f"its reader took nothing for {wait:g}s ({OUTPUT_WAIT_ENV})", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc}", file=str(path)) from None
    finally:
        os.close(fd)


def _output_wait() -> float:
    """``$MEGACPP_ENV_OUTPUT_WAIT`` (seconds, positive), else ``OUTPUT_WAIT_S``. Read here rather than with
    ``toolrun.env_seconds``: fsutil is in the source builds' import closure, which stays small."""
    raw = os.environ.get(OUTPUT_WAIT_ENV, "").strip()
    try:
        value = float(raw) if raw else OUTPUT_WAIT_S
    except ValueError:
        value = 0.0
    if not 0 < value < 1e7:
        raise InputError(f"{OUTPUT_WAIT_ENV}={raw[:40]!r}: expected a positive number of seconds")
    return value


def _open_special(path: Path, wait: float) -> int:
    """``path`` opened to write without blocking; a FIFO with no reader (ENXIO) is tried again for
    ``wait`` seconds (a reader started just after the writer), then refused."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno != errno.ENXIO or not wait:
                raise InputError(f"cannot write: {exc.strerror or exc}", file=str(path)) from None
        if time.monotonic() >= deadline:
            raise InputError(
                f"is a FIFO that nobody read within {wait:g}s ({OUTPUT_WAIT_ENV}): start its reader first",
                file=str(path),
            )
        time.sleep(0.05)


def _write_all(fd: int, view: memoryview, wait: float) -> None:
    """Every byte of ``view`` to the non-blocking ``fd``, waiting at most ``wait`` seconds for room."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while view:
        try:
            view = view[os.write(fd, view) :]
            continue
        except BlockingIOError:
            pass
        if not poller.poll(wait * 1000):
            raise TimeoutError


# ---- bounded reads ---------------------------------------------------------------------------------


def read_bounded(path: Path, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of ``path``, refusing (InputError) a directory or anything longer than ``limit``.
    A regular file, or a pipe the shell made (``<(git show ...)``, ``/dev/stdin`` from a pipe) is
    read up to the limit; a named FIFO, a device or a socket is refused without blocking (a FIFO
    nobody writes would wait forever)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise InputError("is a directory, not a file", file=str(path)) from None
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        os.close(fd)
        raise InputError("is a directory, not a file", file=str(path))
    if not stat.S_ISREG(mode) and not _anonymous_pipe(fd):
        os.close(fd)
        raise InputError(f"is {file_kind(mode)}, not a regular file; refusing to read it", file=str(path))
    os.set_blocking(fd, True)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"larger than {limit} bytes; refusing to read it", file=str(path))
    return data


def read_regular(path: Path, *, limit: int = MAX_INPUT_BYTES, root: Path | None = None) -> bytes:
    """The bytes of the regular file ``path`` (symlinks followed), bounded. Anything else is refused
    without blocking: a FIFO (opened non-blocking, so no writer is waited for), a device, a socket, a
    directory. With ``root``, a file whose real path is outside ``root`` (through a symlink or ``..``)
    is refused too. Errors are ``InputError`` naming the file."""
    if root is not None:
        real, top = os.path.realpath(path), os.path.realpath(root)
        if real != top and not real.startswith(top.rstrip("/") + "/"):
            raise InputError(f"leaves the tree {root} (it resolves to {real}); refusing to read it", file=str(path))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise InputError("no such file", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(f"is {file_kind(mode)}, not a regular file; refusing to read it", file=str(path))
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise InputError(f"larger than {limit} bytes; refusing to read it", file=str(path))
    return data


def read_regular_text(path: Path, *, limit: int = MAX_INPUT_BYTES, root: Path | None = None) -> str:
    """``read_regular``, decoded as UTF-8 (a BOM dropped); a one-line error names the first bad byte."""
    return _decode(read_regular(path, limit=limit, root=root), path)


def _decode(data: bytes, path: Path) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})", file=str(path)
        ) from None


def _anonymous_pipe(fd: int) -> bool:
    """True for a pipe with no name (process substitution, a shell pipe): it has a writer already."""
    try:
        return str(Path(f"/proc/self/fd/{fd}").readlink()).startswith("pipe:")
    except OSError:
        return False


def read_text_input(path: Path, *, limit: int = MAX_INPUT_BYTES) -> str:
    """A UTF-8 text input (a UTF-8 BOM is allowed and dropped), bounded; one-line errors otherwise."""
    try:
        data = read_bounded(path, limit)
    except FileNotFoundError:
        raise InputError("no such file", file=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    return _decode(data, path)


# ---- hashing -----------------------------------------------------------------------------------------


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
