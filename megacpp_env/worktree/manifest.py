"""An overlay on disk: ``overlays/<name>/manifest.toml`` + ``files/<path>``, and the journal an
apply keeps in the checkout's git dir (``.git/megacpp-overlay.json``).

The manifest names the source and commit it applies to and, per file, the sha256 of the upstream
file at that commit (``base_sha256``; absent for a new file) and of the replacement (``sha256``;
absent for a deleted file). It is read once by ``load_manifest`` (tomllib, then a typed reader
whose errors name the file and the key, ``files[2].sha256``) and written by ``dump_manifest``
(tomli-w; deterministic: fixed key order, files sorted by path, no timestamps).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal, cast

from megacpp_env import git
from megacpp_env.errors import FormatError
from megacpp_env.fsutil import atomic_write_text
from megacpp_env.records import Record, Table, read_json, read_toml
from megacpp_env.tomlwrite import dumps

MANIFEST_NAME = "manifest.toml"
FILES_DIR = "files"
JOURNAL_NAME = "megacpp-overlay.json"
SCHEMA = 1

Action = Literal["modify", "add", "delete"]
ACTIONS = ("modify", "add", "delete")
MODES = ("100644", "100755")
FILE_KEYS = ("path", "action", "base_sha256", "sha256", "mode")
MANIFEST_KEYS = ("schema_version", "name", "source", "commit", "files")
JOURNAL_STATES = ("applying", "applied")


class ManifestError(FormatError):
    """An overlay manifest or an overlay journal is malformed."""


@dataclass(frozen=True, kw_only=True, slots=True)
class OverlayFile(Record):
    path: str
    action: Action
    base_sha256: str | None = None  # None: a new file
    sha256: str | None = None  # None: the file is deleted
    mode: str = "100644"

    @classmethod
    def read(cls, t: Table) -> OverlayFile:
        t.only(FILE_KEYS)
        action = t.text("action", "")
        if action not in ACTIONS:
            t.fail(f"action must be one of {', '.join(ACTIONS)}", "action")
        f = cls(
            path=check_rel_path(t.data.get("path"), t.file, t.where("path")),
            action=cast(Action, action),
            base_sha256=t.opt_text("base_sha256"),
            sha256=t.opt_text("sha256"),
            mode=t.text("mode", "100644"),
        )
        need_base, need_new = action != "add", action != "delete"
        for name, value, need in (("base_sha256", f.base_sha256, need_base), ("sha256", f.sha256, need_new)):
            if not (is_sha256(value) if need else value is None):
                t.fail(f"{action}: expected {'a 64-hex sha256' if need else 'absent'}", name)
        if f.mode not in MODES:
            t.fail(f"mode must be one of {', '.join(MODES)}", "mode")
        return f


@dataclass(frozen=True, kw_only=True, slots=True)
class Manifest(Record):
    name: str
    source: str
    commit: str
    files: tuple[OverlayFile, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, file: str = MANIFEST_NAME) -> Manifest:
        return cls.read(Table.root(data, file, ManifestError))

    @classmethod
    def read(cls, t: Table) -> Manifest:
        t.only(MANIFEST_KEYS)
        if t.number("schema_version", SCHEMA) != SCHEMA:
            t.fail(f"this megacpp-env reads schema_version {SCHEMA}", "schema_version")
        name, source, commit = (t.text(k, nonempty=True) for k in ("name", "source", "commit"))
        if not git.SHA_RE.fullmatch(commit):
            t.fail(f"expected a 40-hex commit SHA, got {commit!r}", "commit")
        files = tuple(OverlayFile.read(entry) for entry in t.tables("files"))
        paths = [f.path for f in files]
        if len(set(paths)) != len(paths):
            t.fail("a path is listed twice", "files")
        return cls(name=name, source=source, commit=commit, files=tuple(sorted(files, key=_by_path)))


def _by_path(f: OverlayFile) -> str:
    return f.path


def is_sha256(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def check_rel_path(value: object, where: str = "", key: str = "path") -> str:
    """A relative, normalised POSIX path that stays inside the checkout and out of ``.git``."""
    if not isinstance(value, str) or not value:
        raise ManifestError("expected a relative path", file=where, key=key)
    p = PurePosixPath(value)
    bad = p.is_absolute() or "\\" in value or str(p) != value
    if bad or any(part in ("..", ".", ".git") for part in p.parts) or any(ord(c) < 32 for c in value):
        raise ManifestError(f"unsafe overlay path {value!r}", file=where, key=key)
    return value


def load_manifest(overlay_dir: Path) -> Manifest:
    path = Path(overlay_dir) / MANIFEST_NAME
    try:
        data = read_toml(path, ManifestError)
    except FileNotFoundError:
        raise ManifestError("no overlay manifest here", file=str(path), remedy="megacpp-env overlay new") from None
    return Manifest.from_dict(data, file=str(path))


def manifest_document(m: Manifest) -> dict[str, Any]:
    """The manifest's value tree: fixed key order, files sorted by path, absent hashes left out."""
    files = []
    for f in sorted(m.files, key=_by_path):
        entry: dict[str, Any] = {"path": f.path, "action": f.action}
        entry.update({k: v for k, v in (("base_sha256", f.base_sha256), ("sha256", f.sha256)) if v is not None})
        files.append({**entry, "mode": f.mode})
    return {"schema_version": SCHEMA, "name": m.name, "source": m.source, "commit": m.commit, "files": files}


def dump_manifest(m: Manifest) -> str:
    """The manifest as TOML (tomli-w through ``megacpp_env.tomlwrite``), after a comment that says
    what made it and how to apply it."""
    return dumps(
        manifest_document(m),
        comments=[
            f"megacpp-env overlay manifest, made by `megacpp-env overlay new {m.name} --from CHECKOUT`.",
            "Each file: upstream sha256 at `commit` (base_sha256; absent for a new file) and the sha256 of",
            "the replacement stored under files/<path> (absent for a deleted file). Apply with",
            f"`megacpp-env overlay apply {m.name} --to CHECKOUT`.",
        ],
    )


# ---- the journal of an apply ---------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Journal(Record):
    """What an apply is doing (``applying``) or did (``applied``) to a checkout, and the directories
    it created (``restore`` removes them again)."""

    name: str
    commit: str
    state: str
    created_dirs: tuple[str, ...] = ()

    @classmethod
    def read(cls, t: Table) -> Journal:
        state = t.text("state")
        if state not in JOURNAL_STATES:
            t.fail(f"state must be one of {', '.join(JOURNAL_STATES)}", "state")
        return cls(name=t.text("name"), commit=t.text("commit"), state=state, created_dirs=t.texts("created_dirs"))


def journal_path(checkout: Path) -> Path:
    return git.git_path(checkout, JOURNAL_NAME)


def read_journal(checkout: Path) -> Journal | None:
    try:
        return Journal.read(read_json(journal_path(checkout), ManifestError))
    except FileNotFoundError:
        return None


def write_journal(checkout: Path, journal: Journal) -> None:
    atomic_write_text(journal_path(checkout), json.dumps(journal.to_dict(), indent=2, sort_keys=True) + "\n")
