"""Running the target Python and shell steps of a source build: output streamed line by line to a
callback, the last lines kept for the error message. Never prints."""

from __future__ import annotations

import subprocess
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from megacpp_env.errors import ToolError

TAIL = 30


class StepFailedError(ToolError):
    """A step of a source build failed; the message names the source, the step and the end of its output."""

    def __init__(self, message: str, *, source: str, step: str, tail: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.source = source
        self.step = step
        self.tail = tail


def stream(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    source: str,
    step: str,
    on_line: Callable[[str], None],
) -> list[str]:
    """Run ``argv``; every output line goes to ``on_line``; returns all lines. Raises StepFailedError."""
    lines: list[str] = []
    tail: deque[str] = deque(maxlen=TAIL)
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except OSError as exc:
        raise StepFailedError(
            f"{source}: {step}: cannot run {argv[0]}: {exc.strerror or exc}", source=source, step=step
        ) from None
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.rstrip("\n")
        lines.append(line)
        tail.append(line)
        on_line(line)
    rc = proc.wait()
    if rc != 0:
        shown = "\n".join(f"  | {t}" for t in tail)
        raise StepFailedError(
            f"{source}: {step} failed (exit {rc}); last lines of its output:\n{shown}",
            source=source,
            step=step,
            tail=tuple(tail),
        )
    return lines


def python_value(python: Path, code: str) -> str:
    """Evaluate ``code`` (which prints one value) with ``python``; its stripped stdout."""
    try:
        proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False, timeout=120)
    except OSError as exc:
        raise ToolError(f"{python}: cannot run: {exc.strerror or exc} (pass --venv PY_OR_DIR)") from None
    if proc.returncode != 0:
        raise ToolError(f"{python} -c {code!r} failed: {proc.stderr.strip()[-300:]}")
    return proc.stdout.strip()


def resolve_python(venv: Path | str | None) -> Path:
    """A venv directory or an interpreter -> the interpreter; None: the active venv's, else this one's."""
    import os

    if venv is None:
        active = os.environ.get("VIRTUAL_ENV")
        return Path(active) / "bin" / "python" if active else Path(sys.executable)
    path = Path(venv)
    if path.is_dir():
        path = path / "bin" / "python"
    if not path.exists():
        raise ToolError(f"{venv}: no Python interpreter there (pass a venv directory or its bin/python)")
    return path
