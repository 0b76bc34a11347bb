"""PEP 751 lock files: the typed model every lock module shares, one validating reader and a
deterministic writer (a value tree dumped by tomli-w through ``megacpp_env.tomlwrite``: sorted
packages, no timestamps of our own, ``[tool.megacpp-env]`` last; validated on write as on read).

Reading: tomllib parses the file once; ``packaging.pylock.Pylock.from_dict`` validates it against
PEP 751 (its ``PylockValidationError`` context becomes the key path of our one-line error,
``locks/x.toml: packages[3].wheels[0].hashes: ...``); the model is then built from the validated
data, keeping the file's own spelling of versions and markers so that a lock round-trips byte for
byte. ``[tool.megacpp-env]`` is read into ``LockMeta``. Locks written by uv, by other PEP 751 tools
or by hand all land in the same model.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from packaging.utils import canonicalize_name

from megacpp_env.errors import FormatError
from megacpp_env.records import Table, as_dict, parse_toml, read_text, renamed
from megacpp_env.tomlwrite import dumps, rfc3339

TOOL_KEY = "megacpp-env"


class LockFormatError(FormatError):
    """A lock file that cannot be read (``FILE: KEY.PATH: what``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LockMeta:
    """``[tool.megacpp-env]`` of a lock megacpp-env wrote: what it was resolved from, and how."""

    target: str = ""
    part: str = ""  # a toolchain lock of the target ("cuda"); "" for the target's venv lock
    platform: str = ""
    python: str = ""
    python_platform: str = field(default="", metadata=renamed("python-platform"))
    inputs_hash: str = field(default="", metadata=renamed("inputs-hash"))
    uv_version: str = field(default="", metadata=renamed("uv-version"))
    exclude_newer: str = field(default="", metadata=renamed("exclude-newer"))  # uv's cutoff; "" for none
    command: str = ""
    uv_command: str = field(default="", metadata=renamed("uv-command"))
    direct: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = as_dict(self)
        for key in ("part", "exclude-newer"):  # absent when empty: the locks written before them keep their bytes
            if not out[key]:
                del out[key]
        return out

    @classmethod
    def read(cls, t: Table) -> LockMeta:
        keys = {f: f.replace("_", "-") for f in cls.__dataclass_fields__}
        t.only(keys.values())
        lists = ("direct", "requirements")
        values: dict[str, Any] = {f: t.texts(k) if f in lists else t.text(k, "") for f, k in keys.items()}
        return cls(**values)


@dataclass(frozen=True, kw_only=True, slots=True)
class Artifact:
    """One downloadable file of a package: a wheel or an sdist (or an archive)."""

    kind: str  # "wheel" | "sdist" | "archive"
    url: str
    sha256: str
    size: int | None = None
    upload_time: str = ""
    other_hashes: tuple[str, ...] = ()  # "sha384:<hex>", "sha512:<hex>" ...: every algorithm but sha256

    @property
    def filename(self) -> str:
        return unquote(urlsplit(self.url).path.rsplit("/", 1)[-1])

    @property
    def digests(self) -> frozenset[str]:
        """Every hash: sha256 as bare hex (as the rest of the tool spells it), others as ``alg:hex``."""
        return frozenset((self.sha256,) if self.sha256 else ()) | frozenset(self.other_hashes)

    @property
    def version(self) -> str:
        """The version its wheel or sdist file name carries ('' when the name is not one)."""
        return version_of_filename(self.filename)


@dataclass(frozen=True, kw_only=True, slots=True)
class Vcs:
    type: str
    url: str
    commit: str
    requested_revision: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Directory:
    """A package installed from a local source tree (``directory = { path, editable }``)."""

    path: str
    editable: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class LockedPackage:
    name: str  # canonical
    version: str
    marker: str = ""
    index: str = ""
    direct: bool = False
    artifacts: tuple[Artifact, ...] = ()
    vcs: Vcs | None = None
    directory: Directory | None = None

    @property
    def hashes(self) -> frozenset[str]:
        """Every artifact hash: sha256 as bare hex, other algorithms as ``alg:hex``."""
        return frozenset(h for a in self.artifacts for h in a.digests)

    @property
    def shown_version(self) -> str:
        """The recorded version, else (a direct URL, which PEP 751 lets go without one) the version
        its artifact's file name carries: ``pkg @ https://h/pkg-2.0.tar.gz`` is version 2.0."""
        return self.version or next((v for a in self.artifacts if (v := a.version)), "")

    @property
    def origin(self) -> str:
        """Where it comes from: the index if recorded, else the scheme+host of its first artifact."""
        if self.index:
            return self.index.rstrip("/")
        if self.vcs:
            return self.vcs.url
        url = next((a.url for a in self.artifacts if a.url), "")
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.netloc}" if parts.netloc else ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Lock:
    packages: tuple[LockedPackage, ...]
    requires_python: str = ""
    created_by: str = "megacpp-env"
    meta: LockMeta | None = None  # [tool.megacpp-env]; None in a lock another tool wrote
    path: str = ""  # where it was read from (for messages)

    def by_name(self) -> dict[str, LockedPackage]:
        """Entries by name (of a name split by markers, the last entry); ``by_key`` keeps them all."""
        return {p.name: p for p in self.packages}

    def by_key(self) -> dict[tuple[str, str], LockedPackage]:
        """Entries by (name, ""), or by (name, marker) where the lock has one entry per marker of a name."""
        counts = Counter(p.name for p in self.packages)
        return {(p.name, p.marker if counts[p.name] > 1 else ""): p for p in self.packages}

    @property
    def inputs_hash(self) -> str:
        return self.meta.inputs_hash if self.meta else ""


# ---- reading ----------------------------------------------------------------------------------


def read_pylock_text(text: str, *, path: str = "<pylock>") -> Lock:
    """The one reader of PEP 751 text: parse, validate (``packaging.pylock``), build the model. The
    same text is parsed once per process (a command that reads a lock for several checks, as
    ``lock check`` and ``gate`` do, gets the same immutable ``Lock`` back)."""
    return _read_once(text, path)


@functools.lru_cache(maxsize=32)
def _read_once(text: str, path: str) -> Lock:
    return lock_from_data(parse_toml(text, path, LockFormatError), path)


def lock_from_data(data: Mapping[str, Any], path: str) -> Lock:
    """The model of parsed PEP 751 data (``read_pylock_text`` without the parse)."""
    if "packages" not in data and "lock-version" not in data:
        raise LockFormatError("not a PEP 751 lock (no lock-version, no [[packages]])", file=path)
    _validate(data, path)
    doc = Table.root(data, path, LockFormatError)
    tool = doc.opt_table("tool")
    table = tool.opt_table(TOOL_KEY) if tool else None
    meta = LockMeta.read(table) if table else None
    direct: set[str] = {canonicalize_name(n) for n in (meta.direct if meta else ())}
    packages = tuple(_package(p, direct) for p in doc.tables("packages"))
    return Lock(
        packages=tuple(sorted(packages, key=lambda p: (p.name, p.marker))),
        requires_python=doc.text("requires-python", ""),
        created_by=doc.text("created-by", ""),
        meta=meta,
        path=path,
    )


def _validate(data: Mapping[str, Any], path: str) -> None:
    from packaging.pylock import Pylock, PylockValidationError

    try:
        Pylock.from_dict({"packages": [], **data})  # a lock of nothing may leave [[packages]] out
    except PylockValidationError as exc:
        raise LockFormatError(f"not a valid PEP 751 lock: {exc.message}", file=path, key=exc.context or "") from None


def read_pylock(path: Path) -> Lock:
    """A lock file: bounded, UTF-8 (a BOM is allowed), then ``read_pylock_text``."""
    try:
        text = read_text(Path(path), LockFormatError)
    except FileNotFoundError:
        raise LockFormatError("no such file", file=str(path)) from None
    return read_pylock_text(text, path=str(path))


def _package(t: Table, direct: set[str]) -> LockedPackage:
    name = canonicalize_name(t.text("name"))
    artifacts = [_artifact("wheel", w) for w in t.tables("wheels")]
    artifacts += [_artifact(kind, a) for kind in ("sdist", "archive") if (a := t.opt_table(kind)) is not None]
    vcs = t.opt_table("vcs")
    directory = t.opt_table("directory")
    return LockedPackage(
        name=name,
        version=t.text("version", ""),
        marker=t.text("marker", ""),
        index=_url(t, "index"),
        direct=name in direct,
        artifacts=tuple(sorted(artifacts, key=lambda a: (a.kind != "wheel", a.filename))),
        vcs=Vcs(
            type=vcs.text("type", "git"),
            url=vcs.text("url", ""),
            commit=vcs.text("commit-id", ""),
            requested_revision=vcs.text("requested-revision", ""),
        )
        if vcs
        else None,
        directory=Directory(path=directory.text("path"), editable=directory.flag("editable", False))
        if directory
        else None,
    )


def version_of_filename(filename: str) -> str:
    """``pkg-2.0-py3-none-any.whl`` / ``pkg-2.0.tar.gz`` -> ``2.0``; '' for any other name."""
    from packaging.utils import InvalidSdistFilename, InvalidWheelFilename, parse_sdist_filename, parse_wheel_filename

    try:
        if filename.endswith(".whl"):
            return str(parse_wheel_filename(filename)[1])
        if filename.endswith((".tar.gz", ".zip")):
            return str(parse_sdist_filename(filename)[1])
    except (InvalidWheelFilename, InvalidSdistFilename):
        pass
    return ""


# hashlib names PEP 751 tools write, and their hex lengths; any other name must still be hex.
HASH_LENGTHS = {"md5": 32, "sha1": 40, "sha224": 56, "sha256": 64, "sha384": 96, "sha512": 128,
                 "sha3_256": 64, "sha3_384": 96, "sha3_512": 128, "blake2b": 128, "blake2s": 64}  # fmt: skip
_HASH_NAME = re.compile(r"[a-z0-9_]{1,32}")
_HEX = re.compile(r"[0-9a-f]+")
_URL_SCHEMES = ("https://", "http://", "file://")


def _hashes(t: Table) -> dict[str, str]:
    """Every hash of an artifact, by algorithm: a known algorithm has its own hex length (sha384 and
    sha512 are as good as sha256); any value must be lowercase hex."""
    out: dict[str, str] = {}
    for algo in t.data:
        value = t.text(algo).lower()
        n = HASH_LENGTHS.get(algo)
        if not _HASH_NAME.fullmatch(algo) or not _HEX.fullmatch(value) or (n is not None and len(value) != n):
            t.fail(f"not a {algo} hex digest: {value[:80]!r}", algo)
        out[algo] = value
    return out


def _url(t: Table, key: str) -> str:
    url = t.text(key, "")
    if url and (not url.startswith(_URL_SCHEMES) or any(c.isspace() for c in url)):
        t.fail(f"expected an https, http or file URL, got {url[:80]!r}", key)
    return url


def _artifact(kind: str, t: Table) -> Artifact:
    upload = t.data.get("upload-time")
    if isinstance(upload, dt.datetime):
        upload = upload.isoformat().replace("+00:00", "Z")
    hashes = _hashes(t.table("hashes")) if t.has("hashes") else {}
    path = t.text("path", "")
    if path and (path.startswith("-") or any(c.isspace() for c in path)):
        t.fail(f"not a plain path: {path[:80]!r}", "path")
    return Artifact(
        kind=kind,
        url=_url(t, "url") or path,
        sha256=hashes.get("sha256", ""),
        size=t.number("size", None),
        upload_time=str(upload or ""),
        other_hashes=tuple(sorted(f"{k}:{v}" for k, v in hashes.items() if k != "sha256")),
    )


# ---- writing ----------------------------------------------------------------------------------


def _artifact_table(a: Artifact) -> dict[str, Any]:
    out: dict[str, Any] = {"url": a.url}
    if a.upload_time:
        out["upload-time"] = rfc3339(a.upload_time)
    if a.size is not None:
        out["size"] = a.size
    hashes = {"sha256": a.sha256} if a.sha256 else {}
    for h in a.other_hashes:
        algorithm, _, digest = h.partition(":")
        hashes[algorithm] = digest
    out["hashes"] = hashes
    return out


def _package_table(p: LockedPackage) -> dict[str, Any]:
    out: dict[str, Any] = {"name": p.name}
    for key, value in (("version", p.version), ("marker", p.marker), ("index", p.index)):
        if value:
            out[key] = value
    if p.vcs:
        vcs = {"type": p.vcs.type, "url": p.vcs.url}
        if p.vcs.requested_revision:
            vcs["requested-revision"] = p.vcs.requested_revision
        out["vcs"] = {**vcs, "commit-id": p.vcs.commit}
    if p.directory:
        out["directory"] = {"path": p.directory.path, **({"editable": True} if p.directory.editable else {})}
    for a in p.artifacts:
        if a.kind in ("sdist", "archive"):
            out[a.kind] = _artifact_table(a)
    wheels = [_artifact_table(a) for a in p.artifacts if a.kind == "wheel"]
    if wheels:
        out["wheels"] = wheels
    return out


def pylock_document(lock: Lock) -> dict[str, Any]:
    """The PEP 751 value tree of ``lock``: top-level keys, packages sorted by (name, marker),
    ``[tool.megacpp-env]`` last."""
    doc: dict[str, Any] = {"lock-version": "1.0", "created-by": lock.created_by or "megacpp-env"}
    if lock.requires_python:
        doc["requires-python"] = lock.requires_python
    doc["packages"] = [_package_table(p) for p in sorted(lock.packages, key=lambda p: (p.name, p.marker))]
    if lock.meta:
        doc["tool"] = {TOOL_KEY: lock.meta.to_dict()}
    return doc


def render_pylock(lock: Lock) -> str:
    """The PEP 751 text of ``lock`` (tomli-w; deterministic, byte-identical for equal locks),
    validated before it is returned: the text is read back by ``read_pylock_text`` (TOML, then
    ``packaging.pylock``), so no lock megacpp-env writes is one it would refuse to read."""
    text = dumps(pylock_document(lock))
    read_pylock_text(text, path=lock.path or "<lock being written>")
    return text
