"""The one place collectors run external programs: argv lists, a hard timeout, never a shell.

A missing program or a timeout raises ``ToolError`` with a one-line reason that the collector
records ("nvidia-smi not found", "gcc timed out after 10s"); nothing here aborts a snapshot.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from megacpp_env.errors import ToolError, ToolNotFoundError


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


def run_programs(
    jobs: Sequence[tuple[Sequence[str], str]], *, timeout: float, started: Callable[[], None] | None = None
) -> list[ProcResult]:
    """Start several programs (all of them first, then ``started()``), feed each its stdin text,
    wait for all; ``ToolError`` if any fails."""
    from concurrent.futures import ThreadPoolExecutor

    procs: list[subprocess.Popen[str]] = []
    try:
        for argv, _text in jobs:
            procs.append(
                subprocess.Popen(
                    list(argv),
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    errors="replace",
                )
            )
    except OSError as exc:
        for proc in procs:
            proc.kill()
        raise ToolError(f"{Path(jobs[len(procs)][0][0]).name} could not start: {exc.strerror or exc}") from None
    if started is not None:
        started()

    def one(index: int) -> ProcResult:
        proc, (argv, text) = procs[index], jobs[index]
        try:
            out, err = proc.communicate(text, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise ToolError(f"{Path(argv[0]).name} timed out after {timeout:g}s") from None
        result = ProcResult(argv=tuple(argv), returncode=proc.returncode, stdout=out, stderr=err)
        if proc.returncode != 0:
            tail = (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise ToolError(f"{Path(argv[0]).name} failed (exit {proc.returncode}): {tail[:300]}")
        return result

    with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
        return list(pool.map(one, range(len(jobs))))


def process_age() -> float | None:
    """Seconds since this process started (the kernel's clock-tick resolution), None off Linux."""
    try:
        stat = Path("/proc/self/stat").read_text(encoding="ascii")
        uptime = float(Path("/proc/uptime").read_text(encoding="ascii").split()[0])
        ticks = int(stat.rpartition(")")[2].split()[19])  # field 22, starttime, after the command name
        return max(0.0, uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None
