"""A content-addressed object store beside the golden documents: ``<dir>/objects/sha256/<hex>``.

Objects are written atomically and read back verified: a truncated or edited object is an error
naming it, never silently applied to a checkout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from megacpp_env.errors import VerificationError
from megacpp_env.fsutil import atomic_write_bytes, sha256_bytes

OBJECTS_DIR = "objects"
_HEX = re.compile(r"[0-9a-f]{64}")


class ObjectError(VerificationError):
    """A captured object is missing or does not match its name."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ObjectStore:
    root: Path  # the ``objects`` directory

    @classmethod
    def beside(cls, document_dir: Path) -> ObjectStore:
        return cls(root=Path(document_dir) / OBJECTS_DIR)

    def path(self, digest: str) -> Path:
        if not _HEX.fullmatch(digest):
            raise ObjectError(f"{digest!r} is not a sha256 object name")
        return self.root / "sha256" / digest

    def put(self, data: bytes) -> str:
        """Store ``data``; returns its sha256 (hex). An object already stored is not rewritten."""
        digest = sha256_bytes(data)
        path = self.path(digest)
        if not (path.is_file() and path.stat().st_size == len(data)):
            atomic_write_bytes(path, data, mode=0o444)
        return digest

    def get(self, digest: str) -> bytes:
        path = self.path(digest)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ObjectError(
                f"captured object {path} is missing (copy the golden's objects/ directory with it)"
            ) from None
        if sha256_bytes(data) != digest:
            raise ObjectError(f"captured object {path} does not match its sha256 (edited or truncated)")
        return data
