"""The tool's own source tree, as an image build installs it (``pyproject.toml``, ``README.md``,
``LICENSE`` and ``megacpp_env/``), wherever this megacpp-env runs from.

* From a source checkout (an editable install, the repository's own venv): the checkout's files.
* From an installed wheel (``pip``/``uv tool``/``pipx``): the installed package, plus the project
  files it ships as package data in ``megacpp_env/_project/`` (symlinks in the repository, regular
  files in the wheel), so the tree is the same bytes as the checkout it was built from.

``build`` uses the spec's repository as the build context when that repository *is* megacpp-env's
source; otherwise it stages the spec's files and this tree into a temporary context. Never prints.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from megacpp_env.errors import MegacppEnvError

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_FILES = ("pyproject.toml", "README.md", "LICENSE")  # what the Dockerfile COPYs besides the package
SHIPPED = "_project"  # megacpp_env/_project/<PROJECT_FILES>: the installed copies
DIST_NAME = "megacpp-env"


def is_tool_source(root: Path) -> bool:
    """True when ``root`` is a checkout of megacpp-env itself (its pyproject names this project)."""
    pyproject = root / "pyproject.toml"
    if not (root / "megacpp_env" / "__init__.py").is_file() or not pyproject.is_file():
        return False
    try:
        name = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {}).get("name", "")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return bool(name == DIST_NAME)


# Caches tools leave beside sources (ruff writes one next to megacpp_env/_project/pyproject.toml):
# never an input, so never in a build context or its content hash.
CACHE_DIRS = frozenset({"__pycache__", ".ruff_cache", ".mypy_cache", ".pytest_cache", ".hypothesis"})


def is_cached(rel: Path) -> bool:
    """A file (path relative to a source tree) that is a tool's cache, not source."""
    return bool(CACHE_DIRS.intersection(rel.parts)) or rel.suffix == ".pyc"


def _package_files(package: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(package.rglob("*")):
        rel = path.relative_to(package)
        if is_cached(rel) or not path.is_file():
            continue
        out[f"megacpp_env/{rel.as_posix()}"] = path
    return out


def tool_files() -> dict[str, Path]:
    """Build-context relpath -> file, for the source tree of the megacpp-env that is running."""
    checkout = PACKAGE_DIR.parent
    if is_tool_source(checkout):
        project = {name: checkout / name for name in PROJECT_FILES}
    else:
        project = {name: PACKAGE_DIR / SHIPPED / name for name in PROJECT_FILES}
    missing = [str(p) for p in project.values() if not p.is_file()]
    if missing:
        raise MegacppEnvError(
            f"this megacpp-env cannot stage its own source for an image build: missing {', '.join(missing)} "
            "(reinstall megacpp-env, or run build from its checkout)"
        )
    return {**project, **_package_files(PACKAGE_DIR)}


def origin() -> str:
    """Where ``tool_files`` come from, for notes and errors."""
    checkout = PACKAGE_DIR.parent
    return f"the checkout {checkout}" if is_tool_source(checkout) else f"the installed package {PACKAGE_DIR}"
