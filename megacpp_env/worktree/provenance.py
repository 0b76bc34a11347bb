"""The provenance record of a checkout: ``DEST/.megacpp-checkout.json``, written by ``checkout``
(kept out of ``git status``) and updated by ``overlay apply``/``restore``.

One typed reader (``read_provenance``) and one writer (``write_provenance``); ``record_overlay``
records or clears the applied overlay's state in it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from megacpp_env import __version__, git
from megacpp_env.errors import FormatError
from megacpp_env.fsutil import atomic_write_text
from megacpp_env.records import Record, Table, as_dict, read_json

PROVENANCE_NAME = ".megacpp-checkout.json"
PROVENANCE_SCHEMA = 1
TOOL_PREFIX = "megacpp-env "


class ProvenanceError(FormatError):
    """A checkout's provenance record is malformed."""


@dataclass(frozen=True, kw_only=True, slots=True)
class OverlayRecord(Record):
    """The state ``overlay apply`` left: the overlay's name, the diff and untracked-file hashes of
    the checkout right after it, and the paths it changed (None in a record that lacks them: such a
    record vouches for nothing)."""

    name: str
    diff_hash: str | None = None
    untracked_hash: str | None = None
    paths: tuple[str, ...] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, file: str = "<overlay record>") -> OverlayRecord:
        return cls.read(Table.root(data, file, ProvenanceError))

    @classmethod
    def read(cls, t: Table) -> OverlayRecord:
        return cls(
            name=t.text("name"),
            diff_hash=t.opt_text("diff_hash"),
            untracked_hash=t.opt_text("untracked_hash"),
            paths=t.texts("paths") if t.has("paths") else None,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Provenance:
    """What ``checkout`` made. ``overlay`` is set by ``overlay apply`` and cleared by ``overlay
    restore``; ``verify-checkout`` accepts exactly that recorded state."""

    source: str
    url: str
    commit: str
    ref: str = ""
    submodules: dict[str, str] = field(default_factory=dict)
    shallow: bool = False
    tool_version: str = __version__
    overlay: OverlayRecord | None = None

    def to_dict(self) -> dict[str, Any]:
        out = as_dict(self)
        del out["tool_version"]
        out["submodules"] = dict(sorted(self.submodules.items()))
        return {"schema_version": PROVENANCE_SCHEMA, **out, "tool": TOOL_PREFIX + self.tool_version}

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, file: str = PROVENANCE_NAME) -> Provenance:
        return cls.read(Table.root(data, file, ProvenanceError))

    @classmethod
    def read(cls, t: Table) -> Provenance:
        version = t.number("schema_version", PROVENANCE_SCHEMA)
        if version != PROVENANCE_SCHEMA:
            t.fail(f"schema_version {version}, this megacpp-env reads {PROVENANCE_SCHEMA}", "schema_version")
        overlay = t.opt_table("overlay")
        return cls(
            source=t.text("source", ""),
            url=t.text("url", ""),
            commit=t.text("commit", ""),
            ref=t.text("ref", ""),
            submodules=t.text_map("submodules"),
            shallow=t.flag("shallow", False),
            tool_version=t.text("tool", "").removeprefix(TOOL_PREFIX),
            overlay=OverlayRecord.read(overlay) if overlay is not None else None,
        )


def read_provenance(path: Path) -> Provenance | None:
    """The record of the checkout at ``path``; None when it has none. A malformed record is a
    ``ProvenanceError`` naming the file and the key."""
    file = Path(path) / PROVENANCE_NAME
    try:
        return Provenance.read(read_json(file, ProvenanceError))
    except (FileNotFoundError, NotADirectoryError):
        return None


def write_provenance(path: Path, prov: Provenance) -> bool:
    """Write the record atomically and keep it, and the temp files of an atomic write of it, out of
    ``git status`` (``.git/info/exclude``). A temp file left by a write that was killed midway is ours
    (``fsutil.atomic_write_bytes`` names it ``.<name>.*.tmp``) and is removed: it must not wedge the
    checkout as an "untracked change"."""
    git.add_exclude(path, f"/{PROVENANCE_NAME}")
    git.add_exclude(path, f"/.{PROVENANCE_NAME}.*.tmp")
    for stale in Path(path).glob(f".{PROVENANCE_NAME}.*.tmp"):
        if stale.is_file() and not stale.is_symlink():
            stale.unlink(missing_ok=True)
    text = json.dumps(prov.to_dict(), indent=2, sort_keys=True) + "\n"
    return atomic_write_text(Path(path) / PROVENANCE_NAME, text)


def record_overlay(path: Path, overlay: OverlayRecord | None, *, source: str = "", commit: str = "") -> None:
    """Record (or clear, with None) the overlay state in the provenance record. A checkout made by
    hand gets a minimal record (``source``, ``commit``, origin URL) so the state is still recorded."""
    prov = read_provenance(path)
    if prov is None and overlay is not None:
        url = git.remote_urls(path).get("origin", "")
        prov = Provenance(source=source, url=url, commit=commit or git.head_commit(path) or "")
    if prov is not None:
        write_provenance(path, replace(prov, overlay=overlay))
