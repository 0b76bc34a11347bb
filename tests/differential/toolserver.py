"""A fork server for one copy of megacpp-env: the differential corpus's only way to run the tool.

Started as ``python -s toolserver.py`` with ``PYTHONPATH`` naming the tool root (a directory
holding ``megacpp_env/``), it imports that copy's CLI and the verbs the corpus calls once, says
which file it imported (``{"tool": path}``), then answers one JSON request per line on stdin:

    {"argv": [...], "env": {...}, "cwd": "...", "timeout": seconds}
 -> {"code": int or null, "stdout": str, "stderr": str, "seconds": float, "timed_out": bool,
     "peak_kib": the call's peak resident memory (its own process, not its children)}

Each request runs ``megacpp_env.cli.main(argv)`` in a forked child: the import is paid once, yet
every call starts from the same pristine module state (no in-memory cache or module global leaks
from one call into the next, as with separate processes), with the environment, working directory
and ``sys.argv`` the request names, stdin from /dev/null, stdout and stderr captured to files. A
child that outlives its timeout is killed with its whole process group (its integrity workers,
git, the probe) and answered with ``timed_out``: a hang is an answer, never a stuck test run.

Standard library only, and no import of the tests package: it runs against any tool copy.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import json
import os
import resource
import select
import signal
import sys
import tempfile
import time
from typing import IO, Any

GROUP_WAIT = 5.0  # seconds a call's leftover processes may run on before they are killed
PR_SET_CHILD_SUBREAPER = 36
MEMORY_CAP = 4 << 30  # bytes of address space per call, its child processes each the same

# Imported up front so that a forked call pays none of it (a module missing from a copy is skipped).
PRELOAD = (
    "megacpp_env.cli",
    "megacpp_env.commands.snapshot",
    "megacpp_env.commands.run",
    "megacpp_env.commands.diff",
    "megacpp_env.snapshot.collect",
    "megacpp_env.snapshot.diff",
    "megacpp_env.snapshot.report",
    "megacpp_env.repro.session",
    "megacpp_env.repro.guard",
    "megacpp_env.repro.capture",
)


def preload() -> str:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    import megacpp_env

    return str(megacpp_env.__file__)


def _child(request: dict[str, Any], out_fd: int, err_fd: int) -> None:
    """In the forked child: become the CLI process the request describes, run it, exit with its code.
    Its address space (and its children's) is capped: a read that never ends (a link to /dev/zero
    where a file was) fails with MemoryError instead of taking the machine's memory."""
    os.setpgid(0, 0)
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    code = 3
    try:
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.argv = ["megacpp-env", *request["argv"]]
        from megacpp_env import cli

        code = int(cli.main(request["argv"]))
    except BaseException as exc:  # the CLI's own handler should have caught it: say what escaped
        print(f"toolserver: escaped the CLI: {exc!r}", file=sys.stderr)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code & 0xFF)


def _wait(pid: int, timeout: float) -> tuple[int | None, bool, int]:
    """(exit code, timed out, peak memory in KiB) of the child ``pid``; past ``timeout`` its process
    group is killed. Returns once no process of its group is left (``_reap_group``)."""
    pidfd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    if not ready:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    _reap_group(pid)
    return (os.waitstatus_to_exitcode(status) if ready else None), not ready, usage.ru_maxrss


def _reap_group(pgid: int) -> None:
    """Wait (``GROUP_WAIT`` at most, then kill) for what the call left running in its process group
    (a worker still writing its cache): the next call, and the corpus's own file operations, must
    not race with it. Orphans are this server's to reap: it is their subreaper."""
    deadline = time.monotonic() + GROUP_WAIT
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        try:
            os.killpg(pgid, signal.SIGKILL if time.monotonic() > deadline else 0)
        except ProcessLookupError:
            return
        time.sleep(0.005)


def _become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def _read(handle: IO[bytes]) -> str:
    handle.seek(0)
    return handle.read().decode("utf-8", "replace")


def serve_one(request: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(request, out.fileno(), err.fileno())
        code, timed_out, peak = _wait(pid, float(request["timeout"]))
        seconds = round(time.monotonic() - started, 3)
        return {
            "code": code,
            "stdout": _read(out),
            "stderr": _read(err),
            "seconds": seconds,
            "timed_out": timed_out,
            "peak_kib": peak,
        }


def main() -> int:
    _become_subreaper()
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # anything else printed here goes to the log, never into the answers
    answers.write(json.dumps({"tool": preload()}) + "\n")
    answers.flush()
    for line in sys.stdin:
        answers.write(json.dumps(serve_one(json.loads(line))) + "\n")
        answers.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
