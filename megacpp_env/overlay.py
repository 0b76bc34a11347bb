"""File overlays onto pinned checkouts: ``overlays/<name>/manifest.toml`` + ``files/<path>``.

The manifest names the source and commit it applies to and, per file, the sha256 of the upstream
file at that commit (``base_sha256``; absent for a new file) and of the replacement (``sha256``;
absent for a deleted file). ``apply`` checks the commit and every base hash before it touches
anything, then writes each file atomically under a journal kept in the checkout's git dir
(``.git/megacpp-overlay.json``): a crash or SIGKILL midway leaves ``state: applying`` there, which
``status`` reports as ``interrupted`` and ``restore`` repairs from ``git cat-file HEAD:path``.

The manifest is read with tomllib and written by ``dump_manifest``, a small hand-written emitter
(deterministic: fixed key order, files sorted by path, no timestamps). Never prints, never exits.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from megacpp_env import git
from megacpp_env.checkout import record_overlay
from megacpp_env.errors import RefusedError, SpecError, VerificationError
from megacpp_env.fsutil import atomic_write_bytes, atomic_write_text, sha256_bytes, sha256_file

MANIFEST_NAME = "manifest.toml"
FILES_DIR = "files"
JOURNAL_NAME = "megacpp-overlay.json"
KILL_ENV = "MEGACPP_ENV_TEST_KILL_AFTER"  # test hook: SIGKILL this process after N files are written
SCHEMA = 1

Action = Literal["modify", "add", "delete"]
ACTIONS = ("modify", "add", "delete")
MODES = ("100644", "100755")


@dataclass(frozen=True, kw_only=True, slots=True)
class OverlayFile:
    path: str
    action: Action
    base_sha256: str | None = None  # None: a new file
    sha256: str | None = None  # None: the file is deleted
    mode: str = "100644"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "action": self.action,
            "base_sha256": self.base_sha256,
            "sha256": self.sha256,
            "mode": self.mode,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Manifest:
    name: str
    source: str
    commit: str
    files: tuple[OverlayFile, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "commit": self.commit,
            "files": [f.to_dict() for f in self.files],
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class FileStatus:
    path: str
    action: str
    state: str  # "base" | "applied" | "modified" (neither base nor replacement)
    sha256: str | None  # what is on disk now (None: absent)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "action": self.action, "state": self.state, "sha256": self.sha256}


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
    journal: dict[str, Any] | None = None
    stray_temp_files: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.state == "applied" and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "checkout": self.checkout,
            "source": self.source,
            "commit": self.commit,
            "head": self.head,
            "state": self.state,
            "ok": self.ok,
            "files": [f.to_dict() for f in self.files],
            "journal": self.journal,
            "stray_temp_files": list(self.stray_temp_files),
            "problems": list(self.problems),
        }


# ---- manifest I/O -------------------------------------------------------------------------------


def load_manifest(overlay_dir: Path) -> Manifest:
    path = Path(overlay_dir) / MANIFEST_NAME
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecError("no overlay manifest here", file=str(path), remedy="megacpp-env overlay new") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"not valid TOML: {exc}", file=str(path)) from None
    return _manifest_from(data, str(path))


def _manifest_from(data: dict[str, Any], where: str) -> Manifest:
    for key in ("name", "source", "commit"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise SpecError("expected a non-empty string", file=where, key=key)
    if not git.SHA_RE.match(data["commit"]):
        raise SpecError(f"expected a 40-hex commit SHA, got {data['commit']!r}", file=where, key="commit")
    raw = data.get("files", [])
    if not isinstance(raw, list):
        raise SpecError("expected an array of tables", file=where, key="files")
    files = tuple(_file_from(entry, where, i) for i, entry in enumerate(raw))
    paths = [f.path for f in files]
    if len(set(paths)) != len(paths):
        raise SpecError("a path is listed twice", file=where, key="files")
    return Manifest(
        name=data["name"], source=data["source"], commit=data["commit"], files=tuple(sorted(files, key=_key))
    )


def _key(f: OverlayFile) -> str:
    return f.path


def _file_from(entry: Any, where: str, i: int) -> OverlayFile:
    key = f"files[{i}]"
    if not isinstance(entry, dict):
        raise SpecError("expected a table", file=where, key=key)
    action = entry.get("action")
    if action not in ACTIONS:
        raise SpecError(f"action must be one of {', '.join(ACTIONS)}", file=where, key=f"{key}.action")
    f = OverlayFile(
        path=check_rel_path(entry.get("path"), where, f"{key}.path"),
        action=action,
        base_sha256=entry.get("base_sha256"),
        sha256=entry.get("sha256"),
        mode=entry.get("mode", "100644"),
    )
    need_base, need_new = action != "add", action != "delete"
    for name, value, need in (("base_sha256", f.base_sha256, need_base), ("sha256", f.sha256, need_new)):
        ok = _is_sha256(value) if need else value is None
        if not ok:
            want = "a 64-hex sha256" if need else "absent"
            raise SpecError(f"{action}: expected {want}", file=where, key=f"{key}.{name}")
    if f.mode not in MODES:
        raise SpecError(f"mode must be one of {', '.join(MODES)}", file=where, key=f"{key}.mode")
    return f


def _is_sha256(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def check_rel_path(value: object, where: str = "", key: str = "path") -> str:
    """A relative, normalised POSIX path that stays inside the checkout and out of ``.git``."""
    if not isinstance(value, str) or not value:
        raise SpecError("expected a relative path", file=where, key=key)
    p = PurePosixPath(value)
    bad = p.is_absolute() or "\\" in value or str(p) != value
    if bad or any(part in ("..", ".", ".git") for part in p.parts) or any(ord(c) < 32 for c in value):
        raise SpecError(f"unsafe overlay path {value!r}", file=where, key=key)
    return value


def _toml_str(value: str) -> str:
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def dump_manifest(m: Manifest) -> str:
    """The manifest as TOML, deterministically (hand-written emitter; tomllib reads it back)."""
    lines = [
        f"# megacpp-env overlay manifest, made by `megacpp-env overlay new {m.name} --from CHECKOUT`.",
        "# Each file: upstream sha256 at `commit` (base_sha256; absent for a new file) and the sha256 of",
        "# the replacement stored under files/<path> (absent for a deleted file). Apply with",
        f"# `megacpp-env overlay apply {m.name} --to CHECKOUT`.",
        f"schema_version = {SCHEMA}",
        f"name = {_toml_str(m.name)}",
        f"source = {_toml_str(m.source)}",
        f"commit = {_toml_str(m.commit)}",
    ]
    if not m.files:
        lines.append("files = []")
    for f in sorted(m.files, key=_key):
        lines += ["", "[[files]]", f"path = {_toml_str(f.path)}", f"action = {_toml_str(f.action)}"]
        if f.base_sha256 is not None:
            lines.append(f"base_sha256 = {_toml_str(f.base_sha256)}")
        if f.sha256 is not None:
            lines.append(f"sha256 = {_toml_str(f.sha256)}")
        lines.append(f"mode = {_toml_str(f.mode)}")
    return "\n".join(lines) + "\n"


# ---- inspecting ---------------------------------------------------------------------------------


def _disk_sha(root: Path, rel: str) -> str | None:
    p = root / rel
    return sha256_file(p) if p.is_file() and not p.is_symlink() else None


def _file_state(root: Path, f: OverlayFile) -> FileStatus:
    now = _disk_sha(root, f.path)
    state = "applied" if now == f.sha256 else "base" if now == f.base_sha256 else "modified"
    return FileStatus(path=f.path, action=f.action, state=state, sha256=now)


def _journal_path(checkout: Path) -> Path:
    return git.git_path(checkout, JOURNAL_NAME)


def read_journal(checkout: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(_journal_path(checkout).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


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


def _overall(m: Manifest, head: str | None, files: tuple[FileStatus, ...], journal: dict[str, Any] | None) -> str:
    states = {f.state for f in files}
    recorded = (journal or {}).get("state")
    rules = (
        (head != m.commit, "wrong-commit"),
        (journal is not None and journal.get("name") != m.name, "other-overlay"),
        (recorded == "applying", "interrupted"),
        ("modified" in states, "drifted"),
        (states == {"applied"} or (not files and recorded == "applied"), "applied"),
        (states <= {"base"}, "clean"),
    )
    return next((state for cond, state in rules if cond), "partial")


# ---- applying and restoring ---------------------------------------------------------------------


def _target(root: Path, rel: str) -> Path:
    """``root/rel``, refusing paths whose existing parents lead outside the checkout (symlinks)."""
    target = root / rel
    if not target.parent.resolve().is_relative_to(root.resolve()):
        raise RefusedError(f"{rel}: its directory resolves outside {root}; refusing to write there")
    return target


def _write_journal(root: Path, data: dict[str, Any]) -> None:
    atomic_write_text(_journal_path(root), json.dumps(data, indent=2, sort_keys=True) + "\n")


def _kill_after() -> int:
    raw = os.environ.get(KILL_ENV, "")
    return int(raw) if raw.isdigit() else -1


def _require_checkout(root: Path, m: Manifest) -> None:
    if not git.is_git_checkout(root):
        raise RefusedError(
            f"{root} has no .git: an overlay applies only to a real checkout "
            f"(make one with `megacpp-env checkout {m.source} --dest {root}`)"
        )
    head = git.head_commit(root)
    if head != m.commit:
        raise VerificationError(
            f"{root} is at {head or '(no commit)'}; overlay {m.name} was made for {m.source} at {m.commit}"
        )


def apply_overlay(overlay_dir: Path | str, checkout: Path | str) -> OverlayStatus:
    """Check everything, then lay every file over ``checkout`` (all or none). Idempotent."""
    overlay_dir, root = Path(overlay_dir), Path(checkout)
    st = _preflight(overlay_dir, root)
    if st.state == "applied":
        _finish(root, load_manifest(overlay_dir), list((st.journal or {}).get("created_dirs", [])))
        return overlay_status(overlay_dir, root)
    m = load_manifest(overlay_dir)
    created = sorted({str(d) for f in m.files for d in _missing_parents(root, f.path)})
    _write_journal(root, {"name": m.name, "commit": m.commit, "state": "applying", "created_dirs": created})
    try:
        _lay_files(overlay_dir, root, m)
    except BaseException:
        _restore_files(root, m, created)
        _journal_path(root).unlink(missing_ok=True)
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
        raise RefusedError(
            f"{root}: an overlay apply ({(st.journal or {}).get('name')}) was interrupted or another overlay "
            f"is recorded; run `megacpp-env overlay restore {(st.journal or {}).get('name', m.name)} --to {root}`"
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
    foreign = [c.path for c in git.changes(root) if c.path not in mine]
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
    kill_after = _kill_after()
    for done, f in enumerate(m.files, start=1):
        target = _target(root, f.path)
        if f.sha256 is None:
            target.unlink(missing_ok=True)
        else:
            data = (overlay_dir / FILES_DIR / f.path).read_bytes()
            atomic_write_bytes(target, data, mode=0o755 if f.mode == "100755" else 0o644)
        if done == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)


def _finish(root: Path, m: Manifest, created_dirs: list[str]) -> None:
    """Record the applied state (keeping the directories apply created, for ``restore``)."""
    _write_journal(root, {"name": m.name, "commit": m.commit, "state": "applied", "created_dirs": created_dirs})
    mine = {f.path for f in m.files}
    state = {
        "name": m.name,
        "diff_hash": git.diff_hash(root),
        "untracked_hash": git.untracked_hash(root),
        "paths": sorted(c.path for c in git.changes(root) if c.path in mine),  # what it changed, nothing else
    }
    record_overlay(root, state, source=m.source, commit=m.commit)


def restore_overlay(overlay_dir: Path | str, checkout: Path | str, *, force: bool = False) -> OverlayStatus:
    """Put the exact upstream bytes back for every overlay path (new files deleted), after an apply
    or an interrupted one. Files changed by someone else are refused unless ``force``."""
    overlay_dir, root = Path(overlay_dir), Path(checkout)
    m = load_manifest(overlay_dir)
    _require_checkout(root, m)
    st = overlay_status(overlay_dir, root)
    if st.state == "other-overlay":
        raise RefusedError(f"{root}: overlay {(st.journal or {}).get('name')} is recorded here, not {m.name}")
    foreign = [f.path for f in st.files if f.state == "modified"]
    if foreign and not force:
        raise RefusedError(
            f"{root}: {', '.join(foreign)} match neither upstream nor the overlay; refusing to overwrite "
            "(pass --force to restore upstream bytes anyway)"
        )
    _restore_files(root, m, list((st.journal or {}).get("created_dirs", [])))
    for rel in st.stray_temp_files:
        if rel in git.untracked_files(root):
            (root / rel).unlink(missing_ok=True)
    _journal_path(root).unlink(missing_ok=True)
    record_overlay(root, None)
    return overlay_status(overlay_dir, root)


def _restore_files(root: Path, m: Manifest, created_dirs: list[str]) -> None:
    for f in m.files:
        target = _target(root, f.path)
        upstream = git.show_file(root, f.path)
        if upstream is None:
            target.unlink(missing_ok=True)
            continue
        mode = 0o755 if git.file_mode(root, f.path) == "100755" else 0o644
        atomic_write_bytes(target, upstream, mode=mode)
    for rel in sorted(created_dirs, key=lambda d: -d.count("/")):
        d = root / rel
        if d.is_dir() and not any(d.iterdir()):
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
    files = tuple(_capture(root, c) for c in git.changes(root))
    m = Manifest(name=name, source=source, commit=git.head_commit(root) or "", files=files)
    _write_overlay(overlay_dir, root, m)
    return m


def _capture(root: Path, change: git.Change) -> OverlayFile:
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
