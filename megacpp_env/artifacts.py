"""Pinned artifact sets (``artifacts:`` in stack.yaml): prebuilt files no package index serves, such as
FlashInfer's cubins. Each directory of a set has a ``checksums.txt`` (``<sha256> <relative path>`` per
line) whose own sha256 is pinned in the spec; ``mirror_artifacts`` fetches it, verifies it against the
pin, then fetches and verifies every file it lists into ``DEST/<directory>/<path>`` (the layout the
consumer's ``env`` variable expects, e.g. ``FLASHINFER_CUBIN_DIR``). Files already present with the
right hash are kept; every write is atomic. ``verify_artifacts`` checks a mirror offline.

Listing files from the pinned ``checksums.txt`` (never from an HTML directory listing, which FlashInfer's
own downloader scrapes and silently treats a failure of as "no files") makes the set exactly what the
pin says: a missing or altered file is an error, not a smaller package.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from megacpp_env import netio
from megacpp_env.errors import RefusedError, ToolError, VerificationError, unknown_name
from megacpp_env.fsutil import read_text_input, sha256_file, sweep_staging
from megacpp_env.records import Record
from megacpp_env.spec.model import ArtifactSet, Spec

CHECKSUMS = "checksums.txt"
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
CHUNK = 1 << 20
Opener = Callable[[str, Callable[[bytes], None]], None]  # (url, sink): streams the body into sink
DEADLINE_S = 1800.0  # one file, start to end (MEGACPP_NET_DEADLINE overrides)


@dataclass(frozen=True, kw_only=True, slots=True)
class MirrorResult(Record):
    name: str
    dest: str
    files: int
    fetched: int
    kept: int
    bytes: int


def parse_checksums(text: str, where: str) -> list[tuple[str, str]]:
    """(sha256, relative path) per line; a bad line or a path leaving the directory is refused."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not SHA256_RE.match(parts[0]):
            raise VerificationError(f"{where}:{n}: expected '<sha256> <path>', got {line.strip()[:80]!r}")
        path = PurePosixPath(parts[1])
        if path.is_absolute() or ".." in path.parts or str(path) in ("", "."):
            raise VerificationError(f"{where}:{n}: path {parts[1]!r} leaves its directory")
        out.append((parts[0], path.as_posix()))
    return out


def _open(url: str, sink: Callable[[bytes], None]) -> None:
    """Stream ``url`` into ``sink`` (http(s) only, a total deadline: ``netio``); 4xx/5xx are errors."""
    try:
        resp = netio.fetch(netio.Request(url=url, limit=0, deadline=netio.deadline_s(DEADLINE_S)), sink=sink)
    except netio.NetError as exc:
        raise ToolError(f"cannot fetch {netio.printable(url)}: {exc.detail}") from None
    if resp.status != 200:
        raise ToolError(f"cannot fetch {netio.printable(url)}: HTTP {resp.status}")


def _download(url: str, target: Path, sha256: str, opener: Opener) -> int:
    """Stream ``url`` into ``target`` (atomically), refusing it unless its sha256 is ``sha256``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    sizes: list[int] = []
    sweep_staging(target.parent, f".{target.name}.", suffix=".part")  # what killed downloads left
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    fcntl.flock(fd, fcntl.LOCK_EX)  # held while this process lives: the next sweep keeps it
    try:
        with os.fdopen(fd, "wb") as out:

            def sink(chunk: bytes) -> None:
                digest.update(chunk)
                out.write(chunk)
                sizes.append(len(chunk))

            opener(url, sink)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != sha256:
            raise VerificationError(f"{url}: sha256 {digest.hexdigest()}, the pin says {sha256}")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return sum(sizes)


def _entries(artifact: ArtifactSet, dest: Path, base: str) -> Iterator[tuple[str, str, Path, str]]:
    """(url, sha256, local path, directory) for every checksums.txt, then every file it lists."""
    for directory, pinned in artifact.dirs.items():
        local = dest / directory / CHECKSUMS
        yield f"{base}{directory}{CHECKSUMS}", pinned, local, directory
        text = read_text_input(local)
        for sha, rel in parse_checksums(text, f"{artifact.name}:{directory}{CHECKSUMS}"):
            yield f"{base}{directory}{rel}", sha, dest / directory / rel, directory


def mirror_artifacts(artifact: ArtifactSet, dest: Path, *, url: str = "", opener: Opener = _open) -> MirrorResult:
    """Fetch and verify the whole set into ``dest`` (``url`` replaces the set's URL: a mirror of it)."""
    base = (url or artifact.url).rstrip("/") + "/"
    fetched = kept = total = files = 0
    # _entries reads each checksums.txt only after the loop below has fetched and verified it
    for link, sha, local, _directory in _entries(artifact, Path(dest), base):
        files += 1
        plain_below(Path(dest), local)
        if local.is_file() and sha256_file(local) == sha:
            kept += 1
            total += local.stat().st_size
            continue
        total += _download(link, local, sha, opener)
        fetched += 1
    return MirrorResult(name=artifact.name, dest=str(dest), files=files, fetched=fetched, kept=kept, bytes=total)


def plain_below(root: Path, path: Path) -> None:
    """Refuse (RefusedError) unless every directory between ``root`` and ``path`` is a plain directory
    (or absent) and ``path`` is a regular file (or absent): a symlink planted inside the mirror would
    send a write, or a "kept" verdict, outside it. ``mirror`` refuses the same way."""
    rel = path.relative_to(root)
    current = root
    for n, part in enumerate(rel.parts):
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return
        last = n == len(rel.parts) - 1
        if not (stat.S_ISREG(mode) if last else stat.S_ISDIR(mode)):
            kind = "a regular file" if last else "a plain directory"
            raise RefusedError(
                f"mirror-artifacts: {current} is not {kind} (a symlink?); refusing to write through it "
                f"(remedy: remove it, or mirror into a fresh directory)"
            )


def verify_artifacts(artifact: ArtifactSet, dest: Path) -> list[str]:
    """Offline: every pinned checksums.txt and every file it lists is present with its sha256."""
    problems: list[str] = []
    for directory, pinned in artifact.dirs.items():
        listing = Path(dest) / directory / CHECKSUMS
        plain_below(Path(dest), listing)
        if not listing.is_file() or sha256_file(listing) != pinned:
            problems.append(f"{directory}{CHECKSUMS}: {'missing' if not listing.is_file() else 'not the pinned file'}")
            continue
        for sha, rel in parse_checksums(read_text_input(listing), f"{directory}{CHECKSUMS}"):
            path = Path(dest) / directory / rel
            plain_below(Path(dest), path)
            if not path.is_file():
                problems.append(f"{directory}{rel}: missing")
            elif sha256_file(path) != sha:
                problems.append(f"{directory}{rel}: sha256 differs from {CHECKSUMS}")
    return problems


@dataclass(frozen=True, kw_only=True, slots=True)
class MirrorCheck:
    artifact: ArtifactSet
    mirrored: MirrorResult | None  # None with verify_only
    problems: list[str]


def mirror_and_verify(spec: Spec, name: str, dest: Path, *, url: str = "", verify_only: bool = False) -> MirrorCheck:
    """``mirror-artifacts NAME --to DEST``: fetch the named set (unless ``verify_only``), then check
    every pinned file offline."""
    artifact = spec.artifacts.get(name)
    if artifact is None:
        raise unknown_name("artifact set", name, list(spec.artifacts), file=str(spec.path))
    mirrored = None if verify_only else mirror_artifacts(artifact, dest, url=url)
    return MirrorCheck(artifact=artifact, mirrored=mirrored, problems=verify_artifacts(artifact, dest))
