"""The capture document stored beside a golden snapshot: ``<golden>.capture.json``.

What a snapshot cannot re-create by itself: per checkout its commit, remotes, submodule commits, the
uncommitted diff and untracked files (as objects of ``objects/``), the files skipped because they
look like credentials; per distribution its installer, wheel tags, artifacts (where known), build
record and portable RECORD digest; the ``.pth`` path entries; how the venv was made. One typed
reader (``load_capture``), errors name the file and the key path.

Paths that necessarily differ on another machine are written with tokens: ``{venv}`` for the
environment's prefix, ``{checkout:NAME}`` for the checkout whose directory is called NAME.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megacpp_env.errors import FormatError
from megacpp_env.fsutil import atomic_write_text
from megacpp_env.records import HIDDEN, Record, Table, read_document
from megacpp_env.spec import envpolicy

SCHEMA = "megacpp-env/golden-capture"
SCHEMA_VERSION = 1
SUFFIX = ".capture.json"
ORIGINS = ("index", "url", "vcs", "local-build", "editable", "outside")
MODES = ("100644", "100755", "120000")
_HEX = re.compile(r"[0-9a-f]{64}")
_SHA1 = re.compile(r"[0-9a-f]{40}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
VENV_MARK = "{venv}"
# Variables a build env may not set: they run code of their own in every process of the build.
NOT_IN_BUILD_ENV = frozenset({"LD_PRELOAD", "LD_AUDIT", "BASH_ENV", "ENV", "PYTHONSTARTUP", "PYTHONINSPECT"})


MAKERS = ("venv", "uv", "virtualenv", "none")
# The name the venv maker's interpreter was run by: reproduce runs that file beside the interpreter it found.
_CREATOR = re.compile(r"(?:python|pypy)[0-9]*(?:\.[0-9]+)?")


def is_creator_name(name: str) -> bool:
    return _CREATOR.fullmatch(name) is not None


def is_executable_pth_line(line: str) -> bool:
    """A ``.pth`` line that ``site`` executes (``import`` then a space or tab), not a path entry."""
    return line.startswith(("import ", "import\t"))


class CaptureFormatError(FormatError):
    """A capture document that cannot be read."""


def _hex(t: Table, key: str) -> str:
    value = t.text(key)
    if not _HEX.fullmatch(value):
        t.fail(f"expected a sha256 (64 hex digits), got {value!r}", key)
    return value


def _rel(t: Table, key: str) -> str:
    """A relative '/'-separated path that stays inside its tree (no '..', not absolute, not .git)."""
    value = t.text(key, nonempty=True)
    parts = value.split("/")
    if value.startswith("/") or any(p in ("", ".", "..") for p in parts) or parts[0] == ".git" or "\0" in value:
        t.fail(f"expected a relative path inside the checkout, got {value!r}", key)
    return value


@dataclass(frozen=True, kw_only=True, slots=True)
class UntrackedFile(Record):
    path: str
    mode: str  # 100644 | 100755 | 120000 (a symbolic link: the object holds its target)
    sha256: str

    @classmethod
    def read(cls, t: Table) -> UntrackedFile:
        t.only(cls.__dataclass_fields__)
        mode = t.text("mode")
        if mode not in MODES:
            t.fail(f"expected one of {', '.join(MODES)}, got {mode!r}", "mode")
        return cls(path=_rel(t, "path"), mode=mode, sha256=_hex(t, "sha256"))


@dataclass(frozen=True, kw_only=True, slots=True)
class Skipped(Record):
    path: str
    reason: str

    @classmethod
    def read(cls, t: Table) -> Skipped:
        t.only(cls.__dataclass_fields__)
        return cls(path=t.text("path"), reason=t.text("reason"))


@dataclass(frozen=True, kw_only=True, slots=True)
class SubmoduleCommit(Record):
    path: str
    commit: str | None  # None: not initialised in the golden

    @classmethod
    def read(cls, t: Table) -> SubmoduleCommit:
        t.only(cls.__dataclass_fields__)
        commit = t.opt_text("commit")
        if commit is not None and not _SHA1.fullmatch(commit):
            t.fail(f"expected a 40-hex commit, got {commit!r}", "commit")
        return cls(path=_rel(t, "path"), commit=commit)


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckoutCapture(Record):
    key: str = field(metadata=HIDDEN)  # the snapshot's key for it (a source name or a path): the table's name
    path: str  # where it was
    name: str  # the basename of ``path``: where reproduce puts it (``--checkouts DIR/NAME``)
    head: str | None = None
    remotes: dict[str, str] = field(default_factory=dict)
    submodules: tuple[SubmoduleCommit, ...] = ()
    diff: str | None = None  # object of ``git diff HEAD --binary`` (= the snapshot's diff_hash); None: clean
    untracked_hash: str | None = None
    untracked: tuple[UntrackedFile, ...] = ()
    skipped: tuple[Skipped, ...] = ()
    provenance: str | None = None  # object of its .megacpp-checkout.json
    problems: tuple[str, ...] = ()  # why it cannot be re-created (no .git, changed while captured ...)

    @classmethod
    def read(cls, key: str, t: Table) -> CheckoutCapture:
        t.only(set(cls.__dataclass_fields__) - {"key"})
        head = t.opt_text("head")
        if head is not None and not _SHA1.fullmatch(head):
            t.fail(f"expected a 40-hex commit, got {head!r}", "head")
        name = t.text("name", nonempty=True)
        if "/" in name or name in (".", ".."):
            t.fail(f"expected a directory name, got {name!r}", "name")
        return cls(
            key=key, path=t.text("path"), name=name, head=head, remotes=t.text_map("remotes"),
            submodules=tuple(SubmoduleCommit.read(s) for s in t.tables("submodules")),
            diff=_hex(t, "diff") if t.has("diff") else None,
            untracked_hash=t.opt_text("untracked_hash"),
            untracked=tuple(UntrackedFile.read(u) for u in t.tables("untracked")),
            skipped=tuple(Skipped.read(s) for s in t.tables("skipped")),
            provenance=_hex(t, "provenance") if t.has("provenance") else None,
            problems=t.texts("problems"),
        )  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class Artifact(Record):
    """One file a distribution was installed from (a wheel or an sdist): its name, its sha256 and, where
    known, the URL it was fetched from."""

    filename: str
    sha256: str
    url: str = ""

    @classmethod
    def read(cls, t: Table) -> Artifact:
        t.only(cls.__dataclass_fields__)
        name = t.text("filename", nonempty=True)
        if "/" in name or name.startswith("."):
            t.fail(f"expected a file name, got {name!r}", "filename")
        return cls(filename=name, sha256=_hex(t, "sha256"), url=t.text("url", ""))


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildInfo(Record):
    """How a locally built distribution is rebuilt: from which captured checkout, with which env."""

    checkout: str  # the checkout's ``name``
    build_env: dict[str, str] = field(default_factory=dict)  # ``{checkout}`` for the checkout's path
    source: str = "record"  # "record" (a build record) | "direct_url" (inferred from dir_info)

    @classmethod
    def read(cls, t: Table) -> BuildInfo:
        t.only(cls.__dataclass_fields__)
        env = t.text_map("build_env")
        for name, value in env.items():
            if not _ENV_NAME.fullmatch(name) or name in NOT_IN_BUILD_ENV:
                t.fail(f"{name!r} may not be set in a build env", f"build_env.{name}")
            # the spec's env policy: a build record's env came from a spec's, which passed it
            problem, remedy = envpolicy.refusal(name, value.replace("{checkout}", "/checkout"))
            if problem:
                t.fail(f"{problem} ({remedy})", f"build_env.{name}")
        return cls(checkout=t.text("checkout"), build_env=env, source=t.text("source", "record"))


@dataclass(frozen=True, kw_only=True, slots=True)
class DistCapture(Record):
    key: str = field(metadata=HIDDEN)  # normalized name: the table's name
    name: str
    version: str
    installer: str
    requested: bool
    origin: str  # one of ORIGINS
    tags: tuple[str, ...] = ()  # the wheel tags of WHEEL (``cp311-cp311-linux_x86_64``)
    artifacts: tuple[Artifact, ...] = ()
    direct_url: dict[str, Any] | None = None  # relocated ({venv}, {checkout:NAME})
    portable_record: str = ""  # portable.record_digest of its RECORD
    build: BuildInfo | None = None

    @classmethod
    def read(cls, key: str, t: Table) -> DistCapture:
        t.only(set(cls.__dataclass_fields__) - {"key"})
        origin = t.text("origin")
        if origin not in ORIGINS:
            t.fail(f"expected one of {', '.join(ORIGINS)}, got {origin!r}", "origin")
        direct = t.opt_table("direct_url")
        build = t.opt_table("build")
        return cls(
            key=key, name=t.text("name", nonempty=True), version=t.text("version", nonempty=True),
            installer=t.text("installer", ""), requested=t.flag("requested", False), origin=origin,
            tags=t.texts("tags"), artifacts=tuple(Artifact.read(a) for a in t.tables("artifacts")),
            direct_url=dict(direct.data) if direct else None, portable_record=t.text("portable_record", ""),
            build=BuildInfo.read(build) if build else None,
        )  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class PathEntry(Record):
    """An unowned ``.pth`` file of a site directory: its lines with paths written as tokens."""

    site: str  # the site directory, relocated (``{venv}/lib/python3.11/site-packages``)
    file: str
    lines: tuple[str, ...]

    @classmethod
    def read(cls, t: Table) -> PathEntry:
        t.only(cls.__dataclass_fields__)
        name = t.text("file", nonempty=True)
        if "/" in name or not name.endswith(".pth"):
            t.fail(f"expected a .pth file name, got {name!r}", "file")
        site = t.text("site")
        if not site.startswith(VENV_MARK + "/") or "/../" in site + "/" or "\0" in site:
            t.fail(f"expected a site directory inside the venv ({VENV_MARK}/...), got {site!r}", "site")
        lines = t.texts("lines")
        for n, line in enumerate(lines):
            if is_executable_pth_line(line):
                t.fail("a line that runs code at every interpreter start (import ...) is not re-created", f"lines.{n}")
        return cls(site=site, file=name, lines=lines)


@dataclass(frozen=True, kw_only=True, slots=True)
class PythonCapture(Record):
    version: str
    implementation: str
    prefix: str
    base_prefix: str
    executable: str
    maker: str = "venv"  # what made the environment: venv | uv | virtualenv | none (not a venv)
    creator: str = ""  # the name the maker's interpreter was run by (``python3``): scripts' shebangs use it
    system_site_packages: bool = False

    @classmethod
    def read(cls, t: Table) -> PythonCapture:
        t.only(cls.__dataclass_fields__)
        maker, creator = t.text("maker", "venv"), t.text("creator", "")
        if maker not in MAKERS:
            t.fail(f"expected one of {', '.join(MAKERS)}, got {maker!r}", "maker")
        if creator and not is_creator_name(creator):
            t.fail(f"expected an interpreter's file name (python3, python3.11), got {creator!r}", "creator")
        return cls(
            version=t.text("version", nonempty=True), implementation=t.text("implementation", "CPython"),
            prefix=t.text("prefix"), base_prefix=t.text("base_prefix"), executable=t.text("executable", ""),
            maker=maker, creator=creator,
            system_site_packages=t.flag("system_site_packages", False),
        )  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class Capture:
    golden: str
    snapshot_digest: str
    python: PythonCapture
    distributions: dict[str, DistCapture] = field(default_factory=dict)
    path_entries: tuple[PathEntry, ...] = ()
    checkouts: dict[str, CheckoutCapture] = field(default_factory=dict)
    problems: tuple[str, ...] = ()  # what the capture could not keep, in words
    artifacts_from: str = ""  # where the artifact hashes came from ('' when none are known)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "schema_version": SCHEMA_VERSION,
            "golden": self.golden,
            "snapshot_digest": self.snapshot_digest,
            "python": self.python.to_dict(),
            "distributions": {k: d.to_dict() for k, d in sorted(self.distributions.items())},
            "path_entries": [p.to_dict() for p in self.path_entries],
            "checkouts": {k: c.to_dict() for k, c in sorted(self.checkouts.items())},
            "problems": list(self.problems),
            "artifacts_from": self.artifacts_from,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    @classmethod
    def read(cls, t: Table) -> Capture:
        if t.data.get("schema") != SCHEMA:
            t.fail(f"not a megacpp-env golden capture (no schema {SCHEMA!r})", "schema")
        if t.data.get("schema_version") != SCHEMA_VERSION:
            t.fail(f"schema_version {t.data.get('schema_version')}, this megacpp-env reads {SCHEMA_VERSION}")
        t.only({"schema", "schema_version", *cls.__dataclass_fields__})
        dists, checkouts = t.table("distributions"), t.table("checkouts")
        return cls(
            golden=t.text("golden", ""), snapshot_digest=t.text("snapshot_digest", nonempty=True),
            python=PythonCapture.read(t.table("python")),
            distributions={k: DistCapture.read(k, dists.table(k)) for k in dists.data},
            path_entries=tuple(PathEntry.read(p) for p in t.tables("path_entries")),
            checkouts={k: CheckoutCapture.read(k, checkouts.table(k)) for k in checkouts.data},
            problems=t.texts("problems"), artifacts_from=t.text("artifacts_from", ""),
        )  # fmt: skip


def capture_path(snapshot_path: Path) -> Path:
    """``DIR/NAME.json`` -> ``DIR/NAME.capture.json``."""
    path = Path(snapshot_path)
    return path.with_name(path.name.removesuffix(".json") + SUFFIX)


def write_capture(capture: Capture, path: Path) -> bool:
    return atomic_write_text(path, capture.to_json())


def load_capture(path: Path) -> Capture:
    return read_document(path, Capture.read, CaptureFormatError, "capture document")
