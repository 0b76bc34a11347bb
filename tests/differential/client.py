"""The corpus's side of ``toolserver.py``: one server per tool copy, one request at a time."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

SERVER = Path(__file__).with_name("toolserver.py")
SLACK = 30.0  # seconds the server may take beyond a call's own timeout before it counts as wedged


@dataclass(frozen=True, kw_only=True, slots=True)
class Call:
    """One CLI call's answer: its exit code (None: killed at its timeout) and what it printed."""

    argv: tuple[str, ...]
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    peak_kib: int

    def describe(self) -> str:
        return "timed out" if self.timed_out else f"exit {self.code}"


class ToolServer:
    """A running ``toolserver.py`` whose ``megacpp_env`` comes from ``tool_root``."""

    def __init__(self, tool_root: Path, log: Path) -> None:
        self.tool_root = tool_root
        self.log = log
        self._proc: subprocess.Popen[str] | None = None
        self.tool_file = ""

    def start(self) -> ToolServer:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "MEGACPP_ENV_", "VIRTUAL_ENV"))}
        env["PYTHONPATH"] = str(self.tool_root)
        with self.log.open("a") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-s", str(SERVER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=env,
                cwd=self.tool_root,
            )
        hello = self._answer(120.0)
        self.tool_file = str(hello["tool"])
        if not Path(self.tool_file).resolve().is_relative_to(self.tool_root.resolve()):
            self.stop()
            raise RuntimeError(f"the tool server imported {self.tool_file}, not the copy under {self.tool_root}")
        return self

    def stop(self) -> None:
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def call(self, argv: list[str], *, env: dict[str, str], cwd: Path, timeout: float) -> Call:
        assert self._proc is not None and self._proc.stdin is not None
        request = {"argv": argv, "env": env, "cwd": str(cwd), "timeout": timeout}
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        got = self._answer(timeout + SLACK)
        return Call(
            argv=tuple(argv),
            code=got["code"],
            stdout=got["stdout"],
            stderr=got["stderr"],
            seconds=got["seconds"],
            timed_out=got["timed_out"],
            peak_kib=got["peak_kib"],
        )

    def _answer(self, timeout: float) -> dict[str, Any]:
        assert self._proc is not None
        stdout: IO[str] | None = self._proc.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], timeout)
        line = stdout.readline() if ready else ""
        if not line:
            self.stop()
            raise RuntimeError(f"the tool server gave no answer (see {self.log})")
        answer: dict[str, Any] = json.loads(line)
        return answer
