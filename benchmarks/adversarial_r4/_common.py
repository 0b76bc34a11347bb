"""What the round-4 modules share: the counts, one CLI run in a subprocess (a timeout is a hang, exit 3
or a traceback is a traceback; standard streams closed or full on request), leftover processes, and a
git daemon on loopback."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYS = ("commands", "tracebacks", "hangs", "leaked", "planted", "escapes", "false_oks", "partials", "wedges")
TIMEOUT_S = 120.0  # per command: longer is a hang
SPEC = str(ROOT / "stack.yaml")
IDENTITY = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.invalid", "GIT_COMMITTER_NAME": "a",
            "GIT_COMMITTER_EMAIL": "a@example.invalid", "GIT_CONFIG_NOSYSTEM": "1"}  # fmt: skip


class Counts(dict[str, int]):
    def __init__(self) -> None:
        super().__init__(dict.fromkeys(KEYS, 0))


def cli(
    counts: Counts,
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    close: tuple[int, ...] = (),
    full: bool = False,
    timeout: float = TIMEOUT_S,
    cwd: Path | None = None,
) -> tuple[int | None, str, str]:
    """``megacpp-env ARGV`` in a subprocess: (exit status or None on a hang, stdout, stderr). ``close``:
    descriptors closed before the program starts; ``full``: stdout is /dev/full."""
    counts["commands"] += 1

    def closing() -> None:
        for fd in close:
            os.close(fd)

    full_env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(ROOT), **(env or {})}
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open("/dev/full", "w")) if full else subprocess.PIPE
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "megacpp_env", *argv], stdout=out, stderr=subprocess.PIPE, text=True,
                errors="replace", env=full_env, cwd=cwd or ROOT, timeout=timeout, check=False,
                preexec_fn=closing if close else None,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            counts["hangs"] += 1
            return None, "", ""
    stdout = proc.stdout or ""
    if proc.returncode == 3 or "Traceback (most recent call last)" in proc.stderr + stdout:
        counts["tracebacks"] += 1
    return proc.returncode, stdout, proc.stderr


def processes_in(path: Path) -> list[str]:
    """Live processes (not zombies) working inside ``path`` or naming it on their command line."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and int(pid) != os.getpid() and (cwd.startswith(str(path)) or str(path) in cmdline):
            found.append(f"{pid} {cmdline[:100]}")
    return found


def git(args: list[str], cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True,
                          env={**os.environ, **IDENTITY})  # fmt: skip
    return done.stdout.strip()


def make_repo(path: Path, files: dict[str, str | bytes], submodules: dict[str, str] | None = None) -> str:
    """A real repository with ``files`` (and submodules: path -> URL) committed; its HEAD."""
    path.mkdir(parents=True)
    git(["init", "-q", "-b", "main", "."], path)
    for rel, data in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(data.encode() if isinstance(data, str) else data)
    for rel, url in (submodules or {}).items():
        git(["-c", "protocol.file.allow=always", "submodule", "add", "-q", url, rel], path)
    git(["add", "-A"], path)
    git(["commit", "-q", "-m", "c"], path)
    return git(["rev-parse", "HEAD"], path)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def git_daemon(base: Path) -> Iterator[str]:
    """A real ``git daemon`` serving ``base`` on loopback: its git:// URL prefix."""
    port = free_port()
    proc = subprocess.Popen(["git", "daemon", "--export-all", f"--base-path={base}", "--listen=127.0.0.1",
                             f"--port={port}", "--reuseaddr", str(base)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield f"git://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def mini_spec(path: Path, sources: str) -> Path:
    """A small spec with ``sources`` (YAML lines under ``sources:``) and one target building them."""
    names = [line.split(":")[0].strip() for line in sources.splitlines() if line.startswith("  ") and
             not line.startswith("   ")]  # fmt: skip
    text = (
        "schema_version: 1\nproject: p\ntoolchains:\n  host: {gcc: '13', python: '3.12', uv: '0.13.9'}\n"
        f"sources:\n{sources}"
        "targets:\n  t:\n    description: d\n    platforms: [linux/amd64]\n    base_image: none/none:none\n"
        f"    toolchain: host\n    sources: [{', '.join(names)}]\n"
    )
    path.mkdir(parents=True, exist_ok=True)
    (path / "stack.yaml").write_text(text)
    return path / "stack.yaml"
