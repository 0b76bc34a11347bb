"""What a mutation does to a world, one small step at a time.

A step names its target symbolically (``site/alpha/core.py``, ``co/train.py``, ``venv/bin/x``,
``root/...``), so the same mutation reads the same in every world and in a failure message. Each
step's ``apply`` returns what it did, in words; ``env`` adds what the CLI calls of the example
must see (git configuration chosen by environment variables).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tests.differential.world import IGNORE_PREFIX, World


def resolve(world: World, target: str) -> Path:
    base, _, rel = target.partition("/")
    roots = {"site": world.site, "co": world.checkout, "venv": world.venv, "root": world.root}
    return roots[base] / rel


def _keep_mtime(path: Path) -> tuple[int, int]:
    st = path.lstat()
    return st.st_atime_ns, st.st_mtime_ns


def flip_byte(data: bytes, offset: int, xor: int) -> bytes:
    """``data`` with one byte changed (never to itself: ``xor`` is taken from 1..255)."""
    i = offset % len(data)
    return data[:i] + bytes([data[i] ^ (xor % 255 + 1)]) + data[i + 1 :]


def write_in_place(path: Path, data: bytes, *, restore_mtime: bool) -> None:
    """Overwrite ``path`` (same inode), then, if asked, put its atime and mtime back: only its
    ctime (which no user tool can set) still tells."""
    stamps = _keep_mtime(path)
    with path.open("r+b") as fh:
        fh.write(data)
        fh.truncate()
    if restore_mtime:
        os.utime(path, ns=stamps)


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    def apply(self, world: World) -> str:
        raise NotImplementedError

    def env(self, world: World) -> dict[str, str]:
        return {}

    def tag(self, world: World) -> str:
        """What the step hits, told before it runs (a cache entry's kind); "" for most steps."""
        return ""


@dataclass(frozen=True, kw_only=True, slots=True)
class EditBytes(Step):
    """A same-size edit in place: one byte flipped."""

    target: str
    offset: int
    xor: int
    restore_mtime: bool

    def apply(self, world: World) -> str:
        path = resolve(world, self.target)
        data = path.read_bytes()
        write_in_place(path, flip_byte(data, self.offset, self.xor), restore_mtime=self.restore_mtime)
        return f"flipped byte {self.offset % len(data)} of {self.target}{_restored(self.restore_mtime)}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Rewrite(Step):
    """New content in place; ``drop_pyc`` removes the module's byte code (a same-size edit with its
    mtime restored would otherwise still import the old code from ``__pycache__``)."""

    target: str
    content: str
    restore_mtime: bool
    drop_pyc: bool = False

    def apply(self, world: World) -> str:
        path = resolve(world, self.target)
        write_in_place(path, self.content.encode(), restore_mtime=self.restore_mtime)
        if self.drop_pyc:
            for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
                pyc.unlink()
        return f"rewrote {self.target} ({len(self.content)} bytes){_restored(self.restore_mtime)}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Replace(Step):
    """A same-size replacement of one substring (``Version: 1.0`` -> ``Version: 1.1``)."""

    target: str
    old: str
    new: str
    restore_mtime: bool

    def apply(self, world: World) -> str:
        path = resolve(world, self.target)
        text = path.read_text()
        assert self.old in text and len(self.old) == len(self.new), (self.target, self.old)
        write_in_place(path, text.replace(self.old, self.new, 1).encode(), restore_mtime=self.restore_mtime)
        return f"{self.target}: {self.old!r} -> {self.new!r}{_restored(self.restore_mtime)}"


@dataclass(frozen=True, kw_only=True, slots=True)
class ShadowPth(Step):
    """A ``.pth`` path line naming ``shadow/`` (six 9.9.9): a new file, or in place of a hook's line."""

    target: str
    restore_mtime: bool

    def apply(self, world: World) -> str:
        path = resolve(world, self.target)
        line = f"{world.shadow}\n".encode()
        if path.exists():
            write_in_place(path, line, restore_mtime=self.restore_mtime)
            return f"{self.target} now names the shadow directory{_restored(self.restore_mtime)}"
        path.write_bytes(line)
        return f"added {self.target} naming the shadow directory"


@dataclass(frozen=True, kw_only=True, slots=True)
class HookShadow(Step):
    """The startup hook a ``.pth`` imports, rewritten (same size) to put ``shadow/`` (six 9.9.9)
    first on ``sys.path``."""

    target: str
    restore_mtime: bool

    def apply(self, world: World) -> str:
        text = world.hook_text(evil=True)
        return Rewrite(target=self.target, content=text, restore_mtime=self.restore_mtime, drop_pyc=True).apply(world)


@dataclass(frozen=True, kw_only=True, slots=True)
class AddFile(Step):
    """A new file; ``restore_dir_mtime`` puts its directory's mtime back (a stat-based listing of
    untracked files, git's untracked cache, then has only the directory's ctime to go on)."""

    target: str
    content: str
    restore_dir_mtime: bool = False

    def apply(self, world: World) -> str:
        path = resolve(world, self.target)
        parent_stamps = _keep_mtime(path.parent) if path.parent.is_dir() else None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.content)
        if self.restore_dir_mtime and parent_stamps is not None:
            os.utime(path.parent, ns=parent_stamps)
        return f"added {self.target}{_restored(self.restore_dir_mtime, 'directory mtime')}"


@dataclass(frozen=True, kw_only=True, slots=True)
class AddSpecial(Step):
    """A new FIFO or socket: git lists neither as untracked (``ls-files --others`` passes over them)."""

    target: str
    kind: str  # "fifo" or "socket"
    restore_dir_mtime: bool = False

    def apply(self, world: World) -> str:
        path = resolve(world, self.target)
        parent_stamps = _keep_mtime(path.parent) if path.parent.is_dir() else None
        path.parent.mkdir(parents=True, exist_ok=True)
        make_special(path, self.kind)
        if self.restore_dir_mtime and parent_stamps is not None:
            os.utime(path.parent, ns=parent_stamps)
        return f"added a {self.kind} {self.target}{_restored(self.restore_dir_mtime, 'directory mtime')}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Append(Step):
    target: str
    content: str

    def apply(self, world: World) -> str:
        with resolve(world, self.target).open("a") as fh:
            fh.write(self.content)
        return f"appended {len(self.content)} bytes to {self.target}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Remove(Step):
    target: str

    def apply(self, world: World) -> str:
        resolve(world, self.target).unlink()
        return f"removed {self.target}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Chmod(Step):
    target: str
    mode: int

    def apply(self, world: World) -> str:
        os.chmod(resolve(world, self.target), self.mode)
        return f"chmod {self.mode:o} {self.target}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Special(Step):
    """The target replaced by something that is not a regular file: a FIFO, a directory, or a
    symlink to /dev/zero (endless)."""

    target: str
    kind: str

    def apply(self, world: World) -> str:
        path = resolve(world, self.target)
        path.unlink()
        make_special(path, self.kind)
        return f"{self.target} replaced by a {self.kind}"


def make_special(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "directory":
        path.mkdir(mode=0o700)
        (path / "inside").write_text("x\n")
    elif kind == "devzero":
        path.symlink_to("/dev/zero")
    elif kind == "socket":
        import socket

        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(path))
    else:
        raise ValueError(kind)


@dataclass(frozen=True, kw_only=True, slots=True)
class RecordRow(Step):
    """A row written into a distribution's RECORD: appended, or in place of its first row."""

    dist_info: str
    name: str  # what is wrong with the row, for messages (the row itself may be 5000 bytes long)
    row: bytes = field(repr=False)
    replace_first: bool
    restore_mtime: bool

    def apply(self, world: World) -> str:
        path = world.site / self.dist_info / "RECORD"
        lines = path.read_bytes().splitlines(keepends=True)
        lines = [self.row + b"\n", *lines[1:]] if self.replace_first else [*lines, self.row + b"\n"]
        write_in_place(path, b"".join(lines), restore_mtime=self.restore_mtime)
        where = "in place of its first row" if self.replace_first else "appended"
        return f"{self.dist_info}/RECORD: row {self.row[:80]!r} ({self.name}) {where}{_restored(self.restore_mtime)}"


# ---- git ----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexFlag(Step):
    """``git update-index --assume-unchanged`` or ``--skip-worktree`` on a tracked file."""

    file: str
    flag: str

    def apply(self, world: World) -> str:
        world.git("update-index", f"--{self.flag}", self.file)
        return f"git update-index --{self.flag} {self.file}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Stage(Step):
    """``git add`` (``--sparse``: a skip-worktree entry is left as it is instead of failing)."""

    file: str

    def apply(self, world: World) -> str:
        world.git("add", "--sparse", "--", self.file)
        return f"git add {self.file}"


def ignore_file(world: World, source: str) -> Path:
    return world.root / f"ignore-{source}"


@dataclass(frozen=True, kw_only=True, slots=True)
class IgnoreSource(Step):
    """Turn one of git's user-configurable ignore sources on: it hides ``IGNORE_PREFIX[source]*``."""

    source: str

    def apply(self, world: World) -> str:
        pattern = f"{IGNORE_PREFIX.get(self.source, '')}*\n"
        if self.source == "default-global-ignore":  # git's default core.excludesFile, no config needed
            _write(world.home / ".config" / "git" / "ignore", pattern)
        elif self.source == "untracked-gitignore":  # a .gitignore nobody committed, hiding itself too
            _write(world.checkout / "hid" / ".gitignore", "*\n")
        elif self.source in CONFIG_FILE:
            _write(ignore_file(world, self.source), pattern)
            _git_config(
                world, CONFIG_FILE[self.source](world), "core.excludesFile", str(ignore_file(world, self.source))
            )
        elif self.source == "env-config":
            _write(ignore_file(world, self.source), pattern)
        return f"ignore source {self.source} on"

    def env(self, world: World) -> dict[str, str]:
        if self.source == "xdg-config":
            return {"XDG_CONFIG_HOME": str(world.root / "xdg")}
        if self.source == "git-config-global":
            return {"GIT_CONFIG_GLOBAL": str(world.root / "gitconfig-global")}
        if self.source == "env-config":
            value = str(ignore_file(world, self.source))
            return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "core.excludesFile", "GIT_CONFIG_VALUE_0": value}
        return {}


CONFIG_FILE = {
    "home-gitconfig": lambda w: w.home / ".gitconfig",
    "xdg-config": lambda w: w.root / "xdg" / "git" / "config",
    "git-config-global": lambda w: w.root / "gitconfig-global",
    "git-config-system": lambda w: w.etc / "gitconfig",
    "local-config": lambda w: w.checkout / ".git" / "config",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class GitKnob(Step):
    """A git setting that makes git's own stat checks blinder (``core.trustctime=false``, ...),
    in the checkout's own configuration or the system one."""

    key: str
    value: str
    where: str  # "local-config" or "git-config-system"

    def apply(self, world: World) -> str:
        _git_config(world, CONFIG_FILE[self.where](world), self.key, self.value)
        return f"git config ({self.where}) {self.key}={self.value}"


@dataclass(frozen=True, kw_only=True, slots=True)
class UntrackedCache(Step):
    """git's untracked cache switched on and filled (``git status`` stores it in the index): git
    then lists untracked files from directory stats it recorded."""

    def apply(self, world: World) -> str:
        world.git("config", "core.untrackedCache", "true")
        world.git("update-index", "--untracked-cache")
        world.git("status", "--porcelain", "--untracked-files=all")
        return "git untracked cache on and filled"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _git_config(world: World, file: Path, key: str, value: str) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    world.git("config", "--file", str(file), key, value)


def _restored(restored: bool, what: str = "mtime") -> str:
    return f", {what} restored" if restored else ""
