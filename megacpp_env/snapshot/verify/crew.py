"""Integrity workers that claim their work from one shared queue, as each becomes free.

Dealt up front, the work ended unevenly: on the H200 the workers' finishing times spread over
0.16 s of a 0.75 s full snapshot (a file hashes slower beside a busy neighbour than the cost model
says). Here every worker reads the same list of work (the big files to hash, then the units to
verify, costliest first) and claims items from one pipe holding their indices: a read of one
4-byte index is atomic, so each item goes to exactly one worker, the first that is free. The
parent never hands anything out, so a busy parent (the GIL shared with the collectors) delays
nobody.

The protocol (``integrity_worker.main``): the queue's read end is the worker's last argument;
stdin carries the setup line (the big files, the cache directory, how to hash, how much to yield)
and, later, the units line; the queue carries indices: ``0 .. len(big)-1`` the big files, then the
units. A worker reads the units line when it first claims a unit.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
from collections.abc import Callable, Sequence

from megacpp_env.errors import ToolError
from megacpp_env.snapshot.proc import ProcResult, Programs

INDEX_BYTES = 4  # one little-endian index per claim
WRITE_BATCH = select.PIPE_BUF // INDEX_BYTES  # indices per write: each write is atomic


def _queue_pipe() -> tuple[int, int]:
    """The queue's two ends, both numbered 3 or above: a process started with stdin, stdout or
    stderr closed would get one of those numbers for an end, and a worker's own stdin, stdout or
    stderr would then take its place (the worker reading indices from its stdin)."""
    try:
        read, write = os.pipe()
    except OSError as exc:
        raise ToolError(f"integrity: no pipe for the work queue: {exc.strerror or exc}") from None
    ends, owned = [read, write], {read, write}
    try:
        for i, fd in enumerate(ends):
            if fd < 3:
                ends[i] = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
                owned.add(ends[i])
                owned.discard(fd)
                os.close(fd)
    except OSError as exc:
        for fd in owned:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise ToolError(f"integrity: no pipe for the work queue: {exc.strerror or exc}") from None
    return ends[0], ends[1]


def encode(indices: range) -> list[bytes]:
    """The indices as the queue carries them, in writes of at most ``PIPE_BUF`` bytes."""
    out = []
    for first in range(indices.start, indices.stop, WRITE_BATCH):
        last = min(first + WRITE_BATCH, indices.stop)
        out.append(b"".join(i.to_bytes(INDEX_BYTES, "little") for i in range(first, last)))
    return out


class Crew:
    """``count`` workers (``argv`` plus the queue's read end) and the queue they claim from."""

    def __init__(self, argv: Sequence[str], count: int, track: Callable[[Programs], None] | None = None) -> None:
        self._read, self._write = _queue_pipe()
        self._argv = [*argv, str(self._read)]
        self._track = track
        self._queued = 0
        try:
            self.programs = self._start(count)
        except BaseException:
            self._close_read()
            self._close_write()
            raise

    def _start(self, count: int) -> Programs:
        programs = Programs([self._argv] * count, [""] * count, pass_fds=(self._read,))
        if self._track is not None:
            self._track(programs)
        return programs

    @property
    def size(self) -> int:
        return len(self.programs.procs)

    def grow(self, count: int) -> None:
        """As many as ``count`` workers (before ``begin``): the others start now."""
        if count > self.size:
            self.programs.add([self._argv] * (count - self.size), [""] * (count - self.size), pass_fds=(self._read,))
            if self._track is not None:
                self._track(self.programs)

    def begin(self, setup: str, count: int) -> None:
        """Every worker gets ``setup`` (one line) and may claim the first ``count`` items at once.
        No worker is started after this."""
        self._close_read()
        self.programs.send([setup] * self.size)
        self._queue(count)

    def finish(self, line: str, count: int, *, timeout: float) -> list[ProcResult]:
        """Every worker gets ``line`` (the units), then ``count`` more items are queued and the
        queue closed: each worker exits once it finds the queue empty."""

        def queue_rest() -> None:
            try:
                self._queue(count)
            finally:
                self._close_write()

        self._close_read()
        try:
            return self.programs.finish([line] * self.size, timeout=timeout, meanwhile=queue_rest)
        finally:
            self._close_write()  # also where the rest was never queued: no worker waits on the queue

    def _queue(self, count: int) -> None:
        indices = range(self._queued, self._queued + count)
        self._queued += count
        try:
            for chunk in encode(indices):
                os.write(self._write, chunk)
        except BrokenPipeError:  # every worker exited already: ``finish`` reports why
            return

    def kill(self) -> None:
        self.programs.kill()
        self._close_read()
        self._close_write()

    def _close_read(self) -> None:
        if self._read >= 0:
            os.close(self._read)
            self._read = -1

    def _close_write(self) -> None:
        if self._write >= 0:
            os.close(self._write)
            self._write = -1
