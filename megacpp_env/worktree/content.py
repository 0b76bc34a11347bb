"""The one worktree judge: what a checkout holds compared with a commit, by content alone.

Every answer here comes from the bytes and modes on disk compared with the commit's tree, never
from git's own view of the work tree, which a user or an attacker can blind:

- the index's flags (``assume-unchanged``, ``skip-worktree``) play no part; they are reported as
  findings of their own (``Delta.assume_unchanged``, ``Delta.skip_worktree``);
- no ignore source but the checkout's own tracked ``.gitignore`` files: ``.git/info/exclude``,
  ``core.excludesFile`` (global or system) are never read, and an untracked ``.gitignore`` hides
  nothing (the directory that holds one is listed without any ignore rule);
- the uncommitted diff is a tree-to-tree diff between the commit and a tree made of the work
  tree's raw bytes (no clean filters, no end-of-line conversion), written into a temporary object
  store: the checkout's repository is never written.

``verify-checkout``, ``build-source``, ``snapshot`` (and its cache), golden captures, overlays and
``facts extract`` all read a checkout through this module. All git calls go through ``megacpp_env.git``.
"""

# os.path on purpose: every tracked file of a checkout is read once per inspection.
# ruff: noqa: PTH114

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
import tempfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from megacpp_env import git
from megacpp_env.worktree.provenance import PROVENANCE_NAME

# Settings that could change what git lists as untracked in this module's reads (a repository's own
# config may set them): a case-folding match, another excludes file.
STRICT = {"core.excludesFile": "/dev/null", "core.ignoreCase": "false", "core.quotePath": "false"}
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class Change:
    """A path that differs from the commit: ``M`` modified, ``A`` added (in the index, not in the
    commit), ``D`` deleted, ``?`` untracked."""

    status: str
    path: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Delta:
    """A checkout's work tree against one commit, by content."""

    tracked: tuple[str, ...] = ()  # every file (blob) of the commit's tree, sorted
    modified: tuple[str, ...] = ()  # tracked; bytes, mode or kind differ
    deleted: tuple[str, ...] = ()  # tracked; nothing on disk
    added: tuple[str, ...] = ()  # in the index but not in the commit, present on disk
    untracked: tuple[str, ...] = ()  # in neither; not ignored by a tracked .gitignore ("dir/": a nested repository)
    ignored_dirs: tuple[str, ...] = ()  # wholly ignored by a tracked .gitignore: never read
    assume_unchanged: tuple[str, ...] = ()  # index flags (findings: git would not look at these files)
    skip_worktree: tuple[str, ...] = ()

    @property
    def changed(self) -> tuple[str, ...]:
        """Tracked paths whose content differs from the commit (modified or deleted), sorted."""
        return tuple(sorted((*self.modified, *self.deleted)))

    @property
    def new(self) -> tuple[str, ...]:
        """Paths on disk the commit does not have (added and untracked), sorted."""
        return tuple(sorted((*self.added, *self.untracked)))

    @property
    def dirty(self) -> bool:
        return bool(self.modified or self.deleted or self.added or self.untracked)

    def changes(self) -> tuple[Change, ...]:
        out = [Change(status="M", path=p) for p in self.modified]
        out += [Change(status="D", path=p) for p in self.deleted]
        out += [Change(status="A", path=p) for p in self.added]
        out += [Change(status="?", path=p) for p in self.untracked]
        return tuple(sorted(out, key=lambda c: c.path))


def _ls(path: Path, args: Iterable[str]) -> list[str]:
    raw = git.run_git(["ls-files", "-z", *args], path, config=STRICT).stdout
    return [os.fsdecode(p) for p in raw.split(b"\0") if p]


@dataclass(frozen=True, kw_only=True, slots=True)
class Index:
    """What the index lists (``git ls-files -v --cached``), and its flags: a lower-case tag is
    assume-unchanged, ``S``/``s`` skip-worktree."""

    paths: frozenset[str]
    assume_unchanged: tuple[str, ...]
    skip_worktree: tuple[str, ...]


def read_index(path: Path) -> Index:
    paths, assume, skip = set(), [], []
    for entry in _ls(path, ["-v", "--cached"]):
        tag, rel = entry[:1], entry[2:]
        paths.add(rel)
        if tag.islower():
            assume.append(rel)
        if tag in ("S", "s"):
            skip.append(rel)
    return Index(paths=frozenset(paths), assume_unchanged=tuple(sorted(assume)), skip_worktree=tuple(sorted(skip)))


def _untracked(path: Path, tracked: frozenset[str]) -> tuple[list[str], list[str]]:
    """(untracked files, wholly ignored directories): ignored only by tracked ``.gitignore`` files."""
    listed = set(_ls(path, ["--others", "--exclude-per-directory=.gitignore"]))
    ignored = _ls(path, ["--others", "--ignored", "--directory", "--exclude-per-directory=.gitignore"])
    # an untracked .gitignore is not the checkout's own: under its directory nothing is ignored
    rogue = sorted({posixpath.dirname(p) for p in (*listed, *ignored) if posixpath.basename(p) == ".gitignore"})
    for directory in rogue:
        listed.update(_ls(path, ["--others", "--", f":(literal){directory}/" if directory else ":(literal)."]))
    under = tuple(f"{d}/" for d in rogue if d)
    ignored_dirs = [d for d in ignored if d.endswith("/") and "" not in rogue and not d.startswith(under)]
    return sorted(p for p in listed if p not in tracked and not own_record(p)), sorted(ignored_dirs)


def own_record(rel: str) -> bool:
    """The tool's own provenance record at the top of a checkout (and an interrupted write of it):
    megacpp-env's, never the checkout's content."""
    return rel == PROVENANCE_NAME or (rel.startswith(f".{PROVENANCE_NAME}.") and rel.endswith(".tmp"))


@dataclass(frozen=True, kw_only=True, slots=True)
class Listing:
    """What a judgement reads, listed without reading any file's bytes: the commit's files and
    submodules, the index, what is new on disk, what a tracked ``.gitignore`` hides. A cache of a
    judgement keys on the stats of exactly these (``snapshot.verify.checkout_cache``)."""

    files: dict[str, tuple[str, str]]  # the commit's files: path -> (mode, blob id)
    gitlinks: dict[str, str]  # the commit's submodules: path -> commit
    index: Index
    untracked: tuple[str, ...]
    ignored_dirs: tuple[str, ...]

    @property
    def indexed(self) -> frozenset[str]:
        """In the index but not in the commit (nor a submodule)."""
        return self.index.paths - self.files.keys() - self.gitlinks.keys()


def listing(path: Path | str, rev: str) -> Listing:
    path = Path(path)
    files, gitlinks = git.tree_entries(path, rev)
    index = read_index(path)
    untracked, ignored = _untracked(path, frozenset(files) | (index.paths - gitlinks.keys()))
    skip = frozenset(d.rstrip("/") for d in (*ignored, *untracked, *gitlinks) if d.endswith("/") or d in gitlinks)
    special = _special_entries(path, skip)
    if special:
        untracked = sorted({*untracked, *special})
    return Listing(files=files, gitlinks=gitlinks, index=index, untracked=tuple(untracked), ignored_dirs=tuple(ignored))


def _special_entries(root: Path, skip: frozenset[str]) -> list[str]:
    """The FIFOs, sockets and devices of the work tree: git lists none of them (``ls-files --others``
    passes over what is not a file, a link or a directory), yet each is something the commit does not
    have. Any name, ignored or not (a FIFO is never a build's output worth hiding); not under a ``.git``,
    a submodule, a nested repository or a wholly ignored directory (``skip``), never through a link.
    One ``scandir`` a directory: the kinds come from the directory entries, nothing is opened."""
    found: list[str] = []
    todo = [""]
    while todo:
        rel_dir = todo.pop()
        try:
            with os.scandir(root / rel_dir) as entries:
                listed = list(entries)
        except OSError:
            continue
        for entry in listed:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.name == ".git" or rel in skip:
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(rel)
                elif not entry.is_file(follow_symlinks=False) and not entry.is_symlink():
                    found.append(rel)
            except OSError:
                continue
    return found


def _linked_dirs(root: Path, files: Iterable[str]) -> frozenset[str]:
    """The directories of the commit's files that are symbolic links on disk (a file under one is
    read through the link, from wherever it points: never the commit's own)."""
    dirs = {posixpath.dirname(f) for f in files} - {""}
    parents = {p for d in dirs for p in _ancestors(d)}
    return frozenset(d for d in parents if os.path.islink(root / d))


def _ancestors(rel: str) -> Iterable[str]:
    while rel:
        yield rel
        rel = posixpath.dirname(rel)


def _under(rel: str, dirs: frozenset[str]) -> bool:
    return any(parent in dirs for parent in _ancestors(posixpath.dirname(rel)))


def delta(path: Path | str, rev: str) -> Delta:
    """The work tree at ``path`` against ``rev`` (a commit of its repository), by content. Submodules
    (gitlinks) are left out: ``git.submodule_status`` and a delta of each submodule judge them."""
    path = Path(path)
    fmt = git.object_format(path)
    found = listing(path, rev)
    modified: list[str] = []
    deleted: list[str] = []
    linked = _linked_dirs(path, found.files)
    for rel, entry in found.files.items():
        if linked and _under(rel, linked):  # beyond a symbolic link: not where the commit puts it
            (modified if os.path.lexists(path / rel) else deleted).append(rel)
            continue
        got = git.worktree_entry(path / rel, fmt)
        if got != entry:
            (modified if got is not None or os.path.lexists(path / rel) else deleted).append(rel)
    added = sorted(p for p in found.indexed if os.path.lexists(path / p))
    return Delta(
        tracked=tuple(sorted(found.files)), modified=tuple(sorted(modified)), deleted=tuple(sorted(deleted)),
        added=tuple(added), untracked=found.untracked, ignored_dirs=found.ignored_dirs,
        assume_unchanged=found.index.assume_unchanged, skip_worktree=found.index.skip_worktree,
    )  # fmt: skip


def untracked_hash(path: Path | str, files: Iterable[str]) -> str:
    """sha256 over the sorted new entries' names and contents (what the diff cannot hold). A nested
    repository (``dir/``) counts by everything under it; a FIFO, socket or device by its kind (never
    opened: a FIFO would block)."""
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(os.fsencode(rel) + b"\0" + entry_digest(Path(path) / rel))
    return h.hexdigest()


def entry_digest(file: Path) -> bytes:
    """The digest of one entry on disk: a file's bytes, a link's target, a directory's whole tree."""
    try:
        st = os.lstat(file)
    except (FileNotFoundError, NotADirectoryError):
        return b"gone"
    if stat.S_ISLNK(st.st_mode):
        return hashlib.sha256(b"link:" + os.fsencode(os.readlink(file))).digest()  # noqa: PTH115
    if stat.S_ISDIR(st.st_mode):
        h = hashlib.sha256(b"dir:")
        for entry in sorted(os.scandir(file), key=lambda e: e.name):
            h.update(os.fsencode(entry.name) + b"\0" + entry_digest(Path(entry.path)))
        return h.digest()
    if not stat.S_ISREG(st.st_mode):
        return hashlib.sha256(b"special:" + oct(stat.S_IFMT(st.st_mode)).encode()).digest()
    h = hashlib.sha256(b"x" if st.st_mode & 0o111 else b"-")
    fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.digest()


# ---- the uncommitted diff -------------------------------------------------------------------------


def diff_bytes(path: Path | str, rev: str, found: Delta, submodules: Iterable[git.SubmoduleState] = ()) -> bytes:
    """``git diff`` between ``rev`` and the work tree's content (binary, with modes, creations and
    deletions; submodules by commit), the bytes ``git apply --index`` re-creates. Empty when the
    tracked content and the submodules' commits equal ``rev``'s."""
    path = Path(path)
    moved = [s for s in submodules if "/" not in s.path and s.actual is not None and not s.matches]
    if not (found.modified or found.deleted or found.added or moved):
        return b""
    fmt = git.object_format(path)
    objects = git.git_path(path, "objects")
    with tempfile.TemporaryDirectory(prefix="megacpp-diff-") as tmp:
        Path(tmp, "objects").mkdir()
        env = {
            "GIT_INDEX_FILE": str(Path(tmp, "index")),
            "GIT_OBJECT_DIRECTORY": str(Path(tmp, "objects")),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects),
        }
        git.run_git(["read-tree", rev], path, env=env)
        lines = [_index_line(path, rel, Path(tmp, "objects"), fmt) for rel in (*found.modified, *found.added)]
        zero = "0" * (64 if fmt == "sha256" else 40)
        lines += [f"0 {zero}\t{rel}" for rel in found.deleted]
        lines += [f"{git.GITLINK_MODE} {s.actual}\t{s.path}" for s in moved]
        data = b"".join(os.fsencode(line) + b"\0" for line in lines)
        git.run_git(["update-index", "-z", "--index-info"], path, env=env, input_bytes=data)
        tree = git.git_text(["write-tree"], path, env=env)
        out: bytes = git.run_git(["diff", rev, tree, *git.DIFF_STABLE], path, env=env).stdout
    return out


def _index_line(root: Path, rel: str, objects: Path, fmt: str) -> str:
    """``MODE OID\\tPATH`` of a work-tree file (its raw bytes stored as a loose object in ``objects``);
    ``0 ...`` (removed from the tree) when it is no longer a file or symlink."""
    data, mode = _raw(root / rel)
    if data is None:
        return f"0 {'0' * (64 if fmt == 'sha256' else 40)}\t{rel}"
    body = b"blob %d\0" % len(data) + data
    oid = hashlib.new(fmt, body).hexdigest()
    target = objects / oid[:2] / oid[2:]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(zlib.compress(body))
    return f"{mode} {oid}\t{rel}"


def _raw(file: Path) -> tuple[bytes | None, str]:
    try:
        st = os.lstat(file)
    except (FileNotFoundError, NotADirectoryError):
        return None, ""
    if stat.S_ISLNK(st.st_mode):
        return os.fsencode(os.readlink(file)), git.SYMLINK_MODE  # noqa: PTH115
    if not stat.S_ISREG(st.st_mode):
        return None, ""
    fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        return fh.read(), ("100755" if st.st_mode & 0o111 else "100644")


# ---- a checkout as a whole --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Worktree:
    """A checkout's HEAD and its content delta (None before the first commit)."""

    path: str
    head: str | None
    delta: Delta
    submodules: tuple[git.SubmoduleState, ...] = ()

    def diff(self) -> bytes:
        return diff_bytes(self.path, self.head, self.delta, self.submodules) if self.head else b""

    def diff_hash(self) -> str:
        return hashlib.sha256(self.diff()).hexdigest()

    def untracked_hash(self) -> str:
        return untracked_hash(self.path, self.delta.untracked)


def read(path: Path | str) -> Worktree:
    """The checkout at ``path`` (the top of a git work tree): HEAD and what differs from it."""
    path = Path(path)
    head = git.head_commit(path)
    if head is None:
        untracked, ignored = _untracked(path, read_index(path).paths)
        return Worktree(path=str(path), head=None, delta=Delta(untracked=tuple(untracked), ignored_dirs=tuple(ignored)))
    return Worktree(path=str(path), head=head, delta=delta(path, head), submodules=git.submodule_status(path))


def is_dirty(path: Path | str, *, submodule_contents: bool = True) -> bool:
    """True when the checkout differs from HEAD by content, a submodule moved off its pinned commit,
    or (``submodule_contents``) an initialised submodule differs from its own HEAD."""
    tree = read(path)
    if tree.delta.dirty or any(s.actual is not None and not s.matches for s in tree.submodules):
        return True
    return submodule_contents and any(
        read(Path(path) / s.path).delta.dirty for s in tree.submodules if s.actual is not None
    )
