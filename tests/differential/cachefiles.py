"""Mutations of the tool's own cache files, found as they are after the warm-up (whatever their
names and formats): edited (a byte, or a decoded value), truncated, swapped, replaced by a FIFO,
a directory or a link to /dev/zero, given to another owner, made group- or world-writable, and
*blessed*: rewritten so that they vouch for a file that was tampered with.

Formats are read, not assumed: an entry that decodes as JSON or ``marshal`` is edited value by
value, anything else byte by byte. Blessing substitutes the tampered file's new ctime for its old
one, or its new digest for its old one, wherever a decoded entry holds them, and keeps the rest
(a checksum over the entry, if the tool keeps one, is left stale on purpose: that is what it is for).
"""

from __future__ import annotations

import base64
import hashlib
import json
import marshal
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.differential.steps import Step, flip_byte, make_special, resolve, write_in_place
from tests.differential.world import World

NOBODY = 65534
Codec = tuple[Callable[[bytes], Any], Callable[[Any], bytes]]
CODECS: dict[str, Codec] = {
    "json": (json.loads, lambda o: json.dumps(o, sort_keys=True).encode()),
    "marshal": (marshal.loads, marshal.dumps),
}


def cache_files(world: World) -> list[Path]:
    """Every entry under the cache directory (directories themselves aside), in a stable order:
    after the warm-up, regular files only (what a mutation left there is never read here)."""
    out = []
    for dirpath, _dirs, files in os.walk(world.cache):
        out += [Path(dirpath, name) for name in files if not name.startswith(".cache-")]
    return sorted(out)


def kind(world: World, path: Path) -> str:
    """A cache entry's name without its hash tags: ``record-hashes-*/plan-3.json``."""
    return re.sub(r"[0-9a-f]{8,}", "*", str(path.relative_to(world.cache)))


def decode(data: bytes) -> tuple[str, Any] | None:
    for name, (load, _dump) in CODECS.items():
        try:
            return name, load(data)
        except (ValueError, EOFError, TypeError, UnicodeDecodeError):
            continue
    return None


def leaves(obj: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    """(path, value) of every scalar in ``obj``, and of every dict key (as ``("key", k)``)."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*at, ("key", k)), k
            yield from leaves(v, (*at, k))
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            yield from leaves(v, (*at, i))
    else:
        yield at, obj


def replaced(obj: Any, at: tuple[Any, ...], new: Any) -> Any:
    """``obj`` with the value (or key) at ``at`` replaced by ``new``; containers rebuilt as they were."""
    if not at:
        return new
    head, rest = at[0], at[1:]
    if isinstance(obj, dict):
        if isinstance(head, tuple) and head[0] == "key" and not rest:
            return {(new if k == head[1] else k): v for k, v in obj.items()}
        return {k: (replaced(v, rest, new) if k == head else v) for k, v in obj.items()}
    items = [replaced(v, rest, new) if i == head else v for i, v in enumerate(obj)]
    return tuple(items) if isinstance(obj, tuple) else items


def nudged(value: Any) -> Any:
    """A value of the same type that differs: what a hand edit of one field would leave."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value[:-1] + chr(ord(value[-1]) ^ 1) if value else "x"
    if isinstance(value, bytes):
        return flip_byte(value, len(value) - 1, 0) if value else b"x"
    return 0


def substituted(obj: Any, swap: dict[Any, Any]) -> Any:
    """``obj`` with every scalar (and key) found in ``swap`` replaced by its value there."""
    if isinstance(obj, dict):
        return {substituted(k, swap): substituted(v, swap) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        items = [substituted(v, swap) for v in obj]
        return tuple(items) if isinstance(obj, tuple) else items
    if isinstance(obj, bool):
        return obj
    try:
        return swap.get(obj, obj)
    except TypeError:
        return obj


def rewrite_decoded(path: Path, change: Callable[[Any], Any]) -> bool:
    """Decode ``path``, apply ``change``, write it back in its own format (same inode, mtime
    restored); False when it is no regular file, does not decode or nothing changed."""
    if not stat.S_ISREG(path.lstat().st_mode):
        return False
    data = path.read_bytes()
    found = decode(data)
    if found is None:
        return False
    name, obj = found
    new = change(obj)
    if new == obj:
        return False
    write_in_place(path, CODECS[name][1](new), restore_mtime=True)
    return True


# ---- the operations -------------------------------------------------------------------------------


def _edit_byte(path: Path, arg: int, _files: list[Path]) -> str:
    data = path.read_bytes()
    if not data:
        write_in_place(path, b"\0", restore_mtime=True)
        return "wrote a NUL into the empty entry"
    write_in_place(path, flip_byte(data, arg, arg >> 8), restore_mtime=True)
    return f"flipped byte {arg % len(data)}"


def _edit_value(path: Path, arg: int, files: list[Path]) -> str:
    """One decoded value changed (a key renamed only where ``arg`` runs past the values)."""
    found = decode(path.read_bytes())
    every = list(leaves(found[1])) if found else []
    found_leaves = [x for x in every if not _is_key(x[0])] + [x for x in every if _is_key(x[0])]
    if not found_leaves:
        return "undecodable: " + _edit_byte(path, arg, files)
    at, value = found_leaves[arg % len(found_leaves)]
    rewrite_decoded(path, lambda obj: replaced(obj, at, nudged(value)))
    return f"{found[0] if found else ''} value at {at!r}: {value!r:.60} -> {nudged(value)!r:.60}"


def _is_key(at: tuple[Any, ...]) -> bool:
    return bool(at) and isinstance(at[-1], tuple) and at[-1][:1] == ("key",)


def _truncate(path: Path, arg: int, _files: list[Path]) -> str:
    size = path.stat().st_size
    keep = arg % size if size else 0
    os.truncate(path, keep)
    return f"truncated from {size} to {keep} bytes"


def _other(path: Path, arg: int, files: list[Path]) -> Path | None:
    others = [f for f in files if f != path and f.suffix == path.suffix] or [f for f in files if f != path]
    return others[arg % len(others)] if others else None


def _swap(path: Path, arg: int, files: list[Path]) -> str:
    other = _other(path, arg, files)
    if other is None:
        return "no other entry to swap with"
    write_in_place(path, other.read_bytes(), restore_mtime=True)
    return f"content replaced by {other.name}'s"


def _symlink_other(path: Path, arg: int, files: list[Path]) -> str:
    other = _other(path, arg, files)
    if other is None:
        return "no other entry to link to"
    path.unlink()
    path.symlink_to(other)
    return f"replaced by a symlink to {other.name}"


def _special(kind_name: str) -> Callable[[Path, int, list[Path]], str]:
    def op(path: Path, _arg: int, _files: list[Path]) -> str:
        path.unlink()
        make_special(path, kind_name)
        return f"replaced by a {kind_name}"

    return op


def _plant(kind_name: str) -> Callable[[Path, int, list[Path]], str]:
    """A new entry named like the picked one (its hash tags zeroed), but a FIFO or a directory."""

    def op(path: Path, _arg: int, _files: list[Path]) -> str:
        name = re.sub(r"[0-9a-f]{8,}", lambda m: "0" * len(m.group()), path.name)
        planted = path.with_name(name if name != path.name else f"zz{name}")
        make_special(planted, kind_name)
        return f"planted a {kind_name} named {planted.name} beside it"

    return op


def _chown(path: Path, _arg: int, _files: list[Path]) -> str:
    if os.geteuid() != 0:
        raise PermissionError("the cache.chown mutations give an entry to nobody: run the corpus as root (CI does)")
    os.lchown(path, NOBODY, NOBODY)
    return "chowned to nobody"


def _chmod(bits: int) -> Callable[[Path, int, list[Path]], str]:
    def op(path: Path, _arg: int, _files: list[Path]) -> str:
        mode = path.stat().st_mode & 0o777 | bits
        os.chmod(path, mode)
        return f"chmod {mode:o}"

    return op


def _parent(op: Callable[[Path, int, list[Path]], str]) -> Callable[[Path, int, list[Path]], str]:
    def on_parent(path: Path, arg: int, files: list[Path]) -> str:
        return f"its directory: {op(path.parent, arg, files)}"

    return on_parent


def _remove(path: Path, _arg: int, _files: list[Path]) -> str:
    path.unlink()
    return "removed"


OPS: dict[str, Callable[[Path, int, list[Path]], str]] = {
    "edit-byte": _edit_byte,
    "edit-value": _edit_value,
    "truncate": _truncate,
    "swap": _swap,
    "symlink-other": _symlink_other,
    "fifo": _special("fifo"),
    "directory": _special("directory"),
    "devzero": _special("devzero"),
    "plant-fifo": _plant("fifo"),
    "plant-directory": _plant("directory"),
    "chown": _chown,
    "group-writable": _chmod(0o020),
    "world-writable": _chmod(0o002),
    "dir-world-writable": _parent(_chmod(0o777)),
    "dir-chown": _parent(_chown),
    "remove": _remove,
}


def entry_kinds(world: World) -> list[str]:
    return sorted({kind(world, f) for f in cache_files(world)})


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheOp(Step):
    """One operation on an entry of the warmed cache: of its ``kind``-th kind of entry (in name
    order: ``checkout-*.json``, ``probe-*.json``, ``record-hashes-*/*.bin``, ...), the ``arg``-th
    one; ``arg`` also chooses within the entry (a byte, a value, a length)."""

    op: str
    kind: int
    arg: int

    def _target(self, world: World) -> Path | None:
        kinds = entry_kinds(world)
        if not kinds:
            return None
        chosen = kinds[self.kind % len(kinds)]
        entries = [f for f in cache_files(world) if kind(world, f) == chosen]
        return entries[self.arg % len(entries)]

    def apply(self, world: World) -> str:
        path = self._target(world)
        if path is None:
            return "the warm-up left no cache entry"
        return f"cache {kind(world, path)}: {OPS[self.op](path, self.arg, cache_files(world))}"

    def tag(self, world: World) -> str:
        path = self._target(world)
        return kind(world, path) if path is not None else "none"


# ---- blessing -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Stamp:
    ctime_ns: int
    digests: tuple[str, str]  # RECORD's form (sha256=urlsafe-b64) and hex


def stamp(path: Path) -> Stamp:
    data = path.read_bytes()
    raw = hashlib.sha256(data).digest()
    b64 = "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    return Stamp(ctime_ns=path.stat().st_ctime_ns, digests=(b64, raw.hex()))


@dataclass(frozen=True, kw_only=True, slots=True)
class Bless(Step):
    """A same-size edit of an installed file (mtime restored), then every cache entry rewritten to
    vouch for it: its new ctime where the old one was (``how="stat"``: the entry's stat key
    matches again), or its new digest where the old one was (``how="digest"``)."""

    target: str
    offset: int
    xor: int
    how: str

    def apply(self, world: World) -> str:
        path = resolve(world, self.target)
        before = stamp(path)
        write_in_place(path, flip_byte(path.read_bytes(), self.offset, self.xor), restore_mtime=True)
        after = stamp(path)
        if self.how == "stat":
            swap: dict[Any, Any] = {before.ctime_ns: after.ctime_ns}
        else:
            swap = dict(zip(before.digests, after.digests, strict=True))
        blessed = [kind(world, f) for f in cache_files(world) if rewrite_decoded(f, lambda o: substituted(o, swap))]
        return (
            f"tampered with {self.target} (same size, mtime restored); blessed by {self.how} in {blessed or 'nothing'}"
        )
