"""pip-compile style requirements files with ``--hash`` lines: read them into the lock model, and
export a lock as one (``pip install --require-hashes --no-deps -r FILE`` installs it).

The export names every artifact hash of each package (wheels and sdist) and nothing else: no index
options, no direct URLs (the installer adds its own index or ``--no-index --find-links``).
"""

from __future__ import annotations

import re
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from megacpp_env.chars import dangerous_char, describe_char
from megacpp_env.lock.pylock import Artifact, Lock, LockedPackage, LockFormatError, Vcs

_OPTION = re.compile(r"^\s*-{1,2}[a-z]")
_HASH = re.compile(r"--hash[=\s]+sha256:([0-9a-fA-F]{64})")


def _logical_lines(text: str) -> list[tuple[str, list[str]]]:
    """Join backslash continuations; return (requirement line, following comment lines)."""
    out: list[tuple[str, list[str]]] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if buf or (line and not line.lstrip().startswith("#")):
            buf += " " + line.rstrip("\\").strip()
            if line.endswith("\\"):
                continue
            out.append((buf.strip(), []))
            buf = ""
        elif line.lstrip().startswith("#") and out:
            out[-1][1].append(line.strip())
    if buf:
        out.append((buf.strip(), []))
    return out


def _is_direct(comments: list[str]) -> bool:
    """pip-compile/uv annotations: ``# via -r requirements.in`` or ``# via NAME (pyproject.toml)``."""
    vias = [c.lstrip("#").strip().removeprefix("via").strip() for c in comments]
    return any(v.startswith(("-r ", "-c ")) or v.endswith(("pyproject.toml)", "setup.py)")) for v in vias)


def _parse_line(line: str, comments: list[str], path: str) -> LockedPackage | None:
    if _OPTION.match(line) and not line.startswith("--hash"):
        return None  # --index-url, --extra-index-url, -c, -r: no package
    line = re.split(r"\s+#", line, maxsplit=1)[0]
    hashes = _HASH.findall(line)
    spec = _HASH.sub("", line).strip()
    if not spec:
        return None
    try:
        req = Requirement(spec)
    except InvalidRequirement as exc:
        raise LockFormatError(f"{path}: cannot read requirement line {line!r}: {exc}") from None
    version, vcs = _version_and_vcs(req)
    artifacts = tuple(Artifact(kind="wheel", url="", sha256=h) for h in sorted(set(hashes)))
    return LockedPackage(
        name=canonicalize_name(req.name),
        version=version,
        marker=str(req.marker or ""),
        direct=_is_direct(comments),
        artifacts=artifacts,
        vcs=vcs,
    )


def _version_and_vcs(req: Requirement) -> tuple[str, Vcs | None]:
    if req.url:
        url, _, commit = req.url.removeprefix("git+").rpartition("@")
        if req.url.startswith("git+") and commit:
            return "", Vcs(type="git", url=url, commit=commit)
        return "", None
    pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
    return (pins[0] if pins else str(req.specifier)), None


def read_requirements_text(text: str, *, path: str = "<requirements>") -> Lock:
    packages = [p for line, comments in _logical_lines(text) if (p := _parse_line(line, comments, path))]
    return Lock(
        packages=tuple(sorted(packages, key=lambda p: (p.name, p.marker))), created_by="requirements", path=path
    )


def read_requirements(path: Path) -> Lock:
    return read_requirements_text(Path(path).read_text(encoding="utf-8"), path=str(path))


def render_requirements(lock: Lock, *, header: str = "") -> str:
    """``name==version \\`` + ``--hash=sha256:...`` lines, sorted by name; VCS/hashless entries refused."""
    lines = [f"# {ln}" if ln else "#" for ln in _one_line_header(header).splitlines()]
    for pkg in sorted(lock.packages, key=lambda p: p.name):
        if pkg.vcs or not pkg.hashes:
            raise LockFormatError(f"{pkg.name}: cannot export to --require-hashes format (direct URL or no hashes)")
        _exportable(pkg)
        marker = f" ; {pkg.marker}" if pkg.marker else ""
        hashes = sorted(pkg.hashes)
        lines.append(f"{pkg.name}=={pkg.version}{marker} \\")
        lines += [f"    --hash=sha256:{h}" + (" \\" if i < len(hashes) - 1 else "") for i, h in enumerate(hashes)]
    return "\n".join(lines) + "\n"


_SHA256 = re.compile(r"[0-9a-f]{64}")
_CANONICAL = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def _exportable(pkg: LockedPackage) -> None:
    """The second barrier (the reader is the first): every piece of a line pip reads is checked for
    syntax with packaging, so no field can carry another option or requirement into the export."""
    from packaging.markers import InvalidMarker, Marker
    from packaging.version import InvalidVersion, Version

    problem = ""
    try:
        Version(pkg.version)
        if pkg.marker:
            Marker(pkg.marker)
    except (InvalidVersion, InvalidMarker) as exc:
        problem = str(exc).splitlines()[0]
    if not _CANONICAL.fullmatch(pkg.name) or any(not _SHA256.fullmatch(h) for h in pkg.hashes):
        problem = "not a canonical name and sha256 hex digests"
    if problem or any(c in f"{pkg.version}{pkg.marker}" for c in "\\\n\r#"):
        raise LockFormatError(f"{pkg.name!r}: refusing to export an unsafe entry ({problem or 'line break'})")


def _one_line_header(header: str) -> str:
    bad = dangerous_char(header.replace("\n", ""))
    if bad is not None:
        raise LockFormatError(f"refusing to export a header holding {describe_char(bad)}")
    return header


def read_via(text: str) -> dict[str, set[str]]:
    """``name -> {names it is required by}`` from uv/pip-compile ``# via`` annotations.
    The input file itself (``-r x.in``, ``NAME (pyproject.toml)``) is recorded as ``""``."""
    out: dict[str, set[str]] = {}
    for line, comments in _logical_lines(text):
        words = line.split()
        if not words or _OPTION.match(line):
            continue
        name = canonicalize_name(Requirement(words[0].rstrip("\\")).name)
        vias = [c.lstrip("#").strip().removeprefix("via").strip() for c in comments]
        out[name] = {"" if _is_direct([f"# via {v}"]) else canonicalize_name(v) for v in vias if v}
    return out
