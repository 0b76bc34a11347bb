"""User-given output paths and bounded reads (issue 12, class 5): a special file is written to, never
replaced by a rename; nothing is read without bound. Device nodes are made in the test's own temporary
directory (``os.mknod``, as root), never the machine's /dev."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from megacpp_env import errors, fsutil

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="os.mknod of a character device needs root")


def _device(path, minor):
    """A character device with the numbers of /dev/null (1, 3) or /dev/zero (1, 5), in a temp dir."""
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    return path


def _is_char_device(path):
    return stat.S_ISCHR(os.lstat(path).st_mode)


@needs_root
def test_write_output_to_a_null_device_writes_and_keeps_the_node(tmp_path):
    null = _device(tmp_path / "null", 3)
    assert fsutil.write_output(null, b"snapshot\n")
    assert _is_char_device(null)
    assert not [p for p in tmp_path.iterdir() if p.name != "null"]  # no temp file left beside it


@needs_root
def test_atomic_write_refuses_to_replace_a_device(tmp_path):
    null = _device(tmp_path / "null", 3)
    with pytest.raises(errors.RefusedError, match="is a character device, not a regular file"):
        fsutil.atomic_write_bytes(null, b"x")
    assert _is_char_device(null)


@needs_root
def test_a_zero_device_is_not_read_without_bound(tmp_path):
    zero = _device(tmp_path / "zero", 5)
    with pytest.raises(errors.InputError, match="is a character device, not a regular file"):
        fsutil.read_bounded(zero, 1024)
    assert fsutil.write_output(zero, b"x" * 10)  # as an output it is written to (and discards), not read
    assert _is_char_device(zero)


def test_write_output_to_a_fifo_and_through_a_symlink_to_it(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "stdout"  # like /dev/stdout -> /proc/self/fd/1
    link.symlink_to(fifo)
    got = []

    def reader():
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    for target in (fifo, link):
        t = threading.Thread(target=reader)
        t.start()
        assert fsutil.write_output(target, b"doc\n")
        t.join(timeout=10)
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert got == [b"doc\n", b"doc\n"]
    assert link.is_symlink()


def test_regular_files_are_written_atomically_and_symlinks_kept(tmp_path):
    real = tmp_path / "real.json"
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert fsutil.write_output(link, b"one\n")
    assert link.is_symlink() and real.read_bytes() == b"one\n"
    assert not fsutil.write_output(link, b"one\n")  # unchanged: not rewritten
    assert fsutil.write_output(tmp_path / "new.json", b"two\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "new.json", "real.json"]


def test_check_output_path(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert fsutil.check_output_path(fifo) == fifo
    with pytest.raises(errors.InputError, match="is a directory"):
        fsutil.check_output_path(tmp_path)
    with pytest.raises(errors.InputError, match="does not exist"):
        fsutil.check_output_path(tmp_path / "no" / "x.json")


def test_text_inputs(tmp_path):
    f = tmp_path / "x.toml"
    f.write_bytes(b"\xef\xbb\xbfa = 1\n")
    assert fsutil.read_text_input(f) == "a = 1\n"  # a UTF-8 BOM is allowed
    f.write_bytes(b"a = \xff\n")
    with pytest.raises(errors.InputError, match=r"not UTF-8 text \(byte 0xff at offset 4\)"):
        fsutil.read_text_input(f)
    with pytest.raises(errors.InputError, match="is a directory"):
        fsutil.read_text_input(tmp_path)
    with pytest.raises(errors.InputError, match="no such file"):
        fsutil.read_text_input(tmp_path / "missing")


@needs_root
def test_snapshot_output_to_a_device_or_fifo(tmp_path, monkeypatch, snap_venv, capsys):
    """``snapshot -o /dev/null`` as root replaced /dev/null with a regular file (the atomic rename hit
    the node); ``-o /dev/zero`` read it without bound. Both on nodes made in tmp_path."""
    from megacpp_env.cli import main

    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    base = ["snapshot", "--spec", str(tmp_path / "none.yaml"), "--python", str(snap_venv.python)]
    for name, minor in (("null", 3), ("zero", 5)):
        node = _device(tmp_path / name, minor)
        assert main([*base, "-o", str(node)]) == 0, capsys.readouterr().err
        assert _is_char_device(node)
    assert not list(tmp_path.glob(".*.tmp"))


# ---- leftovers of killed writers are swept (issue 12, class 8) ----------------------------------------

WRITER = """
import sys
from pathlib import Path
from megacpp_env.fsutil import atomic_write_bytes
while True:
    atomic_write_bytes(Path(sys.argv[1]), b"x" * (8 << 20))
"""


def _killed_writer_leftovers(target, count=3):
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    for _ in range(count):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(target)], env={**os.environ, "PYTHONPATH": str(repo)}
        )
        deadline = time.monotonic() + 20
        while not list(target.parent.glob(f".{target.name}.*.tmp")) and time.monotonic() < deadline:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return list(target.parent.glob(f".{target.name}.*.tmp"))


def test_temp_files_of_killed_writers_are_swept_but_not_a_live_ones(tmp_path):
    import fcntl

    target = tmp_path / "out.bin"
    leftovers = _killed_writer_leftovers(target)
    assert leftovers  # a SIGKILL leaves the temp file of the write it interrupted
    live = tmp_path / f".{target.name}.live.tmp"
    live.write_bytes(b"being written")
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a writer that is still alive holds its lock
    for p in [*leftovers, live]:
        os.utime(p, (0, 0))  # old enough to be considered
    try:
        fsutil.atomic_write_bytes(target, b"next write")
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, live.name])
    finally:
        os.close(fd)


def test_owned_temp_dirs_of_killed_owners_are_swept(tmp_path, monkeypatch):
    import fcntl
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead, alive = tmp_path / "megacpp-lock-dead", tmp_path / "megacpp-lock-alive"
    for d in (dead, alive):
        d.mkdir()
        (d / ".owner").write_bytes(b"")
        (d / "pyproject.toml").write_text("x")
    fd = os.open(alive / ".owner", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    for d in (dead, alive):
        os.utime(d, (0, 0))
    try:
        with fsutil.owned_tempdir("megacpp-lock-") as mine:
            assert mine.is_dir() and mine.parent == tmp_path
        assert sorted(p.name for p in tmp_path.iterdir()) == ["megacpp-lock-alive"]
    finally:
        os.close(fd)


def test_atomic_symlink_replaces_files_and_links_not_directories(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from megacpp_env.fsutil import atomic_symlink

    p = tmp_path / "d" / "link"
    assert atomic_symlink(p, "./a//b") and os.readlink(p) == "./a//b"  # the raw text, not normalised
    assert not atomic_symlink(p, "./a//b")
    p.unlink()
    p.write_text("a file")
    assert atomic_symlink(p, "../x") and os.readlink(p) == "../x"
    (tmp_path / "dir").mkdir()
    with pytest.raises(errors.RefusedError, match="is a directory, not a regular file"):
        atomic_symlink(tmp_path / "dir", "x")
    assert not list(p.parent.glob(".*.tmp"))


# ---- issue 19: readers refuse non-regular files without blocking -----------------------------------


def test_a_named_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "f.toml"
    os.mkfifo(fifo)
    for read in (fsutil.read_bounded, fsutil.read_text_input, fsutil.read_regular, fsutil.read_regular_text):
        with pytest.raises(errors.InputError, match=r"f\.toml: is a FIFO, not a regular file; refusing to read it"):
            read(fifo)


def test_a_shell_pipe_is_still_read(tmp_path):
    r, w = os.pipe()
    os.write(w, b"a = 1\n")
    os.close(w)
    try:
        assert fsutil.read_text_input(f"/proc/self/fd/{r}") == "a = 1\n"  # what <(git show ...) names
    finally:
        os.close(r)


def test_read_regular_refuses_what_leaves_the_tree(tmp_path):
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    (outside / "x").write_text("secret\n")
    (tree / "link").symlink_to(outside / "x")
    (tree / "in").write_text("ok\n")
    assert fsutil.read_regular_text(tree / "in", root=tree) == "ok\n"
    for path in (tree / "link", tree / ".." / "outside" / "x"):
        with pytest.raises(errors.InputError, match=f"leaves the tree {tree}"):
            fsutil.read_regular(path, root=tree)
    (tree / "bad").write_bytes(b"\xff")
    with pytest.raises(errors.InputError, match="not UTF-8 text"):
        fsutil.read_regular_text(tree / "bad")


# ---- outputs that cannot take the bytes (issue 31, defect 2) ---------------------------------------


@pytest.mark.parametrize("target", ["/dev/full", "fifo-no-reader", "socket"])
def test_write_output_that_cannot_be_written_is_one_error_never_a_hang(tmp_path, monkeypatch, target):
    import socket
    import time

    monkeypatch.setenv("MEGACPP_ENV_OUTPUT_WAIT", "0.5")
    if target == "fifo-no-reader":
        path = tmp_path / "fifo"
        os.mkfifo(path)
    elif target == "socket":
        path = tmp_path / "sock"
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
    else:
        path = target
    started = time.monotonic()
    with pytest.raises(errors.InputError) as exc:
        fsutil.write_output(path, b"x" * 100_000)
    assert time.monotonic() - started < 10
    assert str(exc.value).startswith(f"{path}: ")
    why = {"/dev/full": "No space left on device", "fifo-no-reader": "nobody read", "socket": "is a socket"}
    assert why[target] in str(exc.value)


def test_a_fifo_reader_that_stalls_or_leaves_fails_the_write(tmp_path, monkeypatch):
    monkeypatch.setenv("MEGACPP_ENV_OUTPUT_WAIT", "0.5")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    holder = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a reader that never reads
    try:
        with pytest.raises(errors.InputError, match=r"its reader took nothing for 0\.5s"):
            fsutil.write_output(fifo, b"x" * (4 << 20))
    finally:
        os.close(holder)

    def leaver():
        fd = os.open(fifo, os.O_RDONLY)
        os.read(fd, 10)
        os.close(fd)

    t = threading.Thread(target=leaver)
    t.start()
    with pytest.raises(errors.InputError, match="its reader went away"):
        fsutil.write_output(fifo, b"x" * (4 << 20))
    t.join(timeout=10)


def test_a_fifo_reader_started_after_the_writer_gets_the_bytes(tmp_path):
    import time

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []

    def late_reader():
        time.sleep(0.3)
        with open(fifo, "rb") as fh:
            got.append(fh.read())

    t = threading.Thread(target=late_reader)
    t.start()
    assert fsutil.write_output(fifo, b"doc\n" * 50_000)
    t.join(timeout=10)
    assert got == [b"doc\n" * 50_000]


def test_sbom_output_to_a_full_device_or_an_unread_fifo_is_a_user_error(tmp_path, monkeypatch, capsys):
    from megacpp_env.cli import main
    from tests.fixtures.spec import STACK_YAML

    monkeypatch.setenv("MEGACPP_ENV_OUTPUT_WAIT", "0.5")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target, why in (("/dev/full", "No space left on device"), (str(fifo), "nobody read")):
        assert main(["sbom", "smoke", "--spec", str(STACK_YAML), "--output", target]) == 1
        err = capsys.readouterr().err
        assert why in err and "Traceback" not in err and err.count("\n") == 1
