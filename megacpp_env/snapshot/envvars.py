"""Environment variables that change behaviour, and package-index configuration, with secrets removed.

Only allowlisted names are recorded. Values of secret-looking names are replaced by ``<redacted>``;
credentials are stripped from every URL (userinfo, and secret-looking query parameters). A
``Scrubber`` also remembers every secret value of the process environment so the final document
can be swept for any that slipped through another path (a git remote, a ``direct_url.json``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.redact import REDACTED, URL_RE, is_secret_name, strip_url_credentials

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
_MIN_SECRET_LEN = 6


def is_allowed(name: str) -> bool:
    return name in ALLOW_NAMES or name.startswith(ALLOW_PREFIXES)


def _url_secrets(text: str) -> Iterable[str]:
    for match in URL_RE.finditer(text):
        userinfo = match["rest"].split("/", 1)[0].rpartition("@")[0]
        for piece in userinfo.split(":"):
            if len(piece) >= _MIN_SECRET_LEN:
                yield piece


class Scrubber:
    """Remembers secret values; ``clean`` strips URLs and replaces any remembered secret."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        found: set[str] = set()
        for name, value in environ.items():
            if is_secret_name(name) and len(value) >= _MIN_SECRET_LEN:
                found.add(value)
            found.update(_url_secrets(value))
        self._secrets = sorted(found, key=len, reverse=True)

    def remember(self, text: str) -> None:
        new = set(_url_secrets(text)) - set(self._secrets)
        if new:
            self._secrets = sorted({*self._secrets, *new}, key=len, reverse=True)

    def clean(self, text: str) -> str:
        self.remember(text)
        text = strip_url_credentials(text)
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def clean_tree(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.clean(obj)
        if isinstance(obj, dict):
            return {self.clean(str(k)): self.clean_tree(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self.clean_tree(v) for v in obj]
        return obj


def collect_env(environ: Mapping[str, str], scrubber: Scrubber) -> dict[str, str]:
    """The allowlisted variables, sorted; secret-named values redacted, URLs stripped."""
    out: dict[str, str] = {}
    for name in sorted(environ):
        if not is_allowed(name):
            continue
        value = environ[name]
        out[name] = REDACTED if is_secret_name(name) and value else scrubber.clean(value)
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


def _pip_urls(path: Path) -> list[str]:
    import configparser

    parser = configparser.RawConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except configparser.Error as exc:
        raise ValueError(str(exc)) from None
    urls: list[str] = []
    for section in parser.sections():
        for key in ("index-url", "extra-index-url", "find-links"):
            urls.extend(parser.get(section, key, fallback="").split())
    return urls


def _uv_urls(path: Path) -> list[str]:
    import tomllib

    data = tomllib.loads(path.read_text(encoding="utf-8"))
    urls = [str(data.get("index-url", "") or "")]
    urls.extend(str(u) for u in data.get("extra-index-url", []) or [])
    urls.extend(str(i.get("url", "")) for i in data.get("index", []) or [] if isinstance(i, dict))
    return [u for u in urls if u]


def collect_index_config(environ: Mapping[str, str], prefix: str, scrubber: Scrubber) -> dict[str, Any]:
    """Index URLs from pip and uv configuration files (credentials stripped), per file; errors recorded."""
    out: dict[str, Any] = {}
    sources = [(p, _pip_urls) for p in _pip_config_files(environ, prefix)]
    sources += [(p, _uv_urls) for p in _uv_config_files(environ)]
    for path, reader in sources:
        if not path.is_file():
            continue
        try:
            out[str(path)] = [scrubber.clean(u) for u in reader(path)]
        except (OSError, ValueError) as exc:
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
