"""The ``.pth`` file that wires the runtime patches into an interpreter, and its (un)installation.

The file is NEW (``megacpp_env_runtime.pth`` in purelib); no installed file is ever edited. Its one
line uses only ``os`` (imported by every interpreter before .pth files are read), so with every
gate off it imports nothing. The shipped copy ``megacpp_env/runtime/megacpp_env_runtime.pth`` is
what ``pth_text()`` generates from the catalog (a test keeps them equal).
"""

from __future__ import annotations

import sysconfig
from pathlib import Path

from megacpp_env.fsutil import atomic_write_text
from megacpp_env.runtime.catalog import PATCHES, TRUTHY

PTH_NAME = "megacpp_env_runtime.pth"
_ON_PATH = "try:\\n import megacpp_env.runtime.hook as h\\nexcept ImportError:\\n pass\\nelse:\\n h.install()"


def pth_text() -> str:
    gates = tuple(sorted(gate for gate, _desc in PATCHES.values()))
    return (
        "import os; any(os.environ.get(g, '').strip().lower() in "
        f'{TRUTHY!r} for g in {gates!r}) and exec("{_ON_PATH}")\n'
    )


def purelib() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def install(directory: Path | None = None) -> tuple[Path, bool]:
    """Write the .pth into ``directory`` (default: this interpreter's purelib). Returns (path, changed)."""
    path = (directory or purelib()) / PTH_NAME
    return path, atomic_write_text(path, pth_text())


def uninstall(directory: Path | None = None) -> tuple[Path, bool]:
    path = (directory or purelib()) / PTH_NAME
    existed = path.exists()
    path.unlink(missing_ok=True)
    return path, existed


def installed(directory: Path | None = None) -> Path | None:
    path = (directory or purelib()) / PTH_NAME
    return path if path.is_file() else None
