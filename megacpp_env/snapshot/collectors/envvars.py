"""Environment variables that change behaviour, and package-index configuration, with secrets removed.

Only allowlisted names are recorded. Values of secret-looking names are replaced by ``<redacted>``;
every credential in the others is redacted by ``megacpp_env.redact`` (URL userinfo and query values,
scp-style remotes, auth headers, token-like words). The
``Scrubber`` (``snapshot.scrub``) also remembers every secret value of the process environment so
the final document can be swept for any that slipped through another path.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.fsutil import read_bounded
from megacpp_env.redact import env_value_redaction
from megacpp_env.snapshot.scrub import Scrubber  # kept importable from here (tests, callers)

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context

ALLOW_PREFIXES = (
    "CUDA_",
    "CUDNN_",
    "CUBLAS_",
    "NCCL_",
    "NVIDIA_",
    "NVTE_",
    "TORCH",
    "PYTORCH_",
    "TRITON_",
    "CPPMEGA_",
    "MEGACPP_",
    "MAMBA_",
    "CAUSAL_CONV1D_",
    "FLASHINFER_",
    "VLLM_",
    "OMP_",
    "MKL_",
    "KMP_",
    "HF_",
    "TRANSFORMERS_",
    "XLA_",
    "PIP_",
    "UV_",
    "WANDB_",
    "CCACHE_",
    "SCCACHE_",
)
ALLOW_NAMES = frozenset(
    {
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "PATH",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONNOUSERSITE",
        "PYTHONDONTWRITEBYTECODE",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "CC",
        "CXX",
        "CUDAHOSTCXX",
        "CFLAGS",
        "CXXFLAGS",
        "LDFLAGS",
        "NVCC_FLAGS",
        "NVCC_THREADS",
        "MAX_JOBS",
        "CMAKE_ARGS",
        "LANG",
        "LC_ALL",
        "TZ",
    }
)
MAX_CONFIG_BYTES = 1 << 20  # a pip.conf/uv.toml larger than this is not read (recorded as an error)


# The tool's own settings (where it caches, which spec, uv and docker it runs): they change how the
# tool works, not the environment it fingerprints, so they are not facts (they were drift).
TOOL_NAMES = frozenset(
    {"MEGACPP_ENV_CACHE_DIR", "MEGACPP_ENV_SPEC", "MEGACPP_ENV_UV", "MEGACPP_ENV_UV_TIMEOUT", "MEGACPP_DOCKER"}
)


def is_allowed(name: str) -> bool:
    if name in TOOL_NAMES or name.startswith("MEGACPP_ENV_TEST_"):
        return False
    return name in ALLOW_NAMES or name.startswith(ALLOW_PREFIXES)


def collect_env(environ: Mapping[str, str], scrubber: Scrubber) -> dict[str, str]:
    """The allowlisted variables, sorted; secret-named values and every credential-shaped part of the
    others redacted (``megacpp_env.redact``)."""
    out: dict[str, str] = {}
    for name in sorted(environ):
        if is_allowed(name):
            found = env_value_redaction(name, environ[name])
            scrubber.remember(found.secrets)
            out[name] = scrubber.clean(found.text)
    return out


def _pip_config_files(environ: Mapping[str, str], prefix: str) -> list[Path]:
    home = Path(environ.get("HOME", "~")).expanduser()
    xdg = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    files = [Path("/etc/pip.conf"), xdg / "pip" / "pip.conf", home / ".pip" / "pip.conf", Path(prefix) / "pip.conf"]
    if environ.get("PIP_CONFIG_FILE"):
        files.append(Path(environ["PIP_CONFIG_FILE"]))
    return files


def _uv_config_files(environ: Mapping[str, str]) -> list[Path]:
    home = Path(environ.get("HOME", "~")).expanduser()
    xdg = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    files = [Path("/etc/uv/uv.toml"), xdg / "uv" / "uv.toml"]
    if environ.get("UV_CONFIG_FILE"):
        files.append(Path(environ["UV_CONFIG_FILE"]))
    return files


def _read_config(path: Path) -> str:
    """The text of a config file: a regular file, at most MAX_CONFIG_BYTES, UTF-8 (BOM allowed)."""
    data = read_bounded(path, MAX_CONFIG_BYTES)
    return data.decode("utf-8-sig")


def _pip_urls(path: Path) -> list[str]:
    import configparser

    parser = configparser.RawConfigParser(strict=False, interpolation=None)
    try:
        parser.read_string(_read_config(path), source=str(path))
    except configparser.Error as exc:
        raise ValueError(str(exc).splitlines()[0]) from None
    urls: list[str] = []
    for section in parser.sections():
        for key in ("index-url", "extra-index-url", "find-links"):
            urls.extend((parser.get(section, key, fallback="") or "").split())
    return urls


def _uv_urls(path: Path) -> list[str]:
    """Index URLs of a uv.toml (top level and its ``[pip]`` table); a value of the wrong type is an error."""
    import tomllib

    data = tomllib.loads(_read_config(path))
    urls: list[str] = []
    for table, where in ((data, ""), (data.get("pip"), "pip.")):
        if table is None:
            continue
        if not isinstance(table, dict):
            raise ValueError(f"{where.rstrip('.')}: expected a table")
        urls += _strings(table.get("index-url"), f"{where}index-url", single=True)
        urls += _strings(table.get("extra-index-url"), f"{where}extra-index-url")
        urls += _strings(table.get("find-links"), f"{where}find-links")
        for i, index in enumerate(_list(table.get("index"), f"{where}index")):
            if not isinstance(index, dict):
                raise ValueError(f"{where}index[{i}]: expected a table")
            urls += _strings(index.get("url"), f"{where}index[{i}].url", single=True)
    return urls


def _list(value: Any, key: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key}: expected an array")
    return value


def _strings(value: Any, key: str, *, single: bool = False) -> list[str]:
    items = ([] if value is None else [value]) if single else _list(value, key)
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"{key}: expected a string")
    return [i for i in items if i]


def collect_index_config(environ: Mapping[str, str], prefix: str, scrubber: Scrubber) -> dict[str, Any]:
    """Index URLs from pip and uv configuration files (credentials stripped), per file. A file that
    cannot be read or has the wrong shape is recorded with its error; the others are unaffected."""
    out: dict[str, Any] = {}
    sources = [(p, _pip_urls) for p in _pip_config_files(environ, prefix)]
    sources += [(p, _uv_urls) for p in _uv_config_files(environ)]
    for path, reader in sources:
        if not path.is_file():
            continue
        try:
            out[str(path)] = [scrubber.clean(u) for u in reader(path)]
        except (OSError, ValueError) as exc:  # tomllib/UnicodeDecode errors are ValueErrors
            out[str(path)] = {"error": f"unreadable: {type(exc).__name__}"}
    return out


def collect(environ: Mapping[str, str], prefix: str, scrubber: Scrubber) -> dict[str, Any]:
    return {
        "variables": collect_env(environ, scrubber),
        "index_config": collect_index_config(environ, prefix, scrubber),
    }


def environ_snapshot() -> dict[str, str]:
    return dict(os.environ)


def start(ctx: Context) -> Callable[[], dict[str, Any]]:
    return lambda: collect(ctx.environ, ctx.prefix(), ctx.scrubber)
