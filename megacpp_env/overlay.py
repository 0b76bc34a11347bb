"""File overlays onto pinned checkouts: capture one (``new_overlay``), lay it over a checkout
(``apply_overlay``), check it (``verify_overlay``) and take it off again (``restore_overlay``), and
the rules the ``overlay`` verb applies around them (which checkout, which pin, what counts as ok).

The format (``overlays/<name>/manifest.toml`` + ``files/<path>``, the journal) and the read-only
status live in ``megacpp_env.worktree`` (``manifest``, ``status``). ``apply`` checks the commit and
every base hash before it touches anything, then writes each file atomically under a journal kept
in the checkout's git dir (``.git/megacpp-overlay.json``): a crash or SIGKILL midway leaves
``state: applying`` there, which ``status`` reports as ``interrupted`` and ``restore`` repairs from
``git cat-file HEAD:path``. Never prints, never exits.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from megacpp_env import git, layout
from megacpp_env.errors import RefusedError, VerificationError
from megacpp_env.fsutil import atomic_symlink, atomic_write_bytes, atomic_write_text, sha256_bytes, sha256_file
from megacpp_env.worktree import content
from megacpp_env.worktree.manifest import (
    FILES_DIR,
    MANIFEST_NAME,
    Journal,
    Manifest,
    OverlayFile,
    check_rel_path,
    dump_manifest,
    journal_path,
    load_manifest,
    write_journal,
)
from megacpp_env.worktree.provenance import OverlayRecord, record_overlay
from megacpp_env.worktree.status import OverlayStatus, overlay_status

if TYPE_CHECKING:
    from megacpp_env.spec.model import Spec

ACTIONS = ("new", "apply", "verify", "status", "restore")


# ---- applying and restoring ---------------------------------------------------------------------


def _target(root: Path, rel: str) -> Path:
    """``root/rel``, refusing paths whose existing parents lead outside the checkout (symlinks)."""
    target = root / rel
    if not target.parent.resolve().is_relative_to(root.resolve()):
        raise RefusedError(f"{rel}: its directory resolves outside {root}; refusing to write there")
    return target


def _checkout_head(root: Path, refusal: str) -> str | None:
    """HEAD of the real checkout at ``root`` (None: no commit yet); RefusedError(``refusal``) when
    ``root`` is no git checkout."""
    if not git.is_git_checkout(root):
        raise RefusedError(refusal)
    return git.head_commit(root)


def _require_checkout(root: Path, m: Manifest) -> None:
    head = _checkout_head(
        root,
        f"{root} has no .git: an overlay applies only to a real checkout "
        f"(make one with `megacpp-env checkout {m.source} --dest {root}`)",
    )
    if head != m.commit:
        raise VerificationError(
            f"{root} is at {head or '(no commit)'}; overlay {m.name} was made for {m.source} at {m.commit}"
        )


def apply_overlay(overlay_dir: Path | str, checkout: Path | str) -> OverlayStatus:
    """Check everything, then lay every file over ``checkout`` (all or none). Idempotent."""
    overlay_dir, root = Path(overlay_dir), Path(checkout)
    st = _preflight(overlay_dir, root)
    if st.state == "applied":
        _finish(root, load_manifest(overlay_dir), st.journal.created_dirs if st.journal else ())
        return overlay_status(overlay_dir, root)
    m = load_manifest(overlay_dir)
    created = tuple(sorted({str(d) for f in m.files for d in _missing_parents(root, f.path)}))
    write_journal(root, Journal(name=m.name, commit=m.commit, state="applying", created_dirs=created))
    try:
        _lay_files(overlay_dir, root, m)
    except BaseException:
        _restore_files(root, m, created)
        journal_path(root).unlink(missing_ok=True)
        raise
    _finish(root, m, created)
    return overlay_status(overlay_dir, root)


def _preflight(overlay_dir: Path, root: Path) -> OverlayStatus:
    m = load_manifest(overlay_dir)
    _require_checkout(root, m)
    st = overlay_status(overlay_dir, root)
    if st.problems:
        raise VerificationError(f"overlay {m.name} is damaged: " + "; ".join(st.problems))
    if st.state in ("interrupted", "other-overlay"):
        name = st.journal.name if st.journal else None
        raise RefusedError(
            f"{root}: an overlay apply ({name}) was interrupted or another overlay "
            f"is recorded; run `megacpp-env overlay restore {name or m.name} --to {root}`"
        )
    _refuse_foreign_changes(root, m)
    bad = [f for f in st.files if f.state != "base"]
    if st.state != "applied" and bad:
        detail = "; ".join(f"{f.path}: expected {_base_of(m, f.path)}, found {f.sha256 or '(absent)'}" for f in bad)
        raise VerificationError(
            f"{root}: base hash mismatch, nothing was changed: {detail} "
            f"(see `megacpp-env overlay status {m.name} --to {root}`)"
        )
    return st


def _refuse_foreign_changes(root: Path, m: Manifest) -> None:
    """Local changes outside the overlay would be recorded as part of it (and then pass
    ``verify-checkout``): refuse instead."""
    mine = {f.path for f in m.files}
    foreign = [c.path for c in content.read(root).delta.changes() if c.path not in mine]
    if foreign:
        shown = ", ".join(foreign[:10]) + (f" and {len(foreign) - 10} more" if len(foreign) > 10 else "")
        raise RefusedError(
            f"{root} has local changes outside overlay {m.name}: {shown}; refusing to apply over them, nothing "
            f"was changed (discard them: see `git -C {root} status`; or capture them into the overlay with "
            f"`megacpp-env overlay new {m.name} --from CHECKOUT --force`)"
        )


def _base_of(m: Manifest, rel: str) -> str:
    f = next(f for f in m.files if f.path == rel)
    return f.base_sha256 or "(absent: a new file)"


def _missing_parents(root: Path, rel: str) -> list[PurePosixPath]:
    out = []
    for parent in PurePosixPath(rel).parents:
        if str(parent) != "." and not (root / parent).exists():
            out.append(parent)
    return out


def _lay_files(overlay_dir: Path, root: Path, m: Manifest) -> None:
    for f in m.files:
        target = _target(root, f.path)
        if f.sha256 is None:
            target.unlink(missing_ok=True)
        else:
            data = (overlay_dir / FILES_DIR / f.path).read_bytes()
            atomic_write_bytes(target, data, mode=0o755 if f.mode == "100755" else 0o644)


def _finish(root: Path, m: Manifest, created_dirs: tuple[str, ...]) -> None:
    """Record the applied state (keeping the directories apply created, for ``restore``)."""
    write_journal(root, Journal(name=m.name, commit=m.commit, state="applied", created_dirs=created_dirs))
    mine = {f.path for f in m.files}
    tree = content.read(root)
    record = OverlayRecord(
        name=m.name,
        diff_hash=tree.diff_hash(),
        untracked_hash=tree.untracked_hash(),
        paths=tuple(sorted(c.path for c in tree.delta.changes() if c.path in mine)),  # what it changed, nothing else
    )
    record_overlay(root, record, source=m.source, commit=m.commit)


def restore_overlay(overlay_dir: Path | str, checkout: Path | str, *, force: bool = False) -> OverlayStatus:
    """Put the exact upstream bytes back for every overlay path (new files deleted), after an apply
    or an interrupted one. Files changed by someone else are refused unless ``force``."""
    overlay_dir, root = Path(overlay_dir), Path(checkout)
    m = load_manifest(overlay_dir)
    _require_checkout(root, m)
    st = overlay_status(overlay_dir, root)
    if st.state == "other-overlay":
        raise RefusedError(f"{root}: overlay {st.journal.name if st.journal else None} is recorded here, not {m.name}")
    foreign = [f.path for f in st.files if f.state == "modified"]
    if foreign and not force:
        raise RefusedError(
            f"{root}: {', '.join(foreign)} match neither upstream nor the overlay; refusing to overwrite "
            "(pass --force to restore upstream bytes anyway)"
        )
    _restore_files(root, m, st.journal.created_dirs if st.journal else ())
    new = set(content.read(root).delta.untracked) if st.stray_temp_files else set()
    for rel in st.stray_temp_files:
        if rel in new:
            (root / rel).unlink(missing_ok=True)
    journal_path(root).unlink(missing_ok=True)
    record_overlay(root, None)
    return overlay_status(overlay_dir, root)


def _restore_files(root: Path, m: Manifest, created_dirs: tuple[str, ...]) -> None:
    for f in m.files:
        _restore_path(root, f.path)
    _remove_empty_dirs(root, {str(d) for f in m.files for d in PurePosixPath(f.path).parents} | set(created_dirs))


def _restore_path(root: Path, rel: str) -> None:
    """Put ``rel`` back exactly as HEAD has it: a regular file with its bytes and mode, a symlink with
    its target (not a file holding the target's name), or nothing."""
    target = _target(root, rel)
    mode = git.file_mode(root, rel)
    if mode is None:
        if target.is_symlink() or target.is_file():
            target.unlink()
        return
    data = git.show_file(root, rel) or b""
    if mode == git.SYMLINK_MODE:
        atomic_symlink(target, os.fsdecode(data))
    elif mode in ("100644", "100755"):
        if target.is_symlink():
            target.unlink()  # the write would otherwise keep a link whose target holds the same bytes
        atomic_write_bytes(target, data, mode=0o755 if mode == "100755" else 0o644)
    else:
        raise RefusedError(f"{rel}: HEAD has a submodule (mode {mode}) there; an overlay cannot restore it")


def _remove_empty_dirs(root: Path, dirs: set[str]) -> None:
    """Remove the empty ones of ``dirs`` (an overlay path's parents, what apply created), deepest first.
    Git tracks no empty directory, so one left after restore is the overlay's or a killed apply's,
    whether or not a journal remembers it; a submodule's (uninitialised) directory stays."""
    keep = set(git.gitlinks(root)) | {"."}
    for rel in sorted(dirs - keep, key=lambda d: -d.count("/")):
        d = root / rel
        if d.is_dir() and not d.is_symlink() and not any(d.iterdir()):
            d.rmdir()


def verify_overlay(overlay_dir: Path | str, checkout: Path | str) -> OverlayStatus:
    """Raise VerificationError unless every overlay file is applied (an empty overlay: the checkout is
    at the overlay's commit and no apply is interrupted)."""
    st = overlay_status(overlay_dir, checkout)
    if st.state == "clean" and not st.files and not st.problems:
        return st  # an empty overlay is trivially applied
    if not st.ok:
        detail = "; ".join([*st.problems, *(f"{f.path}: {f.state}" for f in st.files if f.state != "applied")])
        raise VerificationError(
            f"overlay {st.name} is not applied to {st.checkout}: state {st.state}" + (f" ({detail})" if detail else "")
        )
    return st


# ---- capturing ----------------------------------------------------------------------------------


def new_overlay(
    overlay_dir: Path | str, checkout: Path | str, *, name: str, source: str, force: bool = False
) -> Manifest:
    """Capture the changed and untracked files of ``checkout`` (vs HEAD) into ``overlay_dir``."""
    overlay_dir, root = Path(overlay_dir), Path(checkout)
    if (overlay_dir / MANIFEST_NAME).exists() and not force:
        raise RefusedError(f"{overlay_dir / MANIFEST_NAME} exists; pass --force to capture it again")
    if not git.is_git_checkout(root) or git.head_commit(root) is None:
        raise RefusedError(f"{root} is not a git checkout with a commit; nothing to compare with")
    files = tuple(_capture(root, c) for c in content.read(root).delta.changes())
    m = Manifest(name=name, source=source, commit=git.head_commit(root) or "", files=files)
    _write_overlay(overlay_dir, root, m)
    return m


def _capture(root: Path, change: content.Change) -> OverlayFile:
    rel = check_rel_path(change.path)
    p = root / rel
    if change.status == "D":
        return OverlayFile(path=rel, action="delete", base_sha256=sha256_bytes(git.show_file(root, rel) or b""))
    if p.is_symlink() or not p.is_file():
        raise RefusedError(f"{rel}: only regular files can be captured into an overlay")
    mode = "100755" if p.stat().st_mode & stat.S_IXUSR else "100644"
    upstream = git.show_file(root, rel) if change.status != "?" else None
    if upstream is None:
        return OverlayFile(path=rel, action="add", sha256=sha256_file(p), mode=mode)
    return OverlayFile(path=rel, action="modify", base_sha256=sha256_bytes(upstream), sha256=sha256_file(p), mode=mode)


def _write_overlay(overlay_dir: Path, root: Path, m: Manifest) -> None:
    keep = {f.path for f in m.files if f.sha256 is not None}
    for f in m.files:
        if f.sha256 is not None:
            atomic_write_bytes(overlay_dir / FILES_DIR / f.path, (root / f.path).read_bytes())
    files_dir = overlay_dir / FILES_DIR
    if files_dir.is_dir():
        for p in sorted(files_dir.rglob("*"), reverse=True):
            rel = p.relative_to(files_dir).as_posix()
            if p.is_file() and rel not in keep:
                p.unlink()
            elif p.is_dir() and not any(p.iterdir()):
                p.rmdir()
    atomic_write_text(overlay_dir / MANIFEST_NAME, dump_manifest(m))


# ---- the rules of the `overlay` verb ------------------------------------------------------------


def check_name(name: str) -> str:
    """An overlay name is one directory name (the rule of the spec's ``sources.*.overlay``)."""
    if not layout.SLUG_RE.fullmatch(name):
        raise RefusedError(
            f"overlay name {name!r} is not valid: expected one directory name matching {layout.SLUG_RE.pattern} "
            "(the rule of the spec's sources.*.overlay)"
        )
    return name


def existing_dir(path: Path, flag: str) -> Path:
    if not path.exists():
        raise RefusedError(f"{flag} {path}: no such directory")
    if not path.is_dir():
        raise RefusedError(f"{flag} {path}: not a directory")
    return path


def default_checkout(m: Manifest, spec: Spec | None, spec_file: str) -> Path:
    """The checkout ``megacpp-env checkout`` makes for the overlay's source (``--to`` not given)."""
    source = spec.sources.get(m.source) if spec else None
    if spec is None or source is None:
        why = f"the spec has no source {m.source!r}" if spec else f"there is no spec at {spec_file}"
        raise RefusedError(f"pass --to CHECKOUT: {why} to find the default checkout of {m.source}")
    dest = layout.host_checkout_dir(spec.root, source.name)
    if not dest.is_dir():
        raise RefusedError(
            f"{dest} (the default checkout of {m.source}) does not exist: make it with "
            f"`megacpp-env checkout {m.source}`, or pass --to CHECKOUT"
        )
    return dest


def check_pin(m: Manifest, pinned: str | None) -> None:
    """An overlay captured at another commit than the spec's pin of its source is refused."""
    if pinned is not None and pinned != m.commit:
        raise VerificationError(
            f"overlay {m.name} was captured at {m.commit}, but the spec pins {m.source} at {pinned}: "
            f"re-capture it (`megacpp-env overlay new {m.name} --from CHECKOUT --force`)"
        )


def pinned_commit(spec: Spec | None, source: str) -> str | None:
    src = spec.sources.get(source) if spec else None
    return src.commit if src else None


def action_ok(action: str, st: OverlayStatus) -> bool:
    """Success of each action: ``restore`` leaves it clean; ``status`` finds nothing half-done or
    foreign; ``apply``/``verify`` find it applied (an empty overlay: consistent)."""
    if action == "restore":
        return st.state == "clean"
    if action == "status":
        return st.consistent
    return st.ok or (st.consistent and not st.files)


def run_action(
    action: str, overlay_dir: Path, checkout: Path | None, *, spec: Spec | None, spec_file: str, force: bool = False
) -> tuple[OverlayStatus, bool]:
    """``overlay apply|verify|status|restore``: the status after the action and whether it is ok."""
    m = load_manifest(overlay_dir)
    root = existing_dir(checkout, "--to") if checkout is not None else default_checkout(m, spec, spec_file)
    if action in ("apply", "verify"):
        check_pin(m, pinned_commit(spec, m.source))
    if action == "apply":
        st = apply_overlay(overlay_dir, root)
    elif action == "verify":
        st = verify_overlay(overlay_dir, root)
    elif action == "restore":
        st = restore_overlay(overlay_dir, root, force=force)
    else:
        st = overlay_status(overlay_dir, root)
    return st, action_ok(action, st)


def source_naming(spec: Spec | None, name: str) -> str:
    """The spec source whose ``overlay`` is ``name`` ('' when none)."""
    return next((s.name for s in spec.sources.values() if s.overlay == name), "") if spec else ""


def head_of(checkout: Path, source: str) -> str:
    """HEAD of the checkout an overlay is captured from; refused unless a real checkout with a commit."""
    head = _checkout_head(
        checkout,
        f"{checkout} is not a git checkout (no .git at its top): capture an overlay from a real checkout "
        f"(`megacpp-env checkout {source} --dest DIR`, then edit it)",
    )
    if head is None:
        raise RefusedError(f"{checkout} is a git repository without a commit: nothing to compare its files with")
    return head


def capture_overlay(
    overlay_dir: Path, checkout: Path, *, name: str, source: str | None, spec: Spec | None, force: bool = False
) -> Manifest:
    """``overlay new``: capture from a real checkout at its source's pin into ``overlay_dir``."""
    root = existing_dir(checkout, "--from")
    source = source or source_naming(spec, name)
    if not source:
        raise RefusedError(f"no source of the spec names overlay {name!r}: pass --source SRC")
    head = head_of(root, source)
    pinned = pinned_commit(spec, source)
    if pinned and head != pinned:
        raise RefusedError(f"{root} is at {head}, but the spec pins {source} at {pinned}")
    return new_overlay(overlay_dir, root, name=name, source=source, force=force)


@dataclass(frozen=True, kw_only=True, slots=True)
class OverlayRequest:
    action: str  # new | apply | verify | status | restore
    name: str
    checkout: Path | None  # --from (new) or --to
    overlays: Path | None  # --overlays, else the spec's overlays/
    source: str | None = None  # new only
    force: bool = False
    spec_file: str = "stack.yaml"  # named in the remedy when no checkout is found


@dataclass(frozen=True, kw_only=True, slots=True)
class OverlayDone:
    """What ``overlay ACTION`` did: the overlay directory, and the manifest ``new`` captured or the
    status after the other actions (and whether that status is what the action wants)."""

    overlay_dir: Path
    manifest: Manifest | None = None  # new
    status: OverlayStatus | None = None  # apply, verify, status, restore
    ok: bool = True


def perform(req: OverlayRequest, spec: Spec | None) -> OverlayDone:
    """``overlay ACTION NAME`` with the spec when there is one (the verb requires it without
    ``--overlays``: the overlays then live beside it)."""
    check_name(req.name)
    if req.overlays is not None:
        overlay_dir = req.overlays / req.name
    elif spec is not None:
        overlay_dir = layout.overlay_dir(spec.root, req.name)
    else:
        raise RefusedError(f"overlay {req.name}: no spec and no --overlays DIR: nowhere to find the overlay")
    if req.action == "new":
        if req.checkout is None:
            raise RefusedError("overlay new: --from CHECKOUT is required")  # argparse requires it first
        captured = capture_overlay(
            overlay_dir, req.checkout, name=req.name, source=req.source, spec=spec, force=req.force
        )
        return OverlayDone(overlay_dir=overlay_dir, manifest=captured)
    st, ok = run_action(req.action, overlay_dir, req.checkout, spec=spec, spec_file=req.spec_file, force=req.force)
    return OverlayDone(overlay_dir=overlay_dir, status=st, ok=ok)
