"""The one wrapper around the ``uv`` executable. Every uv call megacpp-env makes goes through
``run_uv``, which logs the command line (logger ``megacpp_env.uv``, level DEBUG: a caller that
configures logging sees it) and appends it to ``COMMANDS`` so tests can see exactly what ran. The
executable is ``$MEGACPP_ENV_UV``, else ``uv`` on ``PATH``. Never prints, never exits.

uv is always run with ``--no-config`` (no user/system ``uv.toml`` changes a lock) and
``--no-python-downloads`` (cross-resolution needs no interpreter of the target version). The
environment variables ``UV_DEFAULT_INDEX`` and ``UV_CACHE_DIR`` still apply: tests point the default
index at a local PEP 503 index with them. A uv run that takes longer than ``timeout()`` seconds
(default 900, env ``MEGACPP_ENV_UV_TIMEOUT``) is killed and reported as a ToolError.

Before it resolves, ``pip_compile`` checks the uv it found against ``UV_FLOOR``, the oldest uv that
takes every argument ``compile_args`` passes (tests/test_uv_floor.py runs that uv and the one before it).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from megacpp_env.errors import ToolError, ToolNotFoundError
from megacpp_env.layout import PLATFORM_ARCH
from megacpp_env.toolrun import Tool, env_seconds, run_tool

log = logging.getLogger("megacpp_env.uv")

PYPI_SIMPLE = "https://pypi.org/simple"
MANYLINUX = "manylinux_2_28"  # the glibc floor of every image (Ubuntu 24.04: 2.39, Debian forky: 2.41)
TIMEOUT_ENV = "MEGACPP_ENV_UV_TIMEOUT"
DEFAULT_TIMEOUT_S = 900.0
# The oldest uv megacpp-env works with: 0.12.1 added `--prerelease-package` (compile_args). Keep it equal
# to the floor in pyproject.toml and .ci/tool-requirements.in (tests/test_uv_floor.py checks all three).
UV_FLOOR = "0.12.1"
COMMANDS: list[tuple[str, ...]] = []  # every argv run, in order (read by tests)
_FIND_LOCK = threading.Lock()


def uv_executable() -> str:
    """``$MEGACPP_ENV_UV``, else the uv that the ``uv`` package installed next to this tool (works from
    ``uv tool install``, ``pipx`` and a venv that is not activated), else ``uv`` on PATH."""
    override = os.environ.get("MEGACPP_ENV_UV", "")
    if override:
        exe = shutil.which(override)
        if exe is None:
            raise ToolNotFoundError(f"MEGACPP_ENV_UV={override!r}: no such executable")
        return exe
    return _bundled_uv() or _uv_on_path()


def _bundled_uv() -> str | None:
    try:
        from uv import find_uv_bin
    except ImportError:  # a Nix or distro package may ship megacpp-env without the uv wheel
        return None
    with _FIND_LOCK:  # find_uv_bin reads sysconfig, whose first initialisation is not thread-safe
        try:
            return find_uv_bin()
        except FileNotFoundError:
            return None


def _uv_on_path() -> str:
    exe = shutil.which("uv")
    if exe is None:
        raise ToolNotFoundError(
            "uv not found: neither the uv package's binary nor `uv` on PATH (install it: pip install uv)"
        )
    return exe


def timeout() -> float:
    """Seconds one uv run may take: ``$MEGACPP_ENV_UV_TIMEOUT`` or 900."""
    return env_seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT_S)


def run_uv(
    args: Sequence[str], *, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``uv ARGS``; raise ToolError with uv's own error lines when it fails, cannot start or
    runs longer than ``timeout()``."""
    argv = (uv_executable(), *args)
    log.debug("uv: %s", " ".join(argv[1:]))
    full_env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1", **(env or {})}
    tool = Tool(
        what=f"uv {' '.join(args[:2])}",
        program=argv[0],
        errors=lambda proc: _error_lines(proc.stderr),
        hint=f" and was killed (raise {TIMEOUT_ENV})",
    )
    return run_tool(argv, tool, commands=COMMANDS, env=full_env, timeout_s=timeout(), cwd=cwd)


def _error_lines(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if not ln.startswith("warning: The requested Python version")]
    return "\n".join(lines[-40:]) or "(no output)"


def uv_version() -> str:
    """The version of the uv megacpp-env runs (``uv_executable()``: ``0.13.9``)."""
    return _version_of(uv_executable())


@functools.cache
def _version_of(exe: str) -> str:
    del exe  # the cache key: MEGACPP_ENV_UV may name another uv later in the same process
    out = run_uv(["--version"]).stdout
    match = re.search(r"\b(\d+\.\d+\.\d+\S*)", out)
    if not match:
        raise ToolError(f"cannot parse `uv --version` output: {out.strip()!r}")
    return match.group(1)


def require_floor() -> str:
    """The uv version, when it is at least ``UV_FLOOR``; else a ToolError that says which uv was found,
    why it is too old and how to get a newer one."""
    exe, have = uv_executable(), uv_version()
    try:
        too_old = Version(have) < Version(UV_FLOOR)
    except InvalidVersion:
        raise ToolError(f"{exe}: cannot compare uv version {have!r} with the floor {UV_FLOOR}") from None
    if too_old:
        raise ToolError(
            f"{exe} is uv {have}; megacpp-env needs uv >= {UV_FLOOR} (it passes --prerelease-package, new in "
            f"uv {UV_FLOOR}): upgrade the uv in megacpp-env's environment (pip install 'uv>={UV_FLOOR}', "
            f"or reinstall megacpp-env), or point MEGACPP_ENV_UV at a newer uv"
        )
    return have


def pin_mismatch(have: str, pinned: set[str]) -> str | None:
    """A warning (with its remedy) when ``have`` is not every uv the spec's toolchains pin."""
    if not pinned - {have}:
        return None
    want = ", ".join(sorted(pinned))
    return (
        f"warning: resolved with uv {have}; the toolchain pins uv {want} (a lock made with another uv may "
        f"differ: pip install 'uv=={min(pinned)}' in megacpp-env's environment, or point MEGACPP_ENV_UV at it)"
    )


def python_platform(platform: str) -> str:
    """``linux/arm64`` -> ``aarch64-manylinux_2_28`` (uv's ``--python-platform``)."""
    return f"{PLATFORM_ARCH[platform]}-{MANYLINUX}"


def default_index() -> str:
    """The default index uv resolves against (PyPI unless ``UV_DEFAULT_INDEX`` says otherwise)."""
    return os.environ.get("UV_DEFAULT_INDEX", PYPI_SIMPLE).rstrip("/")


@dataclass(frozen=True, kw_only=True, slots=True)
class CompileRequest:
    """One ``uv pip compile`` run in ``workdir``: its pyproject.toml (dependencies, explicit indexes,
    sources) resolved for one Python and platform into ``pylock.toml`` (PEP 751). Paths in the argv are
    relative to ``workdir`` so the recorded command line does not depend on a temp dir. An ``output``
    that already exists in ``workdir`` is uv's preferences: it keeps those versions where the
    requirements allow (all but ``upgrade_packages``)."""

    workdir: Path
    python_version: str
    python_platform: str
    prerelease_packages: tuple[str, ...] = ()
    constraints: Path | None = None  # relative to workdir
    overrides: Path | None = None  # relative to workdir: uv's override-dependencies, one requirement a line
    project: str = "pyproject.toml"
    output: str = "pylock.toml"
    format: str = "pylock.toml"  # or "requirements.txt" (annotated with "# via", used to probe the graph)
    exclude_newer: str = ""  # an RFC 3339 UTC timestamp: files uploaded later do not exist for uv
    upgrade_packages: tuple[str, ...] = ()  # packages whose pin in the existing output uv may drop


def compile_args(req: CompileRequest) -> list[str]:
    """The exact ``uv pip compile`` argv (without the executable) for ``req``."""
    args = ["pip", "compile", req.project, "--format", req.format, "-o", req.output]
    args += ["--python-version", req.python_version, "--python-platform", req.python_platform]
    args += ["--index-strategy", "first-index", "--prerelease", "explicit"]
    args += [arg for name in req.prerelease_packages for arg in ("--prerelease-package", f"{name}=allow")]
    if req.constraints is not None:
        args += ["--constraints", req.constraints.name]
    if req.overrides is not None:
        args += ["--overrides", req.overrides.name]
    if req.exclude_newer:
        args += ["--exclude-newer", req.exclude_newer]
    args += [arg for name in req.upgrade_packages for arg in ("--upgrade-package", name)]
    args += ["--no-header", "--no-config", "--no-python-downloads", "--quiet"]
    return args


def pip_compile(req: CompileRequest) -> subprocess.CompletedProcess[str]:
    require_floor()
    return run_uv(compile_args(req), cwd=req.workdir)
