"""A checkout's facts, reused while a stat signature of everything the judge read says nothing changed.

The full inspection (``worktree.status.checkout_state``: by content, ``worktree.content``) reads
every tracked file's bytes, lists what is new on disk, and reads HEAD, the index (its flags and
the files added to it), the config (remotes) and the checkout's own records. The signature is one
``lstat`` of each of those, and no git call at all:

- per repository (the checkout and each initialised submodule, recursively): ``.git`` (a directory,
  or a gitfile and the directory it names), HEAD, the ref it names, packed-refs, the index, the
  config, shallow, the object store's alternates and pack directory;
- every file of HEAD's tree, every new entry (everything under a nested repository), and every
  directory of the work tree but ``.git`` and what a tracked ``.gitignore`` hides wholly (a file
  added or removed anywhere changes its directory's mtime; an untracked ``.gitignore`` is a new
  file, and its directory is then never skipped);
- the provenance record, the overlay journal, and the user's and the system's git config files.

An in-place edit that restores the mtime still changes the ctime, which no user-level tool sets
back. What the judge listed (HEAD's files, new entries, hidden directories, the submodules) is
stored with the facts in a sealed cache file (``cachefile``); the signature is taken before and
after the full inspection, and the facts are kept only when both agree and no stat is younger
than ``RACY_NS``. A checkout with an overlay of the spec is always inspected in full.
"""

# os.path on purpose: every file of a checkout is stat-ed each snapshot.
# ruff: noqa: PTH113, PTH118

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.errors import MegacppEnvError
from megacpp_env.snapshot.verify import cachefile
from megacpp_env.worktree.provenance import PROVENANCE_NAME

if TYPE_CHECKING:
    from megacpp_env.snapshot.options import Cache

FORMAT = 2
RACY_NS = 2_000_000_000
LIMIT = 256 << 20
GIT_FILES = ("HEAD", "packed-refs", "index", "config", "config.worktree", "shallow", "megacpp-overlay.json",
             "objects/info/alternates", "objects/pack", "objects")  # fmt: skip


def _stat(path: str) -> list[int] | None:
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        return None
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode]


@dataclass(frozen=True, kw_only=True, slots=True)
class Repo:
    """What the judge listed of one repository of the checkout (``rel``: "" for the top)."""

    rel: str
    files: tuple[str, ...]  # HEAD's files
    new: tuple[str, ...]  # untracked and added entries ("dir/": a nested repository)
    hidden: tuple[str, ...]  # directories a tracked .gitignore hides wholly ("dir/")
    subs: tuple[str, ...]  # gitlink paths (initialised ones are repositories of their own)

    def to_json(self) -> dict[str, Any]:
        return {"rel": self.rel, "files": list(self.files), "new": list(self.new), "hidden": list(self.hidden),
                "subs": list(self.subs)}  # fmt: skip

    @classmethod
    def from_json(cls, raw: Any) -> Repo | None:
        try:
            parts = {k: raw[k] for k in ("files", "new", "hidden", "subs")}
            if not isinstance(raw["rel"], str) or not all(
                isinstance(v, list) and all(isinstance(x, str) for x in v) for v in parts.values()
            ):
                return None
            return cls(rel=raw["rel"], **{k: tuple(v) for k, v in parts.items()})
        except (KeyError, TypeError):
            return None


def list_repos(path: Path) -> list[Repo]:
    """What the judge reads of the checkout at ``path`` and of each initialised submodule, by name
    (git's listings; no file's bytes)."""
    from megacpp_env import git
    from megacpp_env.worktree import content

    out: list[Repo] = []

    def one(rel: str) -> None:
        root = path / rel if rel else path
        head = git.head_commit(root)
        found = content.listing(root, head) if head else None
        subs = tuple(sorted(found.gitlinks)) if found else ()
        new = (*found.untracked, *sorted(p for p in found.indexed)) if found else ()
        out.append(Repo(rel=rel, files=tuple(sorted(found.files)) if found else (), new=tuple(new),
                        hidden=found.ignored_dirs if found else (), subs=subs))  # fmt: skip
        for sub in subs:
            if os.path.lexists(os.path.join(root, sub, ".git")):
                one(f"{rel}/{sub}" if rel else sub)

    one("")
    return out


def _git_dir(root: str) -> str:
    """The repository's git directory: ``.git``, or the directory a gitfile names."""
    dot = os.path.join(root, ".git")
    if os.path.isfile(dot):
        try:
            with open(dot, encoding="utf-8", errors="replace") as fh:
                line = fh.read(4096).strip()
        except OSError:
            return dot
        if line.startswith("gitdir: "):
            return os.path.normpath(os.path.join(root, line[len("gitdir: ") :]))
    return dot


def _ref_file(git_dir: str) -> str | None:
    try:
        with open(os.path.join(git_dir, "HEAD"), encoding="utf-8", errors="replace") as fh:
            head = fh.read(4096)
    except OSError:
        return None
    return os.path.join(git_dir, head[len("ref: ") :].strip()) if head.startswith("ref: ") else None


def _walk(root: str, skip: set[str]) -> Iterator[tuple[str, list[int] | None]]:
    """(relative path, stat) of every directory under ``root`` but ``skip`` (relative, "dir/")."""
    stack = [""]
    while stack:
        rel = stack.pop()
        here = os.path.join(root, rel) if rel else root
        yield rel or ".", _stat(here)
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            child = f"{rel}/{entry.name}" if rel else entry.name
            if (
                entry.is_dir(follow_symlinks=False)
                and f"{child}/" not in skip
                and not (not rel and entry.name == ".git")
            ):
                stack.append(child)


def _everything(root: str) -> Iterator[tuple[str, list[int] | None]]:
    """(path, stat) of every entry under ``root`` (a nested repository, counted by all it holds)."""
    for here, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted([*dirs, *files]):
            full = os.path.join(here, name)
            yield full, _stat(full)


def signature(path: Path, tag: str, repos: list[Repo], environ: Mapping[str, str]) -> tuple[str, int]:
    """(digest, newest mtime) of what the judgement of the checkout at ``path`` depends on."""
    top = str(path)
    parts: dict[str, Any] = {"format": FORMAT, "tag": tag, "path": top, "repos": [],
                             "records": [_stat(os.path.join(top, PROVENANCE_NAME))],
                             "config": [_stat(p) for p in _user_configs(environ)]}  # fmt: skip
    for repo in repos:
        root = os.path.join(top, repo.rel) if repo.rel else top
        git_dir = _git_dir(root)
        ref = _ref_file(git_dir)
        inner = {f"{s}/" for s in repo.subs if os.path.lexists(os.path.join(root, s, ".git"))}
        parts["repos"].append({
            "rel": repo.rel,
            "dot": _stat(os.path.join(root, ".git")),
            "git": [_stat(git_dir), *(_stat(os.path.join(git_dir, n)) for n in GIT_FILES), _stat(ref) if ref else None],
            "files": [_stat(os.path.join(root, f)) for f in repo.files],
            "new": [[n, *(s for _p, s in _everything(os.path.join(root, n)))] if n.endswith("/")
                    else [n, _stat(os.path.join(root, n))] for n in repo.new],
            "dirs": list(_walk(root, {*repo.hidden, *inner, *(n for n in repo.new if n.endswith("/"))})),
            "bare": [[s, *(st for _p, st in _everything(os.path.join(root, s)))] for s in repo.subs
                     if f"{s}/" not in inner],
        })  # fmt: skip
    text = json.dumps(parts, sort_keys=True)
    newest = max((s[0] for s in _stats(parts) if s), default=0)
    return hashlib.sha256(text.encode()).hexdigest(), newest


def _stats(value: Any) -> Iterator[list[int]]:
    """Every stat in ``value`` (a list of five ints), found by shape."""
    if isinstance(value, list) and len(value) == 5 and all(type(x) is int for x in value):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _stats(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _stats(v)


def _user_configs(environ: Mapping[str, str]) -> list[str]:
    """The git config files outside the repository a read could see (global, XDG, system)."""
    home = environ.get("HOME", "")
    xdg = environ.get("XDG_CONFIG_HOME") or (os.path.join(home, ".config") if home else "")
    out = [environ.get("GIT_CONFIG_GLOBAL", ""), os.path.join(home, ".gitconfig") if home else "",
           os.path.join(xdg, "git", "config") if xdg else "", "/etc/gitconfig"]  # fmt: skip
    return [p for p in out if p]


def _file(cache: Cache, path: Path, tag: str) -> Path:
    """One file per checkout and use (a checkout of the spec, and the same directory as the training
    repository, are judged with other facts)."""
    digest = hashlib.sha256(os.fsencode(str(path)) + b"\0" + tag.encode()).hexdigest()[:16]
    return cache.file(f"checkout-{digest}.json")


def _load(where: Path, cache: Cache, notes: list[str]) -> tuple[str, list[Repo], dict[str, Any]] | None:
    _found, raw = cachefile.read_json(str(where), cache.key, LIMIT, notes)
    if not isinstance(raw, dict):
        return None
    repos = [Repo.from_json(r) for r in raw.get("repos") or []]
    if (
        raw.get("format") != FORMAT
        or not isinstance(raw.get("signature"), str)
        or not isinstance(raw.get("facts"), dict)
    ):
        notes.append(f"{where.name}: not a checkout cache of this version: discarded")
        return None
    if not repos or any(r is None for r in repos):
        notes.append(f"{where.name}: a listing of another shape: discarded")
        return None
    return raw["signature"], [r for r in repos if r is not None], raw["facts"]


def cached(
    path: Path,
    tag: str,
    cache: Cache | None,
    inspect: Callable[[], dict[str, Any]],
    *,
    environ: Mapping[str, str],
    notes: list[str],
) -> dict[str, Any]:
    """``inspect()``'s facts for the checkout at ``path``, reused while its signature holds."""
    if cache is None or not os.path.lexists(os.path.join(path, ".git")):
        return inspect()
    where = _file(cache, path, tag)
    stored = _load(where, cache, notes)
    if stored is not None:
        digest, repos, facts = stored
        if signature(path, tag, repos, environ)[0] == digest:
            return facts
    started = time.time_ns()
    try:
        repos = list_repos(path)
        before = signature(path, tag, repos, environ)
    except (MegacppEnvError, OSError):  # a checkout git cannot read: the full inspection says why
        return inspect()
    facts = inspect()
    after = signature(path, tag, repos, environ)
    if after[0] == before[0] and after[1] < started - RACY_NS and "error" not in facts:
        payload = {"format": FORMAT, "signature": before[0], "repos": [r.to_json() for r in repos], "facts": facts}
        note = cachefile.write(str(where), json.dumps(payload, sort_keys=True).encode(), cache.key)
        notes += [note] if note else []
    return facts
