"""What a failed ``docker build`` says: the step, BuildKit's error, the package when pip's hash check
failed, and the end of the step's log. Never prints."""

from __future__ import annotations

import re

from megacpp_env import docker
from megacpp_env.errors import ToolError


class BuildFailedError(ToolError):
    """``docker build`` failed; the message names the step and shows the end of its log."""

    def __init__(self, message: str, *, step: str = "", package: str = "", tail: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.step = step
        self.package = package
        self.tail = tail


def failure(log: docker.BuildLog, rc: int) -> BuildFailedError:
    """The error for a failed ``docker build``: its step, BuildKit's error, the package pip named, the log's end."""
    step = log.failed_step()
    tail = tuple(log.failed_tail())
    package = hash_mismatch_package(tail)
    lines = [f"docker build failed (exit {rc})" + (f" at step {_short(step)}" if step else "")]
    if log.error:
        lines.append(f"error: {_short(_executor_error(log.error))}")
    if package:
        lines.append(f"pip hash mismatch: {package} (the lock no longer matches the artifact; re-lock or mirror)")
    shown = tail[-docker.LOG_TAIL :] if log.tails.get(log.failed or -1) else tail[-8:]
    lines += ["last lines of its log:", *(f"  | {t}" for t in shown)]
    return BuildFailedError("\n".join(lines), step=step, package=package, tail=tail)


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _executor_error(error: str) -> str:
    """BuildKit repeats the whole RUN line in ``executor failed running [...]: exit code: N``; keep the end."""
    head, sep, tail = error.rpartition("]: ")
    return tail if sep and head.startswith("executor failed running [") else error


def hash_mismatch_package(lines: tuple[str, ...] | list[str]) -> str:
    """The ``name==version`` pip names above ``Expected sha256`` in a hash-mismatch report."""
    last = ""
    for line in lines:
        if m := re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*==[^\s]+) from ", line):
            last = m[1]
        elif "Expected sha256" in line and last:
            return last
    return ""
