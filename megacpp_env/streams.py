"""The program's standard streams, made safe once when it starts (``guard_standard_streams``, from
``cli.entry``), and what a verb's result that cannot reach standard output is (``OutputError``).

* A descriptor 0-2 closed when the program started (``>&-``, ``2>&-``) is opened on ``/dev/null``, so
  no file the run opens takes its number (a child, or a later write, would go into that file).
* Standard output that cannot take the result (closed at start, ``/dev/full``, a read-only
  descriptor) is an ``OutputError``: exit 1, one line on stderr. An empty result (``sbom --output
  FILE``) needs no standard output, so that verb finishes its file and exits 0.
* Standard error that cannot be written is dropped: there is nowhere else to say so, and the exit
  status still tells.
* A reader that went away (``| head``) stays a ``BrokenPipeError`` (the handler's exit 0).

After the first failure a stream's descriptor points at ``/dev/null``: later writes and the
interpreter's last flush go nowhere instead of failing again. Stdlib only (``--help`` imports it).
"""

from __future__ import annotations

import io
import os
import sys
from typing import TextIO

from megacpp_env.errors import MegacppEnvError


class OutputError(MegacppEnvError, OSError):
    """Standard output cannot take a verb's result (closed, full, not writable): exit 1. An ``OSError``
    too, so what swallows a failed write (argparse's ``--help``) swallows this one; ``flush_output``
    raises it again at the end."""


class _Guarded(io.TextIOBase):
    """``sys.stdout`` or ``sys.stderr`` of the program: writes go to ``inner`` (None: the descriptor was
    closed when the program started). The first write that fails, or the first non-empty write to a
    closed standard output, stops the stream: an ``OutputError`` for standard output, nothing for
    standard error. Its descriptor is then pointed at ``/dev/null``, so later writes and the
    interpreter's last flush go nowhere instead of failing again. A closed pipe (``| head``) stays a
    ``BrokenPipeError`` (the handler's exit 0)."""

    def __init__(self, inner: TextIO | None, fd: int, name: str, *, results: bool) -> None:
        super().__init__()
        self.inner = inner
        self.fd = fd
        self.label = name
        self.results = results  # standard output: what cannot be written there is an error
        self.failed = ""  # why the stream stopped taking output ("" while it works)
        self.pipe = False  # it stopped because its reader went away (not an error)

    def write(self, text: str) -> int:
        if not text or self.failed:
            return len(text)
        if self.inner is None:
            return self._fail("it was closed when megacpp-env started", len(text))
        try:
            return self.inner.write(text)
        except BrokenPipeError:
            self._fail("its reader went away", 0, pipe=True)
            raise
        except (OSError, ValueError) as exc:
            return self._fail(_why(exc), len(text))

    def flush(self) -> None:
        if self.inner is None or self.failed:
            return
        try:
            self.inner.flush()
        except BrokenPipeError:
            self._fail("its reader went away", 0, pipe=True)
            raise
        except (OSError, ValueError) as exc:
            self._fail(_why(exc), 0)

    def _fail(self, why: str, size: int, *, pipe: bool = False) -> int:
        self.failed, self.pipe = why, pipe
        _null_fd(self.fd)  # what the original stream still buffers goes there at exit
        if self.lost():
            raise OutputError(self.message())
        return size

    def lost(self) -> bool:
        """A result did not reach standard output (a closed pipe is not counted: ``| head`` is fine)."""
        return bool(self.failed) and self.results and not self.pipe

    def message(self) -> str:
        return (
            f"cannot write the result to {self.label}: {self.failed} (run it with {self.label} open, or "
            "give --output FILE where the verb takes one)"
        )

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.inner is not None and not self.failed and bool(getattr(self.inner, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self.fd

    @property  # read from the stream it wraps
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.inner, "encoding", None) or "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.inner, "errors", None)


def _why(exc: BaseException) -> str:
    return (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)) or type(exc).__name__


def _null_fd(fd: int) -> None:
    """Point descriptor ``fd`` at ``/dev/null`` (inherited by children, as a standard stream is)."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    if null != fd:
        os.dup2(null, fd)
        os.close(null)
    else:
        os.set_inheritable(fd, True)


def guard_standard_streams() -> None:
    """Make the program's standard streams safe to use (see the module docstring). Called once by
    the console script before anything else; a stream a caller replaced (a test's capture) is left
    as it is."""
    closed = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            closed.append(fd)
            _null_fd(fd)  # in order: each takes the lowest free number, which is this one
    if sys.stdin is None or 0 in closed:
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 (the process's stdin)
    if sys.stdout is None or sys.stdout is sys.__stdout__:
        sys.stdout = _Guarded(None if 1 in closed else sys.stdout, 1, "standard output", results=True)
    if sys.stderr is None or sys.stderr is sys.__stderr__:
        sys.stderr = _Guarded(None if 2 in closed else sys.stderr, 2, "standard error", results=False)


def flush_output() -> None:
    """Flush standard output at the end of a verb: a result that did not reach it, even where a verb
    or argparse caught the first ``OutputError``, is one here (before exit 0 says all went well)."""
    out = sys.stdout
    if out is None:
        return
    out.flush()
    if isinstance(out, _Guarded) and out.lost():
        raise OutputError(out.message())
