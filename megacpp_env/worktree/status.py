"""What a checkout is now, and where it stands with an overlay. Reads only; every git call goes
through ``megacpp_env.git``. The pin to compare with is passed in: no spec is needed here.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from megacpp_env import git
from megacpp_env.fsutil import sha256_bytes, sha256_file
from megacpp_env.records import Record, as_dict
from megacpp_env.worktree import content
from megacpp_env.worktree.manifest import FILES_DIR, Journal, Manifest, OverlayFile, load_manifest, read_journal
from megacpp_env.worktree.provenance import Provenance, read_provenance


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckoutState:
    """What a directory is, judged by content (``worktree.content``): every field but ``head``
    comes from the bytes on disk against the commit's tree, never from git's index or ignore
    settings. ``expected`` is the pin it is compared with."""

    path: str
    has_git: bool
    head: str | None = None
    expected: str | None = None
    source: str | None = None
    dirty: bool = False
    diff_hash: str | None = None  # sha256 of the content diff against HEAD (content.diff_bytes)
    untracked: int = 0
    untracked_hash: str | None = None
    changed: tuple[str, ...] = ()  # paths that differ from HEAD (tracked or new), sorted
    content_changed: tuple[str, ...] = ()  # tracked paths whose bytes/mode differ from HEAD's tree
    untracked_files: tuple[str, ...] = ()  # paths HEAD's tree does not have (untracked, added, in a bare submodule dir)
    index_flags: dict[str, tuple[str, ...]] | None = None  # assume-unchanged / skip-worktree paths (findings)
    # the content of what differs inside submodules (each one's diff and new files) and of what
    # lies in a submodule directory that is not initialised: None when there is none
    submodules_hash: str | None = None
    submodules: tuple[git.SubmoduleState, ...] = ()
    provenance: Provenance | None = None

    @property
    def modified_paths(self) -> frozenset[str]:
        """Every path that is not as the pinned tree has it, judged by content (not by git's index)."""
        return frozenset((*self.content_changed, *self.untracked_files))

    @property
    def matches_pin(self) -> bool | None:
        """HEAD equals the pin; None when there is no pin to compare with."""
        return None if self.expected is None else self.head == self.expected

    def to_dict(self) -> dict[str, Any]:
        out = as_dict(self)
        for name in ("index_flags", "submodules_hash"):  # only when set: a clean checkout's facts are unchanged
            if not out.get(name):
                out.pop(name, None)
        overlay = self.provenance.overlay if self.provenance else None
        return {**out, "matches_pin": self.matches_pin, "overlay": overlay.to_dict() if overlay else None}


def checkout_state(path: Path | str, *, pin: str | None = None, name: str | None = None) -> CheckoutState:
    """Everything ``verify-checkout``, ``build-source`` and ``snapshot`` need to know about a checkout.
    Without a ``pin`` (or ``name``) the provenance record's commit (and source) is used."""
    path = Path(path)
    prov = read_provenance(path)
    expected = pin if pin is not None else (prov.commit if prov else None)
    name = name if name is not None else (prov.source if prov else None)
    if not git.is_git_checkout(path):
        return CheckoutState(path=str(path), has_git=False, expected=expected, source=name, provenance=prov)
    tree = content.read(path)
    own = _Judged.of(tree)
    subs = [(s.path, content.read(path / s.path)) for s in tree.submodules if s.actual is not None]
    inner = [_Judged.of(t, f"{rel}/") for rel, t in subs]
    bare = [p for s in tree.submodules if s.actual is None for p in _stand_ins(path, s.path)]
    parts = [own, *inner]
    moved = any(s.actual is not None and not s.matches for s in tree.submodules)
    flags = {k: tuple(sorted(p for j in parts for p in getattr(j, k))) for k in ("assume_unchanged", "skip_worktree")}
    return CheckoutState(
        path=str(path),
        has_git=True,
        head=tree.head,
        expected=expected,
        source=name,
        dirty=bool(moved or bare or any(j.changed or j.new for j in parts)),
        content_changed=tuple(sorted(p for j in parts for p in j.changed)),
        untracked_files=tuple(sorted([*(p for j in parts for p in j.new), *bare])),
        diff_hash=tree.diff_hash() if tree.head else None,
        untracked=len(own.new),
        untracked_hash=tree.untracked_hash(),
        changed=tuple(sorted({*own.changed, *own.new})),
        index_flags={k: v for k, v in flags.items() if v} or None,
        submodules_hash=_inner_hash(path, subs, bare),
        submodules=tree.submodules,
        provenance=prov,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Judged:
    """One repository's part of a checkout (the top, or a submodule: paths prefixed)."""

    changed: tuple[str, ...]
    new: tuple[str, ...]
    assume_unchanged: tuple[str, ...]
    skip_worktree: tuple[str, ...]

    @classmethod
    def of(cls, tree: content.Worktree, prefix: str = "") -> _Judged:
        d = tree.delta
        return cls(
            changed=tuple(prefix + p for p in d.changed),
            new=tuple(prefix + p for p in d.new),
            assume_unchanged=tuple(prefix + p for p in d.assume_unchanged),
            skip_worktree=tuple(prefix + p for p in d.skip_worktree),
        )


def _inner_hash(root: Path, subs: list[tuple[str, content.Worktree]], bare: list[str]) -> str | None:
    """sha256 over what differs inside the initialised submodules (each changed or new path, by the
    content on disk now: no old blob is read, so a submodule whose mirror lacks a declared blob still
    hashes) and over the entries in a submodule directory that is not initialised; None when there
    are none (a clean checkout's facts stay as they were)."""
    dirty = [(rel, t) for rel, t in subs if t.delta.dirty]
    if not dirty and not bare:
        return None
    h = hashlib.sha256()
    for rel, t in dirty:
        for change in t.delta.changes():
            h.update(f"{rel}/{change.path}\0{change.status}\0".encode())
            h.update(content.entry_digest(root / rel / change.path))
    h.update(content.untracked_hash(root, bare).encode())
    return h.hexdigest()


def _stand_ins(root: Path, rel: str) -> list[str]:
    """What lies where a submodule that is not initialised belongs: every entry below its directory
    (git lists none of them: the path is a gitlink), or the path itself when it is not a directory.
    An empty directory (git's own placeholder) holds none."""
    top = root / rel
    if top.is_symlink() or (top.exists() and not top.is_dir()):
        return [rel]
    out: list[str] = []
    for here, dirs, files in os.walk(top):
        names = [*files, *(d for d in dirs if Path(here, d).is_symlink())]
        out += (Path(here, n).relative_to(root).as_posix() for n in names)
    return sorted(out)


# ---- overlays -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class FileStatus(Record):
    path: str
    action: str
    state: str  # "base" | "applied" | "modified" (neither base nor replacement)
    sha256: str | None  # what is on disk now: a file's bytes, a symlink's target (None: absent)


@dataclass(frozen=True, kw_only=True, slots=True)
class OverlayStatus:
    """``state``: applied | clean (not applied) | partial | drifted | interrupted | wrong-commit |
    unverifiable (no .git) | other-overlay (another overlay is recorded on this checkout)."""

    name: str
    checkout: str
    source: str
    commit: str
    head: str | None
    state: str
    files: tuple[FileStatus, ...] = ()
    journal: Journal | None = None
    stray_temp_files: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.state == "applied" and not self.problems

    @property
    def consistent(self) -> bool:
        """Applied or clean, with an undamaged overlay: nothing half-done or foreign."""
        return self.state in ("applied", "clean") and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**as_dict(self), "ok": self.ok}


def _disk_entry(root: Path, rel: str) -> tuple[str | None, str | None]:
    """(kind, sha256) of what is at ``root/rel``: ("file", of its bytes), ("symlink", of its target,
    as git hashes a link), ("other", None) or (None, None) when nothing is there."""
    p = root / rel
    if p.is_symlink():
        return "symlink", sha256_bytes(os.fsencode(os.readlink(p)))  # noqa: PTH115 (raw text, as git)
    if p.is_file():
        return "file", sha256_file(p)
    return ("other", None) if p.exists() else (None, None)


def _file_state(root: Path, f: OverlayFile) -> FileStatus:
    """Applied: the overlay's regular file (or nothing, for a delete). Base: exactly what HEAD has,
    of the same kind: a tracked symlink is base only as a symlink, not as a file holding its target."""
    kind, now = _disk_entry(root, f.path)
    if (kind, now) == (("file", f.sha256) if f.sha256 is not None else (None, None)):
        state = "applied"
    elif f.base_sha256 is None:
        state = "base" if kind is None else "modified"
    else:
        base_kind = "symlink" if git.file_mode(root, f.path) == git.SYMLINK_MODE else "file"
        state = "base" if (kind, now) == (base_kind, f.base_sha256) else "modified"
    return FileStatus(path=f.path, action=f.action, state=state, sha256=now)


def _stray_temps(root: Path, m: Manifest) -> tuple[str, ...]:
    """Temp files an interrupted atomic write may leave (``.<name>.*.tmp`` beside overlay paths)."""
    out: set[str] = set()
    for f in m.files:
        rel = PurePosixPath(f.path)
        parent = root / rel.parent
        if parent.is_dir():
            out.update(str(rel.parent / p.name) for p in parent.glob(f".{rel.name}.*.tmp"))
    return tuple(sorted(s.removeprefix("./") for s in out))


def integrity_problems(overlay_dir: Path, m: Manifest) -> tuple[str, ...]:
    """Replacement files missing from, or not matching, the overlay's own files/ tree."""
    out = []
    for f in m.files:
        if f.sha256 is None:
            continue
        stored = Path(overlay_dir) / FILES_DIR / f.path
        got = sha256_file(stored) if stored.is_file() else None
        if got != f.sha256:
            out.append(f"overlay file {FILES_DIR}/{f.path}: sha256 {got or '(missing)'}, manifest says {f.sha256}")
    return tuple(out)


def overlay_status(overlay_dir: Path | str, checkout: Path | str) -> OverlayStatus:
    """Where ``checkout`` stands with respect to the overlay in ``overlay_dir``. Reads only."""
    overlay_dir, root = Path(overlay_dir), Path(checkout)
    m = load_manifest(overlay_dir)
    if not git.is_git_checkout(root):
        return OverlayStatus(
            name=m.name, checkout=str(root), source=m.source, commit=m.commit, head=None,
            state="unverifiable", problems=(f"{root} has no .git",),
        )  # fmt: skip
    head = git.head_commit(root)
    files = tuple(_file_state(root, f) for f in m.files)
    journal = read_journal(root)
    return OverlayStatus(
        name=m.name, checkout=str(root), source=m.source, commit=m.commit, head=head,
        state=_overall(m, head, files, journal), files=files, journal=journal,
        stray_temp_files=_stray_temps(root, m), problems=integrity_problems(overlay_dir, m),
    )  # fmt: skip


def _overall(m: Manifest, head: str | None, files: tuple[FileStatus, ...], journal: Journal | None) -> str:
    states = {f.state for f in files}
    recorded = journal.state if journal else None
    rules = (
        (head != m.commit, "wrong-commit"),
        (journal is not None and journal.name != m.name, "other-overlay"),
        (recorded == "applying", "interrupted"),
        ("modified" in states, "drifted"),
        (states == {"applied"} or (not files and recorded == "applied"), "applied"),
        (states <= {"base"}, "clean"),
    )
    return next((state for cond, state in rules if cond), "partial")
