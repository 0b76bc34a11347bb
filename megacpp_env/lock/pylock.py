"""PEP 751 lock files: the typed model every lock module shares, a reader (tomllib) and a
deterministic writer (sorted packages, no timestamps of our own, ``[tool.megacpp-env]`` last).

Read leniently: locks written by uv, by other PEP 751 tools or by hand all land in the same model.
``packaging.pylock`` is not used because the tool supports packaging>=24.2, which lacks it.
"""

from __future__ import annotations

import datetime as dt
import json
import tomllib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from packaging.utils import NormalizedName, canonicalize_name

from megacpp_env.errors import MegacppEnvError

TOOL_KEY = "megacpp-env"


class LockFormatError(MegacppEnvError, ValueError):
    """A lock file that cannot be read."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Artifact:
    """One downloadable file of a package: a wheel or an sdist (or an archive)."""

    kind: str  # "wheel" | "sdist" | "archive"
    url: str
    sha256: str
    size: int | None = None
    upload_time: str = ""

    @property
    def filename(self) -> str:
        return unquote(urlsplit(self.url).path.rsplit("/", 1)[-1])


@dataclass(frozen=True, kw_only=True, slots=True)
class Vcs:
    type: str
    url: str
    commit: str
    requested_revision: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class LockedPackage:
    name: str  # canonical
    version: str
    marker: str = ""
    index: str = ""
    direct: bool = False
    artifacts: tuple[Artifact, ...] = ()
    vcs: Vcs | None = None

    @property
    def hashes(self) -> frozenset[str]:
        return frozenset(a.sha256 for a in self.artifacts if a.sha256)

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
    tool: Mapping[str, Any] = field(default_factory=dict)  # the [tool.megacpp-env] table
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
        return str(self.tool.get("inputs-hash", ""))

    def with_tool(self, tool: Mapping[str, Any]) -> Lock:
        return replace(self, tool=dict(tool))


# ---- reading ----------------------------------------------------------------------------------


def read_pylock_text(text: str, *, path: str = "<pylock>") -> Lock:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LockFormatError(f"{path}: not valid TOML: {exc}") from None
    if "packages" not in data and "lock-version" not in data:
        raise LockFormatError(f"{path}: not a PEP 751 lock (no lock-version, no [[packages]])")
    tool = data.get("tool", {}).get(TOOL_KEY, {})
    direct = {canonicalize_name(n) for n in tool.get("direct", [])}
    packages = tuple(_package(p, direct, path) for p in data.get("packages", []))
    return Lock(
        packages=tuple(sorted(packages, key=lambda p: (p.name, p.marker))),
        requires_python=str(data.get("requires-python", "")),
        created_by=str(data.get("created-by", "")),
        tool=tool,
        path=path,
    )


def read_pylock(path: Path) -> Lock:
    return read_pylock_text(Path(path).read_text(encoding="utf-8"), path=str(path))


def _package(raw: Mapping[str, Any], direct: set[NormalizedName], path: str) -> LockedPackage:
    try:
        name = canonicalize_name(raw["name"])
    except KeyError:
        raise LockFormatError(f"{path}: a [[packages]] entry has no name") from None
    artifacts = [_artifact("wheel", w) for w in raw.get("wheels", [])]
    if "sdist" in raw:
        artifacts.append(_artifact("sdist", raw["sdist"]))
    if "archive" in raw:
        artifacts.append(_artifact("archive", raw["archive"]))
    vcs = raw.get("vcs")
    return LockedPackage(
        name=name,
        version=str(raw.get("version", "")),
        marker=str(raw.get("marker", "")),
        index=str(raw.get("index", "")),
        direct=name in direct,
        artifacts=tuple(sorted(artifacts, key=lambda a: (a.kind != "wheel", a.filename))),
        vcs=Vcs(
            type=str(vcs.get("type", "git")),
            url=str(vcs.get("url", "")),
            commit=str(vcs.get("commit-id", "")),
            requested_revision=str(vcs.get("requested-revision", "")),
        )
        if vcs
        else None,
    )


def _artifact(kind: str, raw: Mapping[str, Any]) -> Artifact:
    upload = raw.get("upload-time", "")
    if isinstance(upload, dt.datetime):
        upload = upload.isoformat().replace("+00:00", "Z")
    size = raw.get("size")
    return Artifact(
        kind=kind,
        url=str(raw.get("url", raw.get("path", ""))),
        sha256=str(raw.get("hashes", {}).get("sha256", "")),
        size=int(size) if size is not None else None,
        upload_time=str(upload),
    )


# ---- writing ----------------------------------------------------------------------------------


def _s(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _inline(items: Iterable[tuple[str, str]]) -> str:
    return "{ " + ", ".join(f"{k} = {v}" for k, v in items) + " }"


def _artifact_toml(a: Artifact) -> str:
    items = [("url", _s(a.url))]
    if a.upload_time:
        items.append(("upload-time", a.upload_time))
    if a.size is not None:
        items.append(("size", str(a.size)))
    items.append(("hashes", _inline([("sha256", _s(a.sha256))])))
    return _inline(items)


def _package_toml(p: LockedPackage) -> list[str]:
    out = ["[[packages]]", f"name = {_s(p.name)}"]
    if p.version:
        out.append(f"version = {_s(p.version)}")
    if p.marker:
        out.append(f"marker = {_s(p.marker)}")
    if p.index:
        out.append(f"index = {_s(p.index)}")
    if p.vcs:
        vcs = [("type", _s(p.vcs.type)), ("url", _s(p.vcs.url))]
        if p.vcs.requested_revision:
            vcs.append(("requested-revision", _s(p.vcs.requested_revision)))
        out.append(f"vcs = {_inline([*vcs, ('commit-id', _s(p.vcs.commit))])}")
    for a in p.artifacts:
        if a.kind in ("sdist", "archive"):
            out.append(f"{a.kind} = {_artifact_toml(a)}")
    wheels = [_artifact_toml(a) for a in p.artifacts if a.kind == "wheel"]
    if len(wheels) == 1:
        out.append(f"wheels = [{wheels[0]}]")
    elif wheels:
        out.append("wheels = [\n" + "".join(f"    {w},\n" for w in wheels) + "]")
    return out


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _s(value)
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        return "[\n" + "".join(f"    {_value(v)},\n" for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} into [tool.{TOOL_KEY}]")


def render_pylock(lock: Lock) -> str:
    """The PEP 751 text of ``lock``: deterministic, byte-identical for equal locks."""
    head = ['lock-version = "1.0"', f"created-by = {_s(lock.created_by or 'megacpp-env')}"]
    if lock.requires_python:
        head.append(f"requires-python = {_s(lock.requires_python)}")
    blocks = ["\n".join(head)]
    blocks += ["\n".join(_package_toml(p)) for p in sorted(lock.packages, key=lambda p: (p.name, p.marker))]
    if lock.tool:
        table = [f"[tool.{TOOL_KEY}]"] + [f"{k} = {_value(v)}" for k, v in lock.tool.items()]
        blocks.append("\n".join(table))
    return "\n\n".join(blocks) + "\n"
