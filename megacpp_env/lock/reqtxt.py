"""pip-compile style requirements files with ``--hash`` lines: read them into the lock model, and
export a lock as one (``pip install --require-hashes --no-deps -r FILE`` installs it).

The export names every artifact hash of each package (wheels and sdist) and nothing else: no index
options, no direct URLs (the installer adds its own index or ``--no-index --find-links``).
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from megacpp_env.chars import dangerous_char, describe_char
from megacpp_env.lock.pylock import HASH_LENGTHS, Artifact, Directory, Lock, LockedPackage, LockFormatError, Vcs

_OPTION = re.compile(r"^\s*-{1,2}[a-z]")
_EDITABLE = re.compile(r"^(?:-e|--editable)(?:\s+|=)(?P<target>\S+)$")
_HASH = re.compile(r"--hash[=\s]+(?P<algo>[A-Za-z0-9_]+):(?P<hex>[0-9A-Za-z]+)")
_URL_LINE = re.compile(r"^[a-z][a-z0-9+.-]*://\S+$")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_HEX = re.compile(r"[0-9a-f]+")
_INLINE_COMMENT = re.compile(r"\s+#")


def _logical_lines(text: str) -> list[tuple[str, list[str]]]:
    """Join backslash continuations; return (requirement line, its comments). A comment on the line
    itself, or after its last continuation (``# via requests``: pip-compile before 5.0), counts as
    one of the comments that follow it (pip-compile 5+, uv)."""
    out: list[tuple[str, list[str]]] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if buf or (line and not line.lstrip().startswith("#")):
            buf += " " + line.rstrip("\\").strip()
            if line.endswith("\\"):
                continue
            out.append(_split_comment(buf.strip()))
            buf = ""
        elif line.lstrip().startswith("#") and out:
            out[-1][1].append(line.strip())
    if buf:
        out.append(_split_comment(buf.strip()))
    return out


def _split_comment(line: str) -> tuple[str, list[str]]:
    parts = _INLINE_COMMENT.split(line, maxsplit=1)  # '#' after a space: a URL's '#egg=' stays
    return parts[0].strip(), ([f"#{parts[1]}".rstrip()] if len(parts) > 1 else [])


def _vias(comments: list[str]) -> list[str]:
    """What the ``# via`` annotations name: ``-r requirements.in``, ``requests``, ``NAME (pyproject.toml)``;
    on one line (``# via a, b``) or one per line after a bare ``# via``."""
    out: list[str] = []
    in_via = False
    for c in comments:
        text = c.lstrip("#").strip()
        if text == "via" or text.startswith("via "):
            in_via = True
            out += [v.strip() for v in text.removeprefix("via").split(",") if v.strip()]
        elif in_via and c.startswith("#   ") and text:
            out.append(text)
    return out


def _is_direct(comments: list[str]) -> bool:
    """pip-compile/uv annotations: ``# via -r requirements.in`` or ``# via NAME (pyproject.toml)``."""
    inputs = ("pyproject.toml)", "setup.py)", "setup.cfg)")
    return any(v.startswith(("-r ", "-c ")) or v.endswith(inputs) for v in _vias(comments))


def _hashes(line: str, path: str) -> tuple[str, ...]:
    """Every ``--hash=ALG:HEX`` of a line: sha256 as bare hex, any other algorithm as ``alg:hex``
    (pip accepts sha384 and sha512 as well); an unknown algorithm or a wrong length is an error."""
    out = []
    for m in _HASH.finditer(line):
        algo, value = m["algo"].lower(), m["hex"].lower()
        if len(value) != HASH_LENGTHS.get(algo) or not _HEX.fullmatch(value):
            raise LockFormatError(f"{path}: not a {algo} hex digest in --hash={m['algo']}:{m['hex'][:80]}")
        out.append(value if algo == "sha256" else f"{algo}:{value}")
    return tuple(sorted(set(out)))


def _parse_line(line: str, comments: list[str], path: str) -> LockedPackage | None:
    hashes = _hashes(line, path)
    spec = _HASH.sub("", line).strip()
    editable = _EDITABLE.match(spec)
    if editable:
        return _url_package(editable["target"], line, path, editable=True)
    if _OPTION.match(spec) or not spec:
        return None  # --index-url, --extra-index-url, -c, -r: no package
    if _URL_LINE.match(spec):
        return _url_package(spec, line, path, hashes=hashes)
    try:
        req = Requirement(spec)
    except InvalidRequirement as exc:
        raise LockFormatError(f"{path}: cannot read requirement line {line!r}: {exc}") from None
    version, vcs = _version_and_vcs(req)
    return LockedPackage(
        name=canonicalize_name(req.name),
        version=version,
        marker=str(req.marker or ""),
        direct=_is_direct(comments),
        artifacts=_artifacts("" if vcs else req.url or "", hashes),
        vcs=vcs,
    )


def _artifacts(url: str, hashes: tuple[str, ...]) -> tuple[Artifact, ...]:
    """One artifact per hash (a requirements file does not say which file has which), at ``url``
    when the line names one (a direct URL: its file name carries the version)."""
    kind = "sdist" if url.endswith((".tar.gz", ".zip")) else "wheel"
    return tuple(
        Artifact(kind=kind, url=url, sha256=h)
        if ":" not in h
        else Artifact(kind=kind, url=url, sha256="", other_hashes=(h,))
        for h in hashes
    )


def _url_package(
    target: str, line: str, path: str, *, editable: bool = False, hashes: tuple[str, ...] = ()
) -> LockedPackage:
    """``-e git+https://host/repo@SHA#egg=NAME``, ``-e ./dir#egg=NAME`` or a bare URL with ``#egg=``:
    pip installs these too, so they are read (a VCS pin, a local tree), never dropped."""
    url, _, fragment = target.partition("#")
    name = next((v for k, _, v in (p.partition("=") for p in fragment.split("&")) if k == "egg"), "")
    if not name:
        raise LockFormatError(f"{path}: cannot tell the package of {line!r}: add #egg=NAME to the URL")
    name = canonicalize_name(name.split("[", 1)[0])
    if url.startswith("git+"):
        return LockedPackage(name=name, version="", vcs=_git_pin(url.removeprefix("git+")))
    if "://" not in url or url.startswith("file://"):
        local = Directory(path=url.removeprefix("file://"), editable=editable)
        return LockedPackage(name=name, version="", directory=local)
    return LockedPackage(name=name, version="", artifacts=_artifacts(url, hashes))


def _git_pin(url: str) -> Vcs:
    """``https://host/repo.git@REF``: a commit when REF is a full hex SHA, else only what was asked
    for (a branch or tag is no pin). An '@' before the path is userinfo, not a revision."""
    head, sep, ref = url.rpartition("@")
    if not sep or "/" not in head.split("://", 1)[-1]:
        head, ref = url, ""
    commit = ref if _COMMIT.fullmatch(ref) else ""
    return Vcs(type="git", url=head, commit=commit, requested_revision="" if commit else ref)


def _version_and_vcs(req: Requirement) -> tuple[str, Vcs | None]:
    if req.url:
        return "", _git_pin(req.url.removeprefix("git+")) if req.url.startswith("git+") else None
    pins = [s.version for s in req.specifier if s.operator in ("==", "===")]
    return (pins[0] if pins else str(req.specifier)), None


def read_requirements_text(text: str, *, path: str = "<requirements>") -> Lock:
    """A pip-compile (any version) or uv requirements file. Direct dependencies: those annotated
    ``# via -r FILE`` (pip-compile 5+, uv) and, in a file whose other entries carry ``# via``
    annotations, those with none (pip-compile before 5.0 left its top-level requirements bare)."""
    lines = _logical_lines(text)
    read = [(p, comments) for line, comments in lines if (p := _parse_line(line, comments, path))]
    annotated = any(_vias(c) for _, c in read)
    packages = [replace(p, direct=True) if annotated and not _vias(c) else p for p, c in read]
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
        lines += [f"    --hash={_spelled(h)}" + (" \\" if i < len(hashes) - 1 else "") for i, h in enumerate(hashes)]
    return "\n".join(lines) + "\n"


def _spelled(digest: str) -> str:
    """``--hash=`` value: ``sha256:<hex>`` for bare hex, ``alg:<hex>`` as it is for the others."""
    return digest if ":" in digest else f"sha256:{digest}"


def _valid_digest(digest: str) -> bool:
    algo, _, value = _spelled(digest).partition(":")
    return len(value) == HASH_LENGTHS.get(algo) and _HEX.fullmatch(value) is not None


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
    if not _CANONICAL.fullmatch(pkg.name) or not all(map(_valid_digest, pkg.hashes)):
        problem = "not a canonical name and hex digests"
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
        out[name] = {"" if _is_direct([f"# via {v}"]) else canonicalize_name(v) for v in _vias(comments)}
    return out
