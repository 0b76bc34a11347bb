"""``facts extract``: read one source's upstream facts from a checkout (or an sdist) into a
``SourceFacts`` record. Static only: nothing from the tree is executed or imported.

A git checkout at exactly the pin, clean, gives ``verified = true``; so does an sdist whose own
commit record (setuptools-scm's version file, ``facts/sdist.py``) names the pin as a clean release.
Anything else (a checkout at another commit, a plain directory, an sdist without such a record)
needs an explicit ``unverified`` reason and is recorded as such, so the facts never pass for the
pin's when they are not.
"""

from __future__ import annotations

import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from megacpp_env import git
from megacpp_env.errors import InputError, MegacppEnvError, RefusedError, VerificationError, one_line
from megacpp_env.facts import project as P
from megacpp_env.facts.distribution import Inputs, read_distribution
from megacpp_env.facts.model import Component, Distribution, ReadFrom, SourceFacts, Submodule, WheelMetadata
from megacpp_env.facts.registry import read_registry
from megacpp_env.facts.scan import artifact_manifests, components, scan_build
from megacpp_env.facts.sdist import find_record
from megacpp_env.fsutil import read_regular, read_regular_text, sha256_file
from megacpp_env.worktree import content


@dataclass(frozen=True, kw_only=True, slots=True)
class ExtractRequest:
    source: str
    commit: str  # the pin these facts stand for
    origin: Path  # a checkout directory or an sdist (.tar.gz)
    subdir: str = ""
    wheel: Path | None = None
    requirements_files: tuple[str, ...] = ()
    build_requirements_files: tuple[str, ...] = ()
    listed_requirements_files: tuple[str, ...] = ()  # shipped requirements install_requires may drop from
    unverified: str = ""  # the reason, when the origin is not a clean checkout at the pin
    command: str = ""
    unobtainable: tuple[str, ...] = ()  # the source's declared exceptions: a sparse checkout may omit these


def extract(req: ExtractRequest) -> SourceFacts:
    """The facts of one source. Whatever the tree, sdist or wheel holds (malformed TOML, a truncated
    archive, a file that is not UTF-8, a FIFO, a symlink out of the tree) is one InputError line."""
    try:
        return _extract(req)
    except MegacppEnvError:
        raise
    except (tarfile.TarError, zipfile.BadZipFile, EOFError, zlib.error) as exc:
        raise InputError(f"a broken archive: {_why(exc)}", file=str(req.wheel or req.origin)) from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError, UnicodeError) as exc:
        raise InputError(f"cannot read its facts: {_why(exc)}", file=str(req.origin)) from None


def _why(exc: BaseException) -> str:
    return one_line(f"{type(exc).__name__}: {exc}")[:300]


def _extract(req: ExtractRequest) -> SourceFacts:
    with _tree(req) as (root, read_from):
        project = root / req.subdir if req.subdir else root
        if not project.is_dir():
            raise VerificationError(f"{req.origin}: no directory {req.subdir!r} in the tree")
        pkg_info = _pkg_info(root) if read_from.kind == "sdist" else None
        verified = _verified(req, root, read_from, str(pkg_info["version"]) if pkg_info else "")
        inputs = Inputs(
            root=root,
            project=project,
            requirements_files=req.requirements_files,
            build_requirements_files=req.build_requirements_files,
            pkg_info=pkg_info,
        )
        dist = read_distribution(inputs, req.subdir)
        if req.listed_requirements_files:
            dist = _with_dropped(dist, inputs, req.listed_requirements_files)
        if req.wheel is not None:
            dist = replace(dist, wheel=_wheel(req.wheel, dist.name, dist.version))
        build = scan_build(project, root)
        subs = _submodules(root) if read_from.kind == "git" else ()
        registry = read_registry(project)
        return SourceFacts(
            source=req.source,
            commit=req.commit,
            verified=verified,
            reason="" if verified else req.unverified,
            read_from=read_from,
            command=req.command,
            distribution=dist,
            env=build.env,
            tools=build.tools,
            arch=build.arch,
            submodules=subs,
            fetches=build.fetches,
            components=tuple(_components(root, subs)),
            artifacts=tuple(artifact_manifests(_artifact_candidates(project), root)),
            models=registry.models if registry is not None else (),
            models_at=registry.at if registry is not None else "",
        )


@contextmanager
def _tree(req: ExtractRequest) -> Iterator[tuple[Path, ReadFrom]]:
    origin = req.origin
    if origin.exists() and not origin.is_file() and not origin.is_dir():
        raise InputError("neither a directory nor an sdist: not a regular file", file=str(origin))
    if origin.is_file() and tarfile.is_tarfile(origin):
        with tempfile.TemporaryDirectory(prefix="megacpp-facts-") as tmp:
            with tarfile.open(origin) as tar:
                tar.extractall(tmp, filter="data")
            tops = [p for p in Path(tmp).iterdir() if p.is_dir()]
            root = tops[0] if len(tops) == 1 else Path(tmp)
            record = find_record(root)
            yield (
                root,
                ReadFrom(
                    kind="sdist",
                    path=origin.name,
                    sha256=sha256_file(origin),
                    record=record.describe() if record is not None else "",
                ),
            )
        return
    if not origin.is_dir():
        raise VerificationError(f"{origin}: neither a directory nor an sdist (.tar.gz)")
    if git.is_git_checkout(origin):
        tree = content.read(origin)  # by content: no index flag or ignore file hides a change
        yield origin, ReadFrom(kind="git", head=tree.head or "", absent=_declared(req, tree.delta.deleted))
    else:
        yield origin, ReadFrom(kind="dir", path=origin.name)


def _declared(req: ExtractRequest, absent: tuple[str, ...]) -> tuple[str, ...]:
    """``absent`` when each path is one of the source's declared ``unobtainable`` paths (or inside
    one); a sparse checkout that leaves out anything else is not the pinned tree: refused."""

    def declared(path: str) -> bool:
        return any(path == d.rstrip("/") or path.startswith(d.rstrip("/") + "/") for d in req.unobtainable)

    undeclared = [p for p in absent if not declared(p)]
    if undeclared:
        shown = ", ".join(undeclared[:5]) + (f" and {len(undeclared) - 5} more" if len(undeclared) > 5 else "")
        raise RefusedError(
            f"{req.origin}: a sparse checkout leaves out {shown}, which sources.{req.source}.unobtainable does not "
            "declare: facts are read from the whole pinned tree (declare an object that cannot be had, with why)"
        )
    return absent


def _clean(root: Path, absent: tuple[str, ...]) -> bool:
    """The checkout's bytes are its HEAD's, but for the declared absent paths; every initialised
    submodule at its pinned commit, with its own HEAD's bytes."""
    tree = content.read(root)
    d = tree.delta
    subs = [s for s in tree.submodules if s.actual is not None]
    if d.modified or d.added or d.untracked or set(d.deleted) - set(absent) or not all(s.matches for s in subs):
        return False
    return not any(content.read(root / s.path).delta.dirty for s in subs)


def _verified(req: ExtractRequest, root: Path, read_from: ReadFrom, sdist_version: str) -> bool:
    if read_from.kind == "git" and read_from.head == req.commit and _clean(root, read_from.absent):
        if req.unverified:
            raise RefusedError(f"{root} is a clean checkout at the pin {req.commit[:12]}: drop --unverified")
        return True
    untied = _sdist_untied(req, root, read_from, sdist_version)
    if read_from.kind == "sdist" and not untied:
        if req.unverified:
            raise RefusedError(f"{req.origin}: its commit record ({read_from.record}) names the pin: drop --unverified")
        return True
    if req.unverified:
        return False
    if read_from.kind == "sdist":
        why = f"{req.origin} is not tied to the pin {req.commit[:12]}: {untied}"
    elif read_from.kind == "git" and read_from.head != req.commit:
        why = f"{root} is at {read_from.head[:12] or '(no commit)'}, the pin of {req.source} is {req.commit[:12]}"
    elif read_from.kind == "git":
        why = f"{root} has uncommitted changes (an applied overlay?): facts are upstream's, read them from a clean tree"
    else:
        why = f"{req.origin} is not a git checkout, so its commit cannot be verified"
    raise RefusedError(
        f"{why} (check out the pin with `megacpp-env checkout {req.source}`, or pass --unverified REASON)"
    )


def _sdist_untied(req: ExtractRequest, root: Path, read_from: ReadFrom, sdist_version: str) -> str:
    """Why an sdist is not tied to the pin ('' when its own commit record ties it)."""
    if read_from.kind != "sdist":
        return "not an sdist"
    record = find_record(root)
    if record is None:
        return "it holds no commit record (a setuptools-scm version file with version and commit_id)"
    return record.ties_to(req.commit, sdist_version)


def _with_dropped(dist: Distribution, inputs: Inputs, files: tuple[str, ...]) -> Distribution:
    """``dist`` with the requirements ``files`` list (``-r`` followed) that its requires lack, by name."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    def name(line: str) -> str:
        try:
            return canonicalize_name(Requirement(line).name)
        except InvalidRequirement:
            return ""

    have = {name(r) for r in dist.requires}
    listed: list[str] = []
    for f in files:
        listed += P.read_requirements_file(inputs.project / f, inputs.root)
    dropped = tuple(r for r in listed if name(r) and name(r) not in have)
    shown = ", ".join(P.rel(inputs.project / f, inputs.root) for f in files)
    why = f"{shown} (-r followed) list them; {dist.requires_from} lacks them"
    return replace(dist, dropped=dropped, dropped_from=why)


def _pkg_info(root: Path) -> dict[str, object] | None:
    path = root / "PKG-INFO"
    return P.parse_metadata(read_regular_text(path, limit=P.MAX_READ, root=root)) if path.is_file() else None


def _wheel(path: Path, name: str, version: str) -> WheelMetadata:
    from packaging.version import InvalidVersion

    if not path.is_file():
        raise InputError("not a regular file (expected a .whl)", file=str(path))
    if not zipfile.is_zipfile(path):
        raise InputError("not a wheel (not a zip archive)", file=str(path))
    try:
        return _wheel_metadata(path, name, version)
    except InvalidVersion as exc:
        raise InputError(f"not a wheel of {name}: {exc}", file=str(path)) from None


def _wheel_metadata(path: Path, name: str, version: str) -> WheelMetadata:
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        meta_name = next((n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
        if meta_name is None:
            raise VerificationError(f"{path}: no .dist-info/METADATA (not a wheel)")
        meta = P.parse_metadata(zf.read(meta_name).decode("utf-8"))
        top = meta_name.replace("/METADATA", "/top_level.txt")
        top_level = zf.read(top).decode().split() if top in names else []
    if (
        canonicalize_name(str(meta["name"])) != canonicalize_name(name)
        or Version(str(meta["version"])).public != Version(version).public
    ):
        raise VerificationError(
            f"{path} is {meta['name']} {meta['version']}, but the source at the pin builds {name} {version}"
        )
    digest = sha256_file(path)
    extras = {k: tuple(v) for k, v in sorted(dict(meta["extras"]).items())}
    return WheelMetadata(
        file=path.name,
        sha256=digest,
        name=str(meta["name"]),
        version=str(meta["version"]),
        requires=tuple(meta["requires"]),
        extras=extras,
        top_level=tuple(sorted(top_level)),
    )


def _submodules(root: Path) -> tuple[Submodule, ...]:
    if not (root / ".gitmodules").is_file():
        return ()
    urls = _gitmodules(root)
    links = git.gitlinks(root)
    out = []
    for path, commit in sorted(links.items()):
        sub = root / path
        populated = sub.is_dir() and any(sub.iterdir())
        out.append(Submodule(path=path, url=urls.get(path, ""), commit=commit, populated=populated))
    return tuple(out)


def _gitmodules(root: Path) -> dict[str, str]:
    """path -> url from .gitmodules (``git config -f``)."""
    proc = git.run_git(
        ["config", "-f", ".gitmodules", "--get-regexp", r"^submodule\..*\.(path|url)$"], root, check=False
    )
    by_name: dict[str, dict[str, str]] = {}
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(" ")
        name, _, field = key[len("submodule.") :].rpartition(".")
        by_name.setdefault(name, {})[field] = value
    return {v["path"]: v.get("url", "") for v in by_name.values() if "path" in v}


def _components(root: Path, subs: tuple[Submodule, ...]) -> list[Component]:
    out = list(components(root, ""))
    for sub in subs:
        if sub.populated:
            out += components(root / sub.path, f"{sub.path}/")
    return out


def _artifact_candidates(project: Path) -> Iterator[Path]:
    """Python files that may hold artifact pins (a cheap text filter before parsing)."""
    for path in sorted(project.rglob("*.py")):
        parts = set(path.relative_to(project).parts)
        if parts & {"tests", "3rdparty", "third_party", "build"}:
            continue
        try:
            if b"class CheckSumHash" in read_regular(path, limit=P.MAX_READ, root=project):
                yield path
        except (OSError, InputError):
            continue
