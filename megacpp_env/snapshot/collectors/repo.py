"""The training repository the snapshot is taken for: ``--repo PATH``, by default the git work tree
of the working directory. Its commit, branch, whether it has local changes, and a digest of those
changes, judged by content like every checkout (``worktree.content``: no index flag or ignore
setting hides a change; untracked files are counted, not hashed: a training tree can hold gigabytes
of them).

Recorded outside the digest (an unhashed area): the digest says whether the *environment* is the
same, so a golden check or a bisect across commits of the training code keeps comparing the
environment only. All git calls go through ``megacpp_env.git``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.errors import MegacppEnvError, SpecError

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context
    from megacpp_env.snapshot.options import Cache

EMPTY_DIFF = "sha256:" + hashlib.sha256(b"").hexdigest()


def collect(
    path: Path, cache: Cache | None = None, *, environ: Mapping[str, str] | None = None, notes: list[str] | None = None
) -> dict[str, Any]:
    """The repository containing ``path``; ``{"path": ..., "git": false}`` when there is none. Its
    facts are reused while the checkout cache's signature of everything the judge read holds."""
    from megacpp_env import git
    from megacpp_env.snapshot.verify import checkout_cache

    top = git.toplevel(path)
    if top is None:
        return {"path": str(path), "git": False}
    return checkout_cache.cached(
        top,
        "training-repository",
        cache,
        lambda: _inspect(top),
        environ=environ or {},
        notes=[] if notes is None else notes,
    )


def _inspect(top: Path) -> dict[str, Any]:
    from megacpp_env import git
    from megacpp_env.worktree import content

    try:
        branch = git.git_text(["symbolic-ref", "-q", "--short", "HEAD"], top, check=False) or None
        tree = content.read(top)
        changed = len(tree.delta.changed) + len(tree.delta.added)
        digest = "sha256:" + tree.diff_hash() if changed and tree.head else EMPTY_DIFF
        remotes = git.remote_urls(top)
    except (MegacppEnvError, OSError) as exc:
        return {"path": str(top), "git": True, "error": str(exc)}
    return {
        "path": str(top),
        "git": True,
        "commit": tree.head,
        "branch": branch,
        "dirty": tree.delta.dirty,
        "changed": changed,
        "untracked": len(tree.delta.untracked),
        "diff_digest": digest,
        "remotes": remotes,
    }


def check_repo(path: Path, *, option: str = "--repo") -> Path:
    """An explicit ``--repo`` must be a directory inside a git work tree: refused before anything is
    collected (the default, the working directory, may be in none)."""
    from megacpp_env import git

    if not Path(path).is_dir():
        raise SpecError(f"{path}: not a directory", key=option)
    if git.toplevel(Path(path)) is None:
        raise SpecError(f"{path}: not inside a git work tree", key=option, remedy="name the training repository")
    return Path(path)


def start(ctx: Context) -> Callable[[], dict[str, Any]]:
    where = ctx.opts.repo
    if where is None:
        try:
            where = Path.cwd()
        except OSError as exc:  # the working directory was removed
            gone = {"path": None, "git": False, "error": f"no working directory: {exc.strerror}"}
            return lambda: gone
    return lambda: collect(Path(where), ctx.plan.cache, environ=ctx.environ, notes=ctx.notes)
