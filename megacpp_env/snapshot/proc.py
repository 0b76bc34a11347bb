"""The one place collectors run external programs: argv lists, a hard timeout, never a shell.

A missing program or a timeout raises ``ToolError`` with a one-line reason that the collector
records ("nvidia-smi not found", "gcc timed out after 10s"); nothing here aborts a snapshot.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from megacpp_env.errors import ToolError, ToolNotFoundError
from megacpp_env.snapshot.tasks import Task


@dataclass(frozen=True, kw_only=True, slots=True)
class ProcResult:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def first_line(self) -> str:
        text = self.stdout.strip() or self.stderr.strip()
        return text.splitlines()[0].strip() if text else ""


def which(name: str, *, path: str | None = None) -> str | None:
    return shutil.which(name, path=path)


def run_program(
    argv: Sequence[str],
    *,
    timeout: float = 10.0,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    check: bool = True,
) -> ProcResult:
    """Run ``argv`` and capture its output as text; raise ``ToolError`` on timeout or failure."""
    name = Path(argv[0]).name
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except FileNotFoundError:
        raise ToolNotFoundError(f"{name} not found") from None
    except subprocess.TimeoutExpired:
        raise ToolError(f"{name} timed out after {timeout:g}s") from None
    except OSError as exc:
        raise ToolError(f"{name} could not run: {exc.strerror or exc}") from None
    result = ProcResult(argv=tuple(argv), returncode=done.returncode, stdout=done.stdout, stderr=done.stderr)
    if check and done.returncode != 0:
        detail = result.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise ToolError(f"{name} failed (exit {done.returncode}): {detail[0][:200]}")
    return result


def dialogue(
    argv: Sequence[str],
    reply: Callable[[str], str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> tuple[str, str]:
    """Run ``argv``, read the first line it prints, answer it with ``reply(line)`` on its stdin, and
    return (first line, the rest of its stdout). ``ToolError`` on a failure to start, a non-zero
    exit, or ``timeout`` (the program is killed and reaped)."""
    name = Path(argv[0]).name
    try:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            errors="replace", env=dict(env) if env is not None else None,
        )  # fmt: skip
    except FileNotFoundError:
        raise ToolNotFoundError(f"{name} not found") from None
    except OSError as exc:
        raise ToolError(f"{name} could not run: {exc.strerror or exc}") from None
    fired = threading.Event()

    def expire() -> None:
        fired.set()
        proc.kill()

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        answer = reply(first) if first.endswith("\n") else ""
        try:
            rest, err = proc.communicate(answer)
        except (BrokenPipeError, OSError):
            rest, err = proc.communicate()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if fired.is_set():
        raise ToolError(f"{name} timed out after {timeout:g}s")
    if proc.returncode != 0:
        detail = err.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        raise ToolError(f"{name} failed (exit {proc.returncode}): {detail[0][:200]}")
    return first, rest


class Running:
    """One program started now whose answer is collected later (``result``: what ``run_program``
    returns or raises) or not at all (``stop``: killed and reaped): a program run on the chance that
    a cache cannot answer for it."""

    def __init__(self, argv: Sequence[str], *, timeout: float = 10.0, env: Mapping[str, str] | None = None) -> None:
        self.argv, self.timeout = tuple(argv), timeout
        self.name = Path(argv[0]).name
        self.error: ToolError | None = None
        self.proc: subprocess.Popen[str] | None = None
        try:
            self.proc = subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                errors="replace", env=dict(env) if env is not None else None,
            )  # fmt: skip
        except FileNotFoundError:
            self.error = ToolNotFoundError(f"{self.name} not found")
        except OSError as exc:
            self.error = ToolError(f"{self.name} could not run: {exc.strerror or exc}")

    def result(self) -> ProcResult:
        if self.error is not None or self.proc is None:
            raise self.error or ToolError(f"{self.name} did not start")
        try:
            out, err = self.proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise ToolError(f"{self.name} timed out after {self.timeout:g}s") from None
        result = ProcResult(argv=self.argv, returncode=self.proc.returncode, stdout=out, stderr=err)
        if self.proc.returncode != 0:
            detail = result.stderr.strip().splitlines()[-1:] or [f"exit {self.proc.returncode}"]
            raise ToolError(f"{self.name} failed (exit {self.proc.returncode}): {detail[0][:200]}")
        return result

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.communicate()


class ProgramFailedError(ToolError):
    """A program of ``Programs`` exited non-zero (``returncode``: negative for the signal that killed it)."""

    def __init__(self, message: str, *, returncode: int) -> None:
        super().__init__(message)
        self.returncode = returncode


class Programs:
    """Programs started at once, each fed its stdin in parts: ``first`` as it starts, more with
    ``send`` (so each can begin while the caller works out the rest), the last with ``finish(rest)``,
    which closes stdin and waits for all; ``ToolError`` if any cannot start, fails or runs past
    ``timeout``."""

    def __init__(self, argvs: Sequence[Sequence[str]], first: Sequence[str], *, pass_fds: Sequence[int] = ()) -> None:
        self.argvs: list[list[str]] = []
        self.procs: list[subprocess.Popen[str]] = []
        self.add(argvs, first, pass_fds=pass_fds)

    def add(self, argvs: Sequence[Sequence[str]], first: Sequence[str], *, pass_fds: Sequence[int] = ()) -> None:
        """Start more programs, each on its first part; ``ToolError`` (every one killed) if one cannot start."""
        self.argvs += [list(a) for a in argvs]
        try:
            for argv, text in zip(self.argvs[len(self.procs) :], first, strict=True):
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    errors="replace",
                    pass_fds=tuple(pass_fds),
                )
                self.procs.append(proc)
                assert proc.stdin is not None
                proc.stdin.write(text)  # a line or two: within the pipe's buffer
                proc.stdin.flush()
        except OSError as exc:
            self.kill()
            name = Path(self.argvs[len(self.procs)][0]).name if len(self.procs) < len(self.argvs) else "program"
            raise ToolError(f"{name} could not start: {exc.strerror or exc}") from None

    def send(self, parts: Sequence[str]) -> None:
        """One more part of each program's stdin (a line, within the pipe's buffer)."""
        for proc, text in zip(self.procs, parts, strict=True):
            assert proc.stdin is not None
            try:
                proc.stdin.write(text)
                proc.stdin.flush()
            except BrokenPipeError:  # it exited already: ``finish`` reports why
                continue

    def kill(self) -> None:
        for proc in self.procs:
            _reap(proc)

    def stop(self) -> None:
        """Kill every program still running, from any thread, without waiting: whoever reads
        their output (``finish``, ``kill``) reaps them."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()

    def finish(
        self, rest: Sequence[str], *, timeout: float, meanwhile: Callable[[], None] | None = None
    ) -> list[ProcResult]:
        """``meanwhile`` runs once every program's last part is being written (by a thread each:
        a program that reads it only later holds up none of the others)."""

        def one(index: int) -> ProcResult:
            proc, argv = self.procs[index], self.argvs[index]
            late = threading.Event()  # the timeout counts the write too: one that never reads is killed

            def expire() -> None:
                late.set()
                proc.kill()

            timer = threading.Timer(timeout, expire)
            timer.start()
            try:
                _last_part(proc, rest[index])
                out, err = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                late.set()
            finally:
                timer.cancel()
            if late.is_set():
                _reap(proc)
                raise ToolError(f"{Path(argv[0]).name} timed out after {timeout:g}s")
            result = ProcResult(argv=tuple(argv), returncode=proc.returncode, stdout=out, stderr=err)
            if proc.returncode != 0:
                tail = (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
                raise ProgramFailedError(
                    f"{Path(argv[0]).name} failed (exit {proc.returncode}): {tail[:300]}", returncode=proc.returncode
                )
            return result

        tasks: list[Task[ProcResult]] = []
        try:
            try:
                for index in range(len(self.procs)):
                    tasks.append(Task(one, index, name="snapshot-program"))
                if meanwhile is not None:
                    meanwhile()
            except BaseException:
                self.stop()  # the threads' waits end with them
                raise
            finally:
                for task in tasks:
                    task.exception()  # every one waited for before any is reaped or reported
            return [task.result() for task in tasks]
        finally:
            for proc in self.procs:
                _reap(proc)


def _last_part(proc: subprocess.Popen[str], text: str) -> None:
    """``text`` in one write (the GIL released while the program reads it); ``communicate`` then
    closes stdin. Given to ``communicate``, it would go in ``PIPE_BUF`` pieces, each taking the GIL."""
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # it exited before reading it: its status and stderr say why
        proc.stdin.write(text)
        proc.stdin.flush()


def _reap(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc`` if it still runs, and wait for it (its pipes drained and closed)."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


def process_age() -> float | None:
    """Seconds since this process started (the kernel's clock-tick resolution), None off Linux."""
    try:
        stat = Path("/proc/self/stat").read_text(encoding="ascii")
        uptime = float(Path("/proc/uptime").read_text(encoding="ascii").split()[0])
        ticks = int(stat.rpartition(")")[2].split()[19])  # field 22, starttime, after the command name
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None
