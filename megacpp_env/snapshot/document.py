"""The snapshot document: schema-versioned JSON with a digest over the hashed ``facts`` only.

``host`` (hostname, memory, tool version, when and how it ran) and ``timing`` are kept beside the
facts, unhashed: two snapshots of an unchanged environment have the same digest wherever and
whenever they are taken. A document whose digest does not match its facts is refused on load.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megacpp_env.errors import FormatError, MegacppEnvError, VerificationError
from megacpp_env.fsutil import canonical_hash
from megacpp_env.records import Table, read_json
from megacpp_env.snapshot import registry

SCHEMA = "megacpp-env/snapshot"
SCHEMA_VERSION = 1


class SnapshotFormatError(FormatError, VerificationError):
    """A snapshot document that cannot be read, or whose digest does not match its facts."""


def digest_of(facts: dict[str, Any]) -> str:
    """sha256 over the facts of every area that counts in the digest (``registry.hashed``)."""
    counted = {area: value for area, value in facts.items() if registry.hashed(area)}
    return "sha256:" + canonical_hash({"schema_version": SCHEMA_VERSION, "facts": counted})


@dataclass(frozen=True, kw_only=True, slots=True)
class Snapshot:
    facts: dict[str, Any]
    host: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)
    digest: str = ""

    def __post_init__(self) -> None:
        if not self.digest:
            object.__setattr__(self, "digest", digest_of(self.facts))

    def area(self, name: str) -> dict[str, Any]:
        value = self.facts.get(name)
        return value if isinstance(value, dict) else {}

    def to_dict(self) -> dict[str, Any]:
        # Not derived (records.as_dict): that would deep-copy the facts, which can be large.
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "digest": self.digest,
            "facts": self.facts,
            "host": self.host,
            "timing": self.timing,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, origin: str = "snapshot") -> Snapshot:
        return cls.read(Table.root(data, origin, SnapshotFormatError))

    @classmethod
    def read(cls, t: Table) -> Snapshot:
        """The one reader of a snapshot document: schema, version, facts, and a digest that must
        match the facts (an edited or truncated file is refused)."""
        if t.data.get("schema") != SCHEMA:
            t.fail(f"not a megacpp-env snapshot (no schema {SCHEMA!r})")
        version = t.data.get("schema_version")
        if version != SCHEMA_VERSION:
            t.fail(
                f"snapshot schema_version {version}, this megacpp-env reads {SCHEMA_VERSION} "
                "(take a new snapshot with this version)",
                "schema_version",
            )
        if not t.has("facts"):
            t.fail("snapshot has no facts", "facts")
        facts, host, timing = (t.opt_table(k) for k in ("facts", "host", "timing"))
        snap = cls(
            facts=dict(facts.data) if facts else {},
            host=dict(host.data) if host else {},
            timing=dict(timing.data) if timing else {},
        )
        if t.data.get("digest") != snap.digest:
            t.fail(
                f"digest {t.data.get('digest')} does not match the facts ({snap.digest}); "
                "the file was edited or truncated",
                "digest",
            )
        return snap


def load_snapshot(path: Path) -> Snapshot:
    try:
        return Snapshot.read(read_json(path, SnapshotFormatError))
    except FileNotFoundError:
        raise SnapshotFormatError("no such snapshot file", file=str(path)) from None
    except OSError as exc:
        raise SnapshotFormatError(f"unreadable snapshot: {exc.strerror or exc}", file=str(path)) from None


def check_output(path: Path, *, option: str = "--output") -> Path:
    """Refuse, before anything is collected, an output path the document cannot be written to."""
    from megacpp_env.fsutil import check_output_path

    return check_output_path(path, option=option, example="snapshot.json")


def write_snapshot(snapshot: Snapshot, path: Path) -> bool:
    """Write the document: a regular file atomically (temp file, fsync, rename), a device or FIFO
    (``/dev/null``) by a plain write; False when the file was unchanged."""
    from megacpp_env.fsutil import write_output

    try:
        return write_output(path, snapshot.to_json().encode("utf-8"))
    except OSError as exc:
        raise MegacppEnvError(f"{path}: cannot write the snapshot: {exc.strerror or exc}") from None
