"""The snapshot document: schema-versioned JSON with a digest over the hashed ``facts`` only.

``live`` (readings of the moment and of this job: GPU clocks and temperatures, the scheduler's job
id, the training repository, the container), ``host`` (hostname, memory, tool version, when, where
and how it ran) and ``timing`` are kept beside the facts, unhashed: two snapshots of an unchanged
environment have the same digest wherever and whenever they are taken. A document whose digest
does not match its facts is refused on load.

The published JSON Schema is ``megacpp_env/schemas/snapshot.schema.json`` (``snapshot --schema``);
docs/SNAPSHOT.md documents every field and the changelog of schema versions. This version reads
documents of ``READABLE_VERSIONS`` (their digest is checked by the rules of their own version) and
refuses any other with the remedy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megacpp_env.errors import FormatError, MegacppEnvError, VerificationError
from megacpp_env.fsutil import canonical_hash
from megacpp_env.records import Table, read_document
from megacpp_env.snapshot import registry

SCHEMA = "megacpp-env/snapshot"
SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)  # 1: no ``live`` section, fewer GPU and system facts (docs/SNAPSHOT.md)
SCHEMA_FILE = "snapshot.schema.json"  # megacpp_env/schemas/: the JSON Schema of SCHEMA_VERSION's document


def json_schema() -> str:
    """The published JSON Schema of the document this version writes (package data)."""
    from importlib.resources import files

    return files("megacpp_env").joinpath("schemas", SCHEMA_FILE).read_text(encoding="utf-8")


class SnapshotFormatError(FormatError, VerificationError):
    """A snapshot document that cannot be read, or whose digest does not match its facts."""


def digest_of(facts: dict[str, Any], version: int = SCHEMA_VERSION) -> str:
    """sha256 over the facts of every area that counts in the digest (``registry.hashed``), and the
    schema version (the same facts in another version of the document are another digest)."""
    counted = {area: value for area, value in facts.items() if registry.hashed(area)}
    return "sha256:" + canonical_hash({"schema_version": version, "facts": counted})


def errors(facts: dict[str, Any]) -> list[str]:
    """What the snapshot could not read, one line each (empty: complete): a hashed area that failed
    (``{"error": ...}``), a checkout that could not be inspected, a distribution whose files could
    not be verified. Such a snapshot certifies nothing: the verb exits non-zero, a golden is not
    stored from it, and ``diff`` makes every one an error finding (``diff.incomplete``)."""
    out: list[str] = []
    for area, value in sorted(facts.items()):
        if not registry.hashed(area) or not isinstance(value, dict):
            continue
        if "error" in value:
            out.append(f"{area}: {value['error']}")
        elif area == "checkouts":
            out += (
                f"checkouts.{k}: {v['error']}" for k, v in sorted(value.items()) if isinstance(v, dict) and "error" in v
            )
        elif area == "python":
            dists = value.get("distributions")
            for name, dist in sorted(dists.items()) if isinstance(dists, dict) else ():
                integrity = dist.get("integrity") if isinstance(dist, dict) else None
                if isinstance(integrity, dict) and "error" in integrity:
                    out.append(f"python.distributions.{name}: {integrity['error']}")
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Snapshot:
    facts: dict[str, Any]
    live: dict[str, Any] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)
    timing: dict[str, Any] = field(default_factory=dict)
    digest: str = ""
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not self.digest:
            object.__setattr__(self, "digest", digest_of(self.facts, self.schema_version))

    def area(self, name: str) -> dict[str, Any]:
        value = self.facts.get(name)
        return value if isinstance(value, dict) else {}

    def to_dict(self) -> dict[str, Any]:
        # Not derived (records.as_dict): that would deep-copy the facts, which can be large.
        out = {
            "schema": SCHEMA,
            "schema_version": self.schema_version,
            "digest": self.digest,
            "facts": self.facts,
            "live": self.live,
            "host": self.host,
            "timing": self.timing,
        }
        if self.schema_version < 2:  # a version 1 document read back is written as it was
            del out["live"]
        return out

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
        if version not in READABLE_VERSIONS or isinstance(version, bool):
            readable = ", ".join(map(str, READABLE_VERSIONS))
            t.fail(
                f"snapshot schema_version {version}, this megacpp-env reads {readable} "
                "(take the snapshot again with this megacpp-env: `megacpp-env snapshot -o FILE`, "
                "or `megacpp-env snapshot --golden NAME` for a golden one; docs/SNAPSHOT.md lists the versions)",
                "schema_version",
            )
        if not t.has("facts"):
            t.fail("snapshot has no facts", "facts")
        if version < 2 and t.has("live"):
            t.fail("a schema_version 1 snapshot has no live section", "live")
        facts, live, host, timing = (t.opt_table(k) for k in ("facts", "live", "host", "timing"))
        snap = cls(
            facts=dict(facts.data) if facts else {},
            live=dict(live.data) if live else {},
            host=dict(host.data) if host else {},
            timing=dict(timing.data) if timing else {},
            schema_version=version,
        )
        if t.data.get("digest") != snap.digest:
            t.fail(
                f"digest {t.data.get('digest')} does not match the facts ({snap.digest}); "
                "the file was edited or truncated",
                "digest",
            )
        return snap


def load_snapshot(path: Path) -> Snapshot:
    return read_document(path, Snapshot.read, SnapshotFormatError, "snapshot file")


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
