"""The build record of a locally built distribution: which checkout (commit, uncommitted diff,
untracked files) and which build environment made the wheel installed in a virtual environment.

Written by the source-build path when it installs a wheel it built, read by the golden capture so
that ``reproduce`` rebuilds the distribution from the re-created checkout instead of looking for a
wheel that no index has. One JSON file per distribution, in the environment's prefix but outside
``site-packages`` (so the record never shows up as a file no distribution owns):
``<prefix>/megacpp-env/builds/<normalized name>.json``.

Paths inside ``build_env`` values are written with the checkout as ``{checkout}`` (e.g.
``CFLAGS=-ffile-prefix-map={checkout}=.``), so a rebuild elsewhere uses its own checkout path.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megacpp_env.errors import FormatError
from megacpp_env.fsutil import atomic_write_text
from megacpp_env.records import Table, as_dict, read_json

SCHEMA = "megacpp-env/build-record"
SCHEMA_VERSION = 1
RECORDS_DIR = ("megacpp-env", "builds")
CHECKOUT_TOKEN = "{checkout}"  # noqa: S105 (a placeholder, not a password)
_KEY_RE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


class BuildRecordError(FormatError):
    """A build record that cannot be read (``FILE: KEY: what``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildRecord:
    dist: str  # normalized distribution name (PEP 503)
    version: str
    checkout: str  # absolute path of the checkout it was built from, when it was built
    commit: str
    diff_hash: str  # git.diff_hash of the checkout at build time
    untracked_hash: str
    build_env: dict[str, str] = field(default_factory=dict)  # the variables the build set ({checkout} for its path)
    wheel: str = ""  # the wheel's file name
    wheel_sha256: str = ""
    builder: str = ""  # what built it (``megacpp-env <version> build-source``)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, **as_dict(self)}

    @classmethod
    def read(cls, t: Table) -> BuildRecord:
        if t.data.get("schema") != SCHEMA or t.data.get("schema_version") != SCHEMA_VERSION:
            t.fail(f"not a {SCHEMA} version {SCHEMA_VERSION} document", "schema")
        t.only({"schema", "schema_version", *cls.__dataclass_fields__})
        dist = t.text("dist", nonempty=True)
        if not _KEY_RE.fullmatch(dist):
            t.fail(f"expected a normalized distribution name, got {dist!r}", "dist")
        return cls(
            dist=dist,
            version=t.text("version", nonempty=True),
            checkout=t.text("checkout", nonempty=True),
            commit=t.text("commit", nonempty=True),
            diff_hash=t.text("diff_hash", ""),
            untracked_hash=t.text("untracked_hash", ""),
            build_env=t.text_map("build_env"),
            wheel=t.text("wheel", ""),
            wheel_sha256=t.text("wheel_sha256", ""),
            builder=t.text("builder", ""),
        )


def records_dir(prefix: Path | str) -> Path:
    return Path(prefix).joinpath(*RECORDS_DIR)


def write_build_record(prefix: Path | str, record: BuildRecord) -> Path:
    """Write (atomically) the record of ``record.dist`` into the environment at ``prefix``."""
    path = records_dir(prefix) / f"{record.dist}.json"
    atomic_write_text(path, json.dumps(record.to_dict(), indent=2, sort_keys=True) + "\n")
    return path


def read_build_records(prefix: Path | str) -> dict[str, BuildRecord]:
    """Every build record of the environment at ``prefix``, by distribution; a malformed one is a
    ``BuildRecordError`` naming its file."""
    out: dict[str, BuildRecord] = {}
    where = records_dir(prefix)
    if not where.is_dir():
        return out
    for path in sorted(where.glob("*.json")):
        record = BuildRecord.read(read_json(path, BuildRecordError))
        out[record.dist] = record
    return out


def portable_env(env: dict[str, str], checkout: Path | str) -> dict[str, str]:
    """``env`` with the checkout's path written as ``{checkout}``."""
    text = str(checkout)
    return {k: v.replace(text, CHECKOUT_TOKEN) for k, v in sorted(env.items())}


def env_for(env: dict[str, str], checkout: Path | str) -> dict[str, str]:
    """A recorded ``build_env`` for a build in ``checkout`` (``{checkout}`` replaced by its path)."""
    return {k: v.replace(CHECKOUT_TOKEN, str(checkout)) for k, v in env.items()}
