"""``locks/ACKNOWLEDGED.toml``: reviewed acknowledgements of lock changes the gate would refuse.

    [[ack]]
    package = "torch"                 # canonical name (fnmatch patterns allowed: "nvidia-*")
    change = "upgraded"               # a change kind or "divergence"
    reason = "nightly 20261120 fixes sm_121a"   # required, non-empty
    target = "gb10"                   # optional: only this target (or divergence group)
    platform = "linux/arm64"          # optional
    version = "2.13.0.dev20261120+cu132"   # optional: only this new version

One typed reader (``load_acks``): errors name the file and the entry (``ack[2].change``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from megacpp_env import layout
from megacpp_env.errors import FormatError
from megacpp_env.lock.diff import KINDS
from megacpp_env.records import Record, Table, read_toml

ACK_FILE = "ACKNOWLEDGED.toml"
DIVERGENCE = "divergence"
CHANGES = (*KINDS, DIVERGENCE)
REQUIRED = ("package", "change", "reason")
KEYS = (*REQUIRED, "target", "platform", "version")


class AckFileError(FormatError):
    """The acknowledgement file is malformed."""


def ack_path(root: Path) -> Path:
    return layout.locks_dir(root) / ACK_FILE


@dataclass(frozen=True, kw_only=True, slots=True)
class Ack(Record):
    package: str  # canonical name, or an fnmatch pattern ("nvidia-*")
    change: str
    reason: str
    target: str = ""
    platform: str = ""
    version: str = ""

    def label(self) -> str:
        """``nvidia-ml-py added (target smoke, version 13.615.71)``: what it acknowledges, and where."""
        scope = [
            f"{k} {v}"
            for k, v in (("target", self.target), ("platform", self.platform), ("version", self.version))
            if v
        ]
        return f"{self.package} {self.change}" + (f" ({', '.join(scope)})" if scope else "")

    @classmethod
    def read(cls, t: Table) -> Ack:
        for key in REQUIRED:
            if not isinstance(t.data.get(key), str) or not t.data[key].strip():
                remedy = "every acknowledgement names the package, the change and a reason"
                t.fail(f"missing {key!r}", key, remedy=remedy)
        change = t.text("change")
        if change not in CHANGES:
            t.fail(f"unknown change {change!r} (one of: {', '.join(CHANGES)})", "change")
        t.only(KEYS)
        package = t.text("package")
        return cls(
            package=package if "*" in package else canonicalize_name(package),
            change=change,
            reason=t.text("reason").strip(),
            target=t.text("target", ""),
            platform=t.text("platform", ""),
            version=t.text("version", ""),
        )


def load_acks(path: Path, *, required: bool = False) -> list[Ack]:
    """Read the acknowledgement file; a missing file means no acknowledgements unless ``required``
    (a path the user named explicitly must exist)."""
    try:
        data = read_toml(path, AckFileError)
    except FileNotFoundError:
        if required:
            raise AckFileError("acknowledgement file does not exist", file=str(path), key="--ack") from None
        return []
    except OSError as exc:
        raise AckFileError(f"cannot read the acknowledgement file: {exc.strerror or exc}", file=str(path)) from None
    doc = Table.root(data, str(path), AckFileError)
    doc.only(("ack",))
    if "ack" in data and not isinstance(data["ack"], list):
        doc.fail("expected [[ack]] tables", "ack")
    return [Ack.read(entry) for entry in doc.tables("ack")]
