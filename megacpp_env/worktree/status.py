"""What a checkout is now, and where it stands with an overlay. Reads only; every git call goes
through ``megacpp_env.git``. The pin to compare with is passed in: no spec is needed here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from megacpp_env import git
from megacpp_env.fsutil import sha256_bytes, sha256_file
from megacpp_env.records import as_dict
from megacpp_env.worktree.manifest import FILES_DIR, Journal, Manifest, OverlayFile, load_manifest, read_journal
from megacpp_env.worktree.provenance import PROVENANCE_NAME, Provenance, read_provenance


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckoutState:
    """What a directory is, as far as git can tell. ``expected`` is the pin it is compared with."""

    path: str
    has_git: bool
    head: str | None = None
    expected: str | None = None
    source: str | None = None
    dirty: bool = False
    diff_hash: str | None = None
    untracked: int = 0
    untracked_hash: str | None = None
    changed: tuple[str, ...] = ()  # paths that differ from HEAD (tracked or untracked), sorted
    content_changed: tuple[str, ...] = ()  # tracked paths whose bytes/mode differ from HEAD's tree
    untracked_files: tuple[str, ...] = ()  # untracked, hidden only by the checkout's own .gitignore
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
        overlay = self.provenance.overlay if self.provenance else None
        return {**out, "matches_pin": self.matches_pin, "overlay": overlay.to_dict() if overlay else None}


def checkout_state(path: Path | str, *, pin: str | None = None, name: str | None = None) -> CheckoutState:
    """Everything ``verify-checkout`` and ``snapshot`` need to know about a checkout. Without a
    ``pin`` (or ``name``) the provenance record's commit (and source) is used."""
    path = Path(path)
    prov = read_provenance(path)
    expected = pin if pin is not None else (prov.commit if prov else None)
    name = name if name is not None else (prov.source if prov else None)
    if not git.is_git_checkout(path):
        return CheckoutState(path=str(path), has_git=False, expected=expected, source=name, provenance=prov)
    head = git.head_commit(path)
    submodules = git.submodule_status(path)
    content, untracked = _content_changes(path, head, submodules)
    return CheckoutState(
        path=str(path),
        has_git=True,
        head=head,
        expected=expected,
        source=name,
        dirty=bool(content or untracked or (git.is_dirty(path) if head else False)),
        content_changed=content,
        untracked_files=untracked,
        diff_hash=git.diff_hash(path) if head else None,
        untracked=git.untracked_count(path),
        untracked_hash=git.untracked_hash(path),
        changed=tuple(c.path for c in git.changes(path)) if head else (),
        submodules=submodules,
        provenance=prov,
    )


def _content_changes(
    path: Path, head: str | None, submodules: tuple[git.SubmoduleState, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(tracked paths whose bytes/mode differ from the commit, untracked paths) of the checkout and of
    every initialised submodule (against the submodule's own HEAD; its paths prefixed), by content."""
    content = list(git.content_changes(path, head)) if head else []
    untracked = [p for p in git.untracked_strict(path) if not _own(p)]
    for sub in submodules:
        if sub.actual is not None:
            root = path / sub.path
            content += (f"{sub.path}/{p}" for p in git.content_changes(root, sub.actual))
            untracked += (f"{sub.path}/{p}" for p in git.untracked_strict(root))
    return tuple(sorted(content)), tuple(sorted(untracked))


def _own(rel: str) -> bool:
    """The tool's own record (and an interrupted write of it) beside a checkout's files."""
    return rel == PROVENANCE_NAME or (rel.startswith(f".{PROVENANCE_NAME}.") and rel.endswith(".tmp"))


# ---- overlays -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class FileStatus:
    path: str
    action: str
    state: str  # "base" | "applied" | "modified" (neither base nor replacement)
    sha256: str | None  # what is on disk now: a file's bytes, a symlink's target (None: absent)

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)


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
