"""A checkout's facts, reused while a stat signature says it has not changed.

Inspecting a checkout runs about ten git commands (HEAD, status, the binary diff, untracked files
three ways, the submodule tree, the remotes); on a warm box they are most of what a repeat snapshot
spends on checkouts. One ``git status`` (git's own stat-based check of the working tree against
the index, untracked files included) plus one ``stat`` of HEAD, the index, the config, the refs,
the provenance record, the overlay journal and of every path ``status`` lists (a dirty file edited
again changes its mtime, not the status line) make a signature; while it matches the one stored
with the facts in the hash cache, the facts are reused. A checkout with submodules, a linked
worktree (``.git`` is a file) or a spec overlay is always inspected in full, as is any checkout
whose signature holds a stat younger than the racy window.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from megacpp_env import git
from megacpp_env.errors import MegacppEnvError
from megacpp_env.fsutil import atomic_write_text
from megacpp_env.worktree.provenance import PROVENANCE_NAME

FORMAT = 1
RACY_NS = 2_000_000_000
STATUS = ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=none"]


def _stat(path: Path) -> list[int] | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode]


def _listed(status: bytes) -> list[str]:
    """The paths ``git status -z`` names (a rename's second path included)."""
    return sorted({os.fsdecode(e[3:] if len(e) > 3 and e[2:3] == b" " else e) for e in status.split(b"\0") if e})


def signature(path: Path, key: str) -> tuple[str, int] | None:
    """(digest, newest mtime) of what the facts of the checkout at ``path`` depend on; None when
    this checkout is not cached (no .git directory, submodules)."""
    dot = path / ".git"
    if not dot.is_dir() or (path / ".gitmodules").exists():
        return None
    head = (dot / "HEAD").read_bytes() if (dot / "HEAD").is_file() else b""
    ref = head.decode("utf-8", "replace").removeprefix("ref: ").strip() if head.startswith(b"ref: ") else ""
    status = git.run_git(STATUS, path, env={"GIT_OPTIONAL_LOCKS": "0"}).stdout  # a read never rewrites the index
    stats = {
        name: _stat(p)
        for name, p in {
            "HEAD": dot / "HEAD", "index": dot / "index", "config": dot / "config", "packed-refs": dot / "packed-refs",
            "ref": dot / ref if ref else dot / "HEAD", "provenance": path / PROVENANCE_NAME,
            "journal": dot / "megacpp-overlay.json", "exclude": dot / "info" / "exclude", "shallow": dot / "shallow",
        }.items()
    }  # fmt: skip
    files = {rel: _stat(path / rel) for rel in _listed(status)}
    parts = {"format": FORMAT, "key": key, "head": head.decode("utf-8", "replace"), "stats": stats, "files": files,
             "status": hashlib.sha256(status).hexdigest()}  # fmt: skip
    newest = max((s[0] for s in [*stats.values(), *files.values()] if s), default=0)
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest(), newest


def _file(cache_dir: Path, path: Path) -> Path:
    return cache_dir / f"checkout-{hashlib.sha256(str(path).encode()).hexdigest()[:16]}.json"


def cached(path: Path, key: str, cache_dir: Path | None, inspect: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``inspect()``'s facts for the checkout at ``path``, reused while its signature holds."""
    if cache_dir is None:
        return inspect()
    try:
        sig = signature(path, key)
    except (MegacppEnvError, OSError):  # a checkout git cannot read: the full inspection says why
        sig = None
    if sig is None:
        return inspect()
    where = _file(cache_dir, path)
    with contextlib.suppress(OSError, ValueError):
        stored = json.loads(where.read_text(encoding="utf-8"))
        if isinstance(stored, dict) and stored.get("signature") == sig[0] and isinstance(stored.get("facts"), dict):
            facts: dict[str, Any] = stored["facts"]
            return facts
    started = time.time_ns()
    facts = inspect()
    after = signature(path, key)
    if after is not None and after[0] == sig[0] and after[1] < started - RACY_NS and "error" not in facts:
        with contextlib.suppress(OSError):
            atomic_write_text(where, json.dumps({"signature": sig[0], "facts": facts}, sort_keys=True))
    return facts
