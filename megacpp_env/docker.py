"""The one wrapper around the Docker CLI. Every docker command line megacpp-env runs is built here.

The classic ``docker build`` of Debian's docker.io (20.10) runs BuildKit when ``DOCKER_BUILDKIT=1``
is set, and supports ``--secret``, ``--platform``, ``--network``, ``--cache-from`` and ``--label``.
``--builder`` and ``--cache-to`` (remote builders, registry caches) exist only in ``docker buildx
build``; a request that uses them gets a buildx command line. ``/usr/bin/docker`` is preferred when
present: some hosts put a newer CLI first on PATH that refuses BuildKit without the buildx plugin.

Never prints; output goes to the callbacks the caller passes.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megacpp_env.errors import ToolError, ToolNotFoundError

PREFERRED = "/usr/bin/docker"
ENV_BINARY = "MEGACPP_DOCKER"
LOG_TAIL = 25


def binary() -> str:
    """The docker CLI to run: $MEGACPP_DOCKER, else /usr/bin/docker when present, else PATH."""
    chosen = os.environ.get(ENV_BINARY) or (PREFERRED if Path(PREFERRED).exists() else shutil.which("docker"))
    if not chosen:
        raise ToolNotFoundError("docker: not found (install docker.io; CI runs scripts/docker-up.sh)")
    return chosen


def environ() -> dict[str, str]:
    return {**os.environ, "DOCKER_BUILDKIT": "1"}


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildRequest:
    """One image build. ``buildx`` is decided from the options (see ``needs_buildx``)."""

    dockerfile: str
    context: str
    tag: str
    platform: str
    build_args: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    secrets: tuple[tuple[str, str], ...] = ()  # (id, src path)
    network: str = ""
    cache_from: tuple[str, ...] = ()
    cache_to: tuple[str, ...] = ()
    builder: str = ""
    push: bool = False
    no_cache: bool = False
    iidfile: str = ""
    stage: str = ""  # --target: build up to this stage only

    @property
    def needs_buildx(self) -> bool:
        return bool(self.builder or self.cache_to)


def build_argv(req: BuildRequest, *, docker: str = "docker") -> list[str]:
    """The exact command line for ``req`` (``docker build`` or, when needed, ``docker buildx build``)."""
    argv = [docker, "buildx", "build"] if req.needs_buildx else [docker, "build"]
    argv += ["--progress=plain", "--platform", req.platform, "-f", req.dockerfile, "-t", req.tag]
    if req.stage:
        argv += ["--target", req.stage]
    if req.builder:
        argv += ["--builder", req.builder]
    if req.network:
        argv += ["--network", req.network]
    for key, value in req.build_args:
        argv += ["--build-arg", f"{key}={value}"]
    if (req.cache_from or req.push) and not req.needs_buildx:  # the pushed image can then serve as a cache
        argv += ["--build-arg", "BUILDKIT_INLINE_CACHE=1"]
    for sid, src in req.secrets:
        argv += ["--secret", f"id={sid},src={src}"]
    for key, value in req.labels:
        argv += ["--label", f"{key}={value}"]
    for ref in req.cache_from:
        argv += ["--cache-from", ref]
    for ref in req.cache_to:
        argv += ["--cache-to", ref]
    if req.no_cache:
        argv.append("--no-cache")
    if req.needs_buildx:
        argv.append("--push" if req.push else "--load")
    if req.iidfile:
        argv += ["--iidfile", req.iidfile]
    argv.append(req.context)
    return argv


def push_argv(tag: str, *, docker: str = "docker") -> list[str]:
    return [docker, "push", tag]


def pull_argv(ref: str, *, docker: str = "docker") -> list[str]:
    return [docker, "pull", ref]


def tag_argv(source: str, target: str, *, docker: str = "docker") -> list[str]:
    return [docker, "tag", source, target]


_PUSHED = re.compile(r"^(?P<tag>\S+): digest: (?P<digest>sha256:[0-9a-f]{64}) size: \d+$")


def stdin_build_argv(
    tag: str, platform: str, labels: Mapping[str, str] | None = None, *, docker: str = "docker", context: str = ""
) -> list[str]:
    """``docker build`` of a Dockerfile given on stdin, with no build context (e.g. ``FROM tag`` +
    ``--label``: a metadata-only rebuild that adds labels to an existing image), or with ``context``."""
    argv = [docker, "build", "--progress=plain", "--platform", platform, "-t", tag]
    for key, value in sorted((labels or {}).items()):
        argv += ["--label", f"{key}={value}"]
    return [*argv, "-f", "-", context] if context else [*argv, "-"]


# ---- running -----------------------------------------------------------------------------------

_STEP = re.compile(r"^#(\d+) (\[[^\]]*\] .*)$")
_LOG = re.compile(r"^#(\d+) \d+\.\d+(?: (.*))?$")
_ERROR = re.compile(r"^#(\d+) ERROR: (.*)$")
_CACHED = re.compile(r"^#(\d+) CACHED$")
_DONE = re.compile(r"^#(\d+) DONE ")
_IMPORT = re.compile(r"^#(\d+) importing cache manifest from (\S+)$")  # a --cache-from ref: its ERROR is a miss


@dataclass(kw_only=True, slots=True)
class BuildLog:
    """What a BuildKit ``--progress=plain`` stream said: steps, cache hits, the failing step's tail."""

    steps: dict[int, str] = field(default_factory=dict)
    tails: dict[int, deque[str]] = field(default_factory=dict)
    cached: set[int] = field(default_factory=set)
    done: set[int] = field(default_factory=set)
    failed: int | None = None
    error: str = ""
    imports: dict[int, str] = field(default_factory=dict)  # step -> the --cache-from ref it imports
    cache_misses: dict[str, str] = field(default_factory=dict)  # --cache-from ref -> why it gave nothing
    last_lines: deque[str] = field(default_factory=lambda: deque(maxlen=LOG_TAIL))

    def feed(self, line: str) -> None:
        self.last_lines.append(line)
        if m := _STEP.match(line):
            self.steps.setdefault(int(m[1]), m[2])
        elif m := _LOG.match(line):
            self.tails.setdefault(int(m[1]), deque(maxlen=LOG_TAIL)).append(m[2] or "")
        elif m := _IMPORT.match(line):
            self.imports.setdefault(int(m[1]), m[2])
        elif m := _ERROR.match(line):
            if int(m[1]) in self.imports:  # BuildKit goes on without that cache
                self.cache_misses[self.imports[int(m[1])]] = m[2]
            elif self.failed is None:
                self.failed, self.error = int(m[1]), m[2]
        elif m := _CACHED.match(line):
            self.cached.add(int(m[1]))
        elif m := _DONE.match(line):
            self.done.add(int(m[1]))

    @property
    def instruction_steps(self) -> dict[int, str]:
        """Dockerfile instructions only (``[stage n/m] INSTR``), not context transfers or metadata."""
        return {k: v for k, v in self.steps.items() if re.match(r"\[[\w.-]+ +\d+/\d+\]", v)}

    def executed(self) -> list[str]:
        """Instructions that ran (not cache hits); ``FROM`` resolutions are not work and are left out."""
        steps = sorted(self.instruction_steps.items())
        return [v for k, v in steps if k not in self.cached and not re.match(r"\[[^\]]*\] FROM ", v)]

    def failed_step(self) -> str:
        return self.steps.get(self.failed, "") if self.failed is not None else ""

    def failed_tail(self) -> list[str]:
        if self.failed is None:
            return list(self.last_lines)
        return list(self.tails.get(self.failed, ())) or list(self.last_lines)


def stream(
    argv: Sequence[str],
    *,
    on_line: Callable[[str], None] | None = None,
    stdin: str | None = None,
    cwd: str | None = None,
) -> tuple[int, BuildLog]:
    """Run ``argv``, passing every output line (stdout and stderr merged) to ``on_line``."""
    log = BuildLog()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env=environ(),
            cwd=cwd,
        )
    except FileNotFoundError as exc:
        raise ToolNotFoundError(f"{argv[0]}: not found") from exc
    if stdin is not None and proc.stdin is not None:
        proc.stdin.write(stdin)
        proc.stdin.close()
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = raw.rstrip("\n")
        log.feed(line)
        if on_line is not None:
            on_line(line)
    return proc.wait(), log


def run(argv: Sequence[str], *, check: bool = True, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """Run a short docker command and capture its output."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, env=environ(), timeout=timeout, check=False)
    except FileNotFoundError as exc:
        raise ToolNotFoundError(f"{argv[0]}: not found") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise ToolError(f"`{' '.join(argv[:4])} ...` failed (exit {proc.returncode}): {' | '.join(detail)}")
    return proc


def push(tag: str, *, on_line: Callable[[str], None] | None = None) -> str:
    """``docker push tag`` (its progress lines go to ``on_line``); the manifest digest the registry gave."""
    rc, log = stream(push_argv(tag, docker=binary()), on_line=on_line)
    if rc != 0:
        raise ToolError(f"docker push {tag} failed (exit {rc}): {' | '.join(list(log.last_lines)[-5:])}")
    digests = [m["digest"] for line in log.last_lines if (m := _PUSHED.match(line))]
    if not digests:
        raise ToolError(f"docker push {tag}: no 'digest: sha256:...' line in its output")
    return digests[-1]


def tag_image(source: str, target: str) -> None:
    run(tag_argv(source, target, docker=binary()))


def daemon_ok() -> bool:
    try:
        return run([binary(), "info", "--format", "{{.ServerVersion}}"], check=False, timeout=20).returncode == 0
    except (ToolNotFoundError, subprocess.TimeoutExpired):
        return False


def image_exists(ref: str) -> bool:
    return run([binary(), "image", "inspect", ref], check=False).returncode == 0


def image_id(ref: str) -> str:
    return run([binary(), "image", "inspect", "--format", "{{.Id}}", ref]).stdout.strip()


def image_labels(ref: str) -> dict[str, str]:
    """The image's labels. What the daemon answers is the image's own data (a hostile image's labels
    are its author's): anything but a JSON object of strings (or null) is a ToolError, not a crash."""
    import json

    out = run([binary(), "image", "inspect", "--format", "{{json .Config.Labels}}", ref]).stdout
    try:
        labels = json.loads(out or "null")
    except (ValueError, RecursionError):
        raise ToolError(f"docker image inspect {ref}: its labels are not JSON") from None
    if labels is None:
        return {}
    if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
        raise ToolError(f"docker image inspect {ref}: its labels are not an object of strings")
    return {str(k): v for k, v in labels.items()}


IMAGE_RUN_TIMEOUT_ENV = "MEGACPP_ENV_IMAGE_RUN_TIMEOUT"  # seconds one command in an image may take
IMAGE_RUN_TIMEOUT_S = 3600.0
IMAGE_OUTPUT_LIMIT = 64 << 20  # bytes one command in an image may print (each stream)


def run_in_image(
    image: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    network: str = "none",
    platform: str = "",
    entrypoint: str = "",
) -> subprocess.CompletedProcess[str]:
    """``docker run --rm`` one command in ``image`` (no network by default); never raises on exit status.
    The image is untrusted: a command that runs past ``$MEGACPP_ENV_IMAGE_RUN_TIMEOUT`` seconds (default
    3600) or prints more than ``IMAGE_OUTPUT_LIMIT`` bytes is stopped (its container removed) and is a
    ToolError."""
    from megacpp_env.toolrun import env_seconds

    timeout = env_seconds(IMAGE_RUN_TIMEOUT_ENV, IMAGE_RUN_TIMEOUT_S)
    name = f"megacpp-env-run-{os.urandom(6).hex()}"
    cmd = [binary(), "run", "--rm", "--name", name, "--network", network]
    if platform:
        cmd += ["--platform", platform]
    if entrypoint:
        cmd += ["--entrypoint", entrypoint]
    for key, value in sorted((env or {}).items()):
        cmd += ["-e", f"{key}={value}"]
    try:
        return _bounded_run([*cmd, image, *argv], timeout=timeout, limit=IMAGE_OUTPUT_LIMIT)
    except _Stopped as exc:
        run([binary(), "rm", "-f", name], check=False, timeout=120)
        raise ToolError(f"{image}: `{' '.join(argv)[:80]}` in the image {exc}") from None


class _Stopped(Exception):
    """A bounded run that was stopped: its str() says why."""


def _bounded_run(argv: Sequence[str], *, timeout: float, limit: int) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (its own process group), capturing at most ``limit`` bytes of each stream; killed
    (the whole group) after ``timeout`` seconds or once a stream passes ``limit``."""
    import signal
    import threading

    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=environ(), start_new_session=True)  # fmt: skip
    except FileNotFoundError as exc:
        raise ToolNotFoundError(f"{argv[0]}: not found") from exc
    over = threading.Event()
    chunks: dict[int, list[bytes]] = {1: [], 2: []}

    def drain(pipe: Any, key: int) -> None:
        size = 0
        for chunk in iter(lambda: pipe.read1(1 << 16), b""):
            size += len(chunk)
            if size > limit:
                over.set()
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                return
            chunks[key].append(chunk)

    readers = [threading.Thread(target=drain, args=(proc.stdout, 1), daemon=True),
               threading.Thread(target=drain, args=(proc.stderr, 2), daemon=True)]  # fmt: skip
    for reader in readers:
        reader.start()
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise _Stopped(f"did not finish in {timeout:g}s ({IMAGE_RUN_TIMEOUT_ENV})") from None
    finally:
        for reader in readers:
            reader.join(timeout=10)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    if over.is_set():
        raise _Stopped(f"printed more than {limit} bytes")
    out, err = (b"".join(chunks[k]).decode("utf-8", "replace") for k in (1, 2))
    return subprocess.CompletedProcess(list(argv), code, out, err)


def remove_image(ref: str) -> None:
    run([binary(), "image", "rm", "-f", ref], check=False)
