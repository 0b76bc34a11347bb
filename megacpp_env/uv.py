"""The one wrapper around the ``uv`` executable. Every uv call megacpp-env makes goes through
``run_uv``, which logs the command line (logger ``megacpp_env.uv``, level DEBUG: a caller that
configures logging sees it) and appends it to ``COMMANDS`` so tests can see exactly what ran. The
executable is ``$MEGACPP_ENV_UV``, else ``uv`` on ``PATH``. Never prints, never exits.

uv is always run with ``--no-config`` (no user/system ``uv.toml`` changes a lock) and
``--no-python-downloads`` (cross-resolution needs no interpreter of the target version). A resolution
(``pip_compile``) sees of the caller's ``UV_*`` variables only those in ``RESOLUTION_PASSES`` (where
the cache is, how to reach the network, credentials, and ``UV_DEFAULT_INDEX``, which every lock
records): one that changes what resolves (``RESOLUTION_REFUSED``: ``UV_EXCLUDE_NEWER``,
``UV_PRERELEASE``, ``UV_INDEX_URL`` ...) would reach the lock without the lock saying so, and is
refused; any other is not passed on. Other uv runs (``run_uv``) keep the caller's environment. Tests
point the default index at a local PEP 503 index. A uv run that takes longer than ``timeout()``
seconds (default 900, env ``MEGACPP_ENV_UV_TIMEOUT``) is killed and reported as a ToolError.

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

from megacpp_env.errors import RefusedError, ToolError, ToolNotFoundError
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
# The caller's UV_* variables a resolution passes on: none changes which files a lock holds (the default
# index is recorded in the lock: lock.resolve reads default_index()).
RESOLUTION_PASSES = frozenset({
    "UV_CACHE_DIR", "UV_NO_CACHE", "UV_OFFLINE", "UV_DEFAULT_INDEX", "UV_HTTP_TIMEOUT", "UV_HTTP_CONNECT_TIMEOUT",
    "UV_HTTP_RETRIES", "UV_REQUEST_TIMEOUT", "UV_CONCURRENT_DOWNLOADS", "UV_CONCURRENT_BUILDS",
    "UV_CONCURRENT_INSTALLS", "UV_SYSTEM_CERTS", "UV_NATIVE_TLS", "UV_KEYRING_PROVIDER", "UV_CREDENTIALS_DIR",
    "UV_NO_PROGRESS",
})  # fmt: skip
_INDEX_CREDENTIAL = re.compile(r"UV_INDEX_[A-Z0-9_]+_(?:USERNAME|PASSWORD)")  # a named index's login
# The caller's UV_* variables that change what a resolution gives (uv's documented settings): refused,
# with where the setting belongs instead.
RESOLUTION_REFUSED = {
    "UV_EXCLUDE_NEWER": "pass `lock resolve --exclude-newer` (the lock records its cut-off)",
    "UV_PRERELEASE": "scope them in stack.yaml (an index's `prerelease: true`, a target's `resolutions.prereleases`)",
    "UV_RESOLUTION": "pin the versions in the target's `requirements` in stack.yaml",
    "UV_INDEX": "declare the index under `indexes:` in stack.yaml",
    "UV_INDEX_URL": "use UV_DEFAULT_INDEX (the lock records it) or declare the index in stack.yaml",
    "UV_EXTRA_INDEX_URL": "declare the index under `indexes:` in stack.yaml",
    "UV_FIND_LINKS": "declare the index under `indexes:` in stack.yaml",
    "UV_NO_INDEX": "point UV_DEFAULT_INDEX at the index to read",
    "UV_INDEX_STRATEGY": "nothing: megacpp-env resolves with first-index",
    "UV_CONSTRAINT": "pin it in the target's `requirements` in stack.yaml",
    "UV_OVERRIDE": "put it in a target's `resolutions.overrides` in stack.yaml, with a reason",
    "UV_BUILD_CONSTRAINT": "nothing: a lock is resolved from metadata",
    "UV_NO_BINARY": "nothing: a lock holds wheels",
    "UV_NO_BUILD": "nothing: a lock is resolved from metadata",
    "UV_NO_SOURCES": "nothing: megacpp-env writes the project uv reads",
    "UV_TORCH_BACKEND": "declare the torch index in stack.yaml",
    "UV_FORK_STRATEGY": "nothing: one platform is resolved at a time",
    "UV_INSECURE_HOST": "give the index's CA to TLS (SSL_CERT_FILE) instead of trusting any certificate",
    "UV_CONFIG_FILE": "nothing: uv runs with --no-config",
}
# Of those, uv's switches: set to a false value (0, false, no, off) they change nothing and are dropped.
_SWITCHES = frozenset({"UV_NO_INDEX", "UV_NO_BINARY", "UV_NO_BUILD", "UV_NO_SOURCES"})
_FALSE = frozenset({"", "0", "false", "no", "off"})
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
    """Run ``uv ARGS`` in the caller's environment (``env`` over it); raise ToolError with uv's own error
    lines when it fails, cannot start or runs longer than ``timeout()``."""
    return _run(args, cwd=cwd, base=os.environ, env=env)


def resolution_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` as a resolution sees it: no ``UV_*`` variable but those in ``RESOLUTION_PASSES`` and a
    named index's credentials; a RefusedError naming each set one of ``RESOLUTION_REFUSED`` and where
    that setting belongs (a lock must record everything that chose its files)."""
    refused = [
        name
        for name in RESOLUTION_REFUSED
        if environ.get(name, "") and not (name in _SWITCHES and environ[name].strip().lower() in _FALSE)
    ]
    if refused:
        raise RefusedError(
            "; ".join(f"{name} is set in the environment: {RESOLUTION_REFUSED[name]}" for name in refused)
            + " (a lock resolved with it would not record it: unset it for megacpp-env, `env -u NAME ...`)"
        )
    return {
        k: v
        for k, v in environ.items()
        if not k.startswith("UV_") or k in RESOLUTION_PASSES or _INDEX_CREDENTIAL.fullmatch(k)
    }


def _run(
    args: Sequence[str], *, cwd: Path | None, base: Mapping[str, str], env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    argv = (uv_executable(), *args)
    log.debug("uv: %s", " ".join(argv[1:]))
    full_env = {**base, "UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1", **(env or {})}
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
    """``uv pip compile`` for ``req``, in the ``resolution_environment`` of this process (a refusal comes
    before the uv floor is asked for)."""
    base = resolution_environment(os.environ)
    require_floor()
    return _run(compile_args(req), cwd=req.workdir, base=base)
