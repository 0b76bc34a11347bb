"""The source mirror: every pinned source of a target as local bare git repositories.

Layout (``DIR`` is what ``mirror-sources --to`` names)::

    DIR/index.json                         {"schema_version": 1, "sources": {name: {"path", "repo", "commit"}}}
    DIR/sources/<name>/index.json          {"schema_version": 1, "source": name, "repos": {url: {"path", "commits"}}}
    DIR/sources/<name>/git/<key>.git       one bare repository per URL, key = sha256(url)[:16]-<basename>

A source's directory holds its own repository, every submodule's (recursively, each at the commit
its superproject pins) and those of its declared build-time fetches, each keyed by its URL. It is
per source so that an image's source stage bind-mounts only its own repositories: mirroring another
source, or bumping another pin, changes nothing that stage reads.

Each pinned commit is kept by a ref ``refs/megacpp/pins/<sha>`` and ``uploadpack.allowAnySHA1InWant``
lets a checkout fetch it by SHA. Checkouts and source builds read the mirror through git's
``url.<mirror repo>.insteadOf=<pinned url>`` given with ``-c`` (``insteadof_config``), never
written to a config file, so the pinned URL in stack.yaml and the checkout's recorded origin stay
as they are. A source directory is made in a temporary sibling and swapped into place, and left
untouched when a re-run verifies it (``verify_source``: ``git fsck --full`` from every pinned
commit, so pack checksums, object hashes and connectivity, plus each pin's ref); its bytes are
part of a build's cache key. A repository that fails is fetched again, a missing pin ref restored.
Every URL (pinned, or from a ``.gitmodules``) passes ``git.check_url`` before git sees it, and a
local one only where the superproject is local. Never prints.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from megacpp_env import git
from megacpp_env.errors import FormatError, RefusedError, ToolError
from megacpp_env.fsutil import atomic_write_text, staging_dir, sweep_staging
from megacpp_env.records import Record, Table, read_json
from megacpp_env.redact import strip_url_credentials

SCHEMA = 1
INDEX = "index.json"
PIN_REF = "refs/megacpp/pins/"
_REPO_PATH = re.compile(r"^git/[A-Za-z0-9._-]+\.git$")
_MIRROR_CONFIG = {"uploadpack.allowAnySHA1InWant": "true", "uploadpack.allowFilter": "true", "gc.auto": "0"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Pin:
    """One repository at one commit; ``submodules``: mirror its submodules (recursively) too.
    ``unobtainable``: the source's declared exceptions under this repository (paths relative to it): a
    submodule among them is mirrored when its pin can be had (a machine that reaches it) and left out,
    not failing the mirror, when it cannot; a checkout then takes it or leaves it out the same way."""

    url: str
    commit: str
    submodules: bool = False
    unobtainable: tuple[str, ...] = ()
    optional: bool = False  # this pin is one of its superproject's declared exceptions


@dataclass(frozen=True, kw_only=True, slots=True)
class MirrorRequest:
    """One source: its own pin first, then its fetches' pins."""

    source: str
    pins: tuple[Pin, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class MirroredSource(Record):
    source: str
    path: str
    action: str  # "created" | "updated" | "unchanged"
    repos: dict[str, list[str]] = field(default_factory=dict)  # url -> pinned commits


# ---- reading -------------------------------------------------------------------------------------


def repo_key(url: str) -> str:
    """``<sha256(url)[:16]>-<basename>``: unique per URL, readable, safe as a file name."""
    base = PurePosixPath(url.rstrip("/").rpartition(":")[2]).name.removesuffix(".git") or "repo"
    return f"{hashlib.sha256(url.encode()).hexdigest()[:16]}-{re.sub(r'[^A-Za-z0-9._-]', '_', base)[:40]}"


def source_dir(root: Path, source: str) -> Path:
    return Path(root) / "sources" / source


class MirrorFormatError(FormatError):
    """A source mirror's index is malformed (make the mirror again)."""


def read_source_index(root: Path, source: str) -> dict[str, dict[str, Any]]:
    """url -> {"path", "commits"} of one source's mirror; a MirrorFormatError names the file and key."""
    path = source_dir(root, source) / INDEX
    try:
        t = read_json(path, MirrorFormatError)
    except (FileNotFoundError, NotADirectoryError):
        raise RefusedError(
            f"no mirror of source {source} in {root} (make it: `megacpp-env mirror-sources TARGET --to {root}`)"
        ) from None
    out = {}
    for url, entry in _index_entries(t, "repos"):
        rel = entry.text("path", nonempty=True)
        if not _REPO_PATH.match(rel):
            entry.fail(f"expected git/<key>.git inside the source's directory, got {rel!r}", "path")
        out[url] = {"path": rel, "commits": list(entry.texts("commits"))}
    return out


def _index_entries(t: Table, key: str, remedy: str = "") -> list[tuple[str, Table]]:
    """The entries of a mirror index's ``key`` table (name, table), once its schema is this tool's."""
    if t.number("schema_version") != SCHEMA:
        t.fail(f"not a schema {SCHEMA} source mirror index" + (f" ({remedy})" if remedy else ""), "schema_version")
    table = t.table(key)
    return [(str(name), table.table(str(name))) for name in table.data]


def insteadof_config(root: Path, source: str) -> dict[str, str]:
    """``-c`` settings that make git fetch every URL of ``source``'s mirror from the mirror, and no
    URL from anywhere else: every network transport is off (``git.OFFLINE_CONFIG``), so a URL the
    mirror lacks (a submodule of a submodule) fails instead of reaching the network."""
    base = source_dir(root, source).resolve()
    cfg = dict(git.OFFLINE_CONFIG)
    for url, entry in sorted(read_source_index(root, source).items()):
        cfg[f"url.{(base / str(entry['path'])).as_uri()}.insteadOf"] = url
    return cfg


# Longest insteadOf prefix wins: this empty one catches every URL the mirror has no repository for.
_LACKS = "url./megacpp-source-mirror-lacks-this-url/.insteadOf"


def mirror_only_config(root: Path, source: str) -> dict[str, str]:
    """``insteadof_config`` plus a rewrite of every other URL to a path that does not exist: a
    checkout from the mirror reads nothing else, not even a local repository (a submodule the mirror
    lacks fails, naming ``/megacpp-source-mirror-lacks-this-url/<its url>``)."""
    return {**insteadof_config(root, source), _LACKS: ""}


def require_pins(root: Path, source: str, pins: Iterable[tuple[str, str]], *, remedy: str) -> None:
    """RefusedError naming every pin the source's mirror lacks (nothing falls back to the network)."""
    missing = missing_pins(root, source, pins)
    if missing:
        raise RefusedError(f"source mirror {root} lacks {', '.join(missing)} (run `{remedy}`)")


def missing_pins(root: Path, source: str, pins: Iterable[tuple[str, str]]) -> list[str]:
    """The (url, commit) pins the source's mirror lacks, as readable lines (empty: all present)."""
    repos = read_source_index(root, source)
    out = []
    for url, commit in pins:
        entry = repos.get(url)
        repo = source_dir(root, source) / str(entry["path"]) if entry else None
        if repo is None or not git.has_commit(repo, commit):
            out.append(f"{strip_url_credentials(url)} @ {commit}")
    return out


# ---- writing -------------------------------------------------------------------------------------


def mirror_sources(
    root: Path,
    requests: Sequence[MirrorRequest],
    *,
    rewrites: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[MirroredSource]:
    """Make or update ``root``'s directory of each requested source; idempotent and atomic per source.

    ``rewrites``: ``-c`` settings applied to the upstream fetches (``url.<local>.insteadOf=<url>``: a
    bundle, another mirror), so a machine without access to the pinned URLs can still mirror them."""
    root = _usable_root(Path(root))
    _read_top_index(root)  # a corrupt one is refused before anything is fetched
    report = [_mirror_one(root, req, dict(rewrites or {}), progress or (lambda _line: None)) for req in requests]
    _write_top_index(root, requests)
    return report


def _mirror_one(root: Path, req: MirrorRequest, rewrites: dict[str, str], say: Callable[[str], None]) -> MirroredSource:
    final = source_dir(root, req.source)
    found = verify_source(root, req) if final.is_dir() else Verdict(problems=("not mirrored yet",))
    if not found.problems:
        say(f"{req.source}: every pin present and verified in {final}")
        return MirroredSource(source=req.source, path=str(final), action="unchanged", repos=_index_commits(final))
    if final.is_dir():
        say(f"{req.source}: repairing {final}: {'; '.join(found.problems)}")
    final.parent.mkdir(parents=True, exist_ok=True)
    sweep_staging(final.parent, f".{req.source}.old-")  # a swap a killed run left half-done
    with staging_dir(final.parent, f".{req.source}.partial-") as work:
        refetch: list[Pin] = []
        if final.is_dir() and not found.unusable:
            skip = {PurePosixPath(rel).name for rel in found.corrupt_paths}
            shutil.copytree(final, work, dirs_exist_ok=True, copy_function=os.link,  # objects are immutable
                            ignore=lambda _d, names: [n for n in names if n in skip])  # fmt: skip
            refetch = [Pin(url=url, commit=c) for url, commits in found.corrupt.items() for c in commits]
        repos = _fill(work, [*req.pins, *refetch], rewrites, say)
        _write_index(work, req.source, repos)
        action = "updated" if final.is_dir() else "created"
        _swap(work, final)
    return MirroredSource(source=req.source, path=str(final), action=action, repos=repos)


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    """What a re-run found wrong with a source's mirror (no problems: it serves every pin as is)."""

    problems: tuple[str, ...] = ()
    corrupt: dict[str, list[str]] = field(default_factory=dict)  # url -> commits of a repository to refetch
    corrupt_paths: frozenset[str] = frozenset()  # those repositories (git/<key>.git): not copied
    unusable: bool = False  # the index cannot be read: start over


def verify_source(root: Path, req: MirrorRequest) -> Verdict:
    """Check what a checkout will read from ``req.source``'s mirror: every repository's objects
    (``git fsck --full``: pack checksums, every object's hash, everything reachable from each pin
    present), a ``refs/megacpp/pins/<sha>`` ref per pinned commit, and every requested pin
    (submodules recursively) present."""
    try:
        index = read_source_index(root, req.source)
    except (RefusedError, FormatError) as exc:
        return Verdict(problems=(str(exc),), unusable=True)
    problems: list[str] = []
    corrupt: dict[str, list[str]] = {}
    paths: set[str] = set()
    for url, entry in sorted(index.items()):
        repo = source_dir(root, req.source) / str(entry["path"])
        bad = _repo_problems(repo, [str(c) for c in entry["commits"]])
        if bad.get("corrupt"):
            corrupt[url] = [str(c) for c in entry["commits"]]
            paths.add(str(entry["path"]))
        problems += [f"{strip_url_credentials(url)}: {line}" for lines in bad.values() for line in lines]
    if not problems and not _complete(root, req):
        problems.append("a requested pin is missing")
    return Verdict(problems=tuple(problems), corrupt=corrupt, corrupt_paths=frozenset(paths))


def _repo_problems(repo: Path, commits: list[str]) -> dict[str, list[str]]:
    """{"corrupt": [...], "refs": [...]}: objects that fail ``git fsck``, pin refs missing or moved."""
    if not all(git.SHA_RE.fullmatch(c) for c in commits):
        return {"corrupt": ["the index lists a commit that is not a 40-hex SHA"]}
    argv = ["fsck", "--full", "--no-dangling", "--no-progress", "--no-reflogs", *commits]
    proc = git.run_git(argv, repo, check=False)
    if proc.returncode != 0:
        lines = proc.stderr.decode("utf-8", "replace").strip().splitlines() or [f"git fsck exit {proc.returncode}"]
        return {"corrupt": [f"git fsck: {strip_url_credentials(lines[0])}"]}
    out = git.run_git(["for-each-ref", "--format=%(objectname) %(refname)", PIN_REF], repo, check=False)
    refs = {
        ref.removeprefix(PIN_REF): oid
        for oid, _, ref in (line.partition(" ") for line in out.stdout.decode().splitlines())
    }
    return {"refs": [f"ref {PIN_REF}{c} is missing or moved" for c in commits if refs.get(c) != c]}


def _complete(root: Path, req: MirrorRequest) -> bool:
    try:
        pins = [(p.url, p.commit) for p in req.pins]
        if missing_pins(root, req.source, pins):
            return False
        return all(not p.submodules or not _missing_submodules(root, req.source, p) for p in req.pins)
    except (RefusedError, FormatError, ToolError):
        return False


def _missing_submodules(root: Path, source: str, pin: Pin) -> bool:
    repos = read_source_index(root, source)
    repo = source_dir(root, source) / str(repos[pin.url]["path"])
    subs = _submodule_pins(repo, pin)
    have = [s for s in subs if not s.optional or not missing_pins(root, source, [(s.url, s.commit)])]
    return bool(missing_pins(root, source, [(s.url, s.commit) for s in have])) or any(
        _missing_submodules(root, source, s) for s in have
    )


def _fill(
    work: Path, pins: Sequence[Pin], rewrites: dict[str, str], say: Callable[[str], None]
) -> dict[str, list[str]]:
    """Fetch every pin (and its submodules, recursively) into ``work``; url -> sorted commits. A declared
    exception that cannot be fetched is left out (said), never stood in for."""
    repos = _index_commits(work)
    queue = list(pins)
    while queue:
        pin = queue.pop(0)
        repo = work / "git" / f"{repo_key(pin.url)}.git"
        try:
            _fetch_pin(repo, pin, rewrites, say)
        except ToolError as exc:
            if not pin.optional:
                raise
            say(f"left out (declared unobtainable): {strip_url_credentials(pin.url)} @ {pin.commit}: {exc}")
            continue
        repos[pin.url] = sorted({*repos.get(pin.url, []), pin.commit})
        if pin.submodules:
            queue.extend(_submodule_pins(repo, pin))
    return dict(sorted(repos.items()))


def _fetch_pin(repo: Path, pin: Pin, rewrites: dict[str, str], say: Callable[[str], None]) -> None:
    if not (repo / "HEAD").is_file():
        repo.parent.mkdir(parents=True, exist_ok=True)
        git.run_git(["init", "--quiet", "--bare", "--template=", "--", str(repo)])
        for key, value in _MIRROR_CONFIG.items():
            git.run_git(["config", key, value], repo)
    if not git.has_commit(repo, pin.commit):
        say(f"fetching {strip_url_credentials(pin.url)} @ {pin.commit}")
        _fetch(repo, pin, rewrites)
    git.run_git(["update-ref", f"{PIN_REF}{pin.commit}", pin.commit], repo)


def _fetch(repo: Path, pin: Pin, rewrites: dict[str, str]) -> None:
    """By SHA first (with its history); else every branch and tag (a bundle or a server that refuses
    fetching by SHA), keeping only what the pin needs referenced."""
    git.check_url(pin.url)
    git.check_sha(pin.commit)
    cfg = {"protocol.file.allow": "always", **rewrites}
    by_sha = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", pin.url, pin.commit]
    if git.run_git(by_sha, repo, check=False, config=cfg).returncode == 0 and git.has_commit(repo, pin.commit):
        return
    every = ["+refs/heads/*:refs/megacpp/upstream/heads/*", "+refs/tags/*:refs/megacpp/upstream/tags/*"]
    git.run_git(["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", pin.url, *every], repo, config=cfg)
    if not git.has_commit(repo, pin.commit):
        raise ToolError(
            f"commit {pin.commit} is not reachable from any branch or tag of {strip_url_credentials(pin.url)}"
        )
    for ref in git.git_text(["for-each-ref", "--format=%(refname)", "refs/megacpp/upstream/"], repo).splitlines():
        git.run_git(["update-ref", "-d", ref], repo)


def _submodule_pins(repo: Path, pin: Pin) -> list[Pin]:
    """Every submodule of ``pin.commit``: its URL (resolved against ``pin.url``) at its gitlinked commit; one
    of ``pin.unobtainable`` is optional, and each carries the declared paths under it."""
    links = git.gitlinks(repo, pin.commit)
    if not links:
        return []
    urls = git.gitmodules_urls(repo, pin.commit)
    out = []
    where = f"{strip_url_credentials(pin.url)} @ {pin.commit}: .gitmodules"
    for path, commit in sorted(links.items()):
        if path not in urls:
            raise ToolError(f"{where}: submodule {path} has no URL")
        git.check_url(urls[path], what=f"{where}: submodule {path}: url")
        url = resolve_submodule_url(pin.url, urls[path])
        git.check_url(url, what=f"{where}: submodule {path}: url", allow_local=git.is_local_url(pin.url))
        inner = tuple(d.removeprefix(f"{path}/") for d in pin.unobtainable if d.startswith(f"{path}/"))
        out.append(Pin(url=url, commit=commit, submodules=True, unobtainable=inner,
                       optional=path in pin.unobtainable))  # fmt: skip
    return out


def resolve_submodule_url(base: str, url: str) -> str:
    """git's rule for a relative submodule URL (``./x``, ``../x``): relative to the superproject's URL."""
    if not url.startswith(("./", "../")):
        return url
    out = base.rstrip("/")
    for part in url.split("/"):
        if part == "..":
            out = re.sub(r"[/:][^/:]*$", "", out) if re.search(r"[/:][^/:]*$", out) else out
        elif part not in (".", ""):
            out = f"{out}/{part}"
    return out


def _index_commits(directory: Path) -> dict[str, list[str]]:
    path = directory / INDEX
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {url: list(entry.get("commits", [])) for url, entry in data.get("repos", {}).items()}


def _write_index(directory: Path, source: str, repos: dict[str, list[str]]) -> None:
    doc = {
        "schema_version": SCHEMA,
        "source": source,
        "repos": {
            url: {"path": f"git/{repo_key(url)}.git", "commits": commits} for url, commits in sorted(repos.items())
        },
    }
    atomic_write_text(directory / INDEX, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _usable_root(root: Path) -> Path:
    """``root`` made (parents too) as a directory; a one-line RefusedError when it cannot be one."""
    try:
        for part in (root / "sources", root):
            if part.is_symlink() or (part.exists() and not part.is_dir()):
                raise RefusedError(f"--to {root}: {part} is not a directory (pass a directory for the mirror)")
        (root / "sources").mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=root / "sources", prefix=".probe-")  # noqa: SIM115
        probe.close()
    except OSError as exc:
        raise RefusedError(
            f"--to {root}: cannot make the mirror there: {exc.strerror or exc} (pass a writable directory)"
        ) from None
    return root


def _read_top_index(root: Path) -> dict[str, dict[str, str]]:
    """``root/index.json``'s sources (empty when there is none); MirrorFormatError when malformed."""
    path = root / INDEX
    try:
        t = read_json(path, MirrorFormatError)
    except FileNotFoundError:
        return {}
    entries = _index_entries(t, "sources", f"move {path} away and run mirror-sources again")
    return {name: {k: entry.text(k, nonempty=True) for k in ("path", "repo", "commit")} for name, entry in entries}


def _write_top_index(root: Path, requests: Sequence[MirrorRequest]) -> None:
    old = _read_top_index(root)
    for req in requests:
        old[req.source] = {"path": f"sources/{req.source}", "repo": req.pins[0].url, "commit": req.pins[0].commit}
    doc = {"schema_version": SCHEMA, "sources": dict(sorted(old.items()))}
    atomic_write_text(root / INDEX, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _swap(work: Path, final: Path) -> None:
    """Put ``work`` at ``final``: a rename, with the old directory moved aside first and then removed."""
    work.chmod(0o755)
    if not final.exists():
        os.replace(work, final)
        return
    trash = final.with_name(f".{final.name}.old-{os.getpid()}")
    os.replace(final, trash)
    os.replace(work, final)
    shutil.rmtree(trash, ignore_errors=True)


def parse_rewrite(text: str) -> tuple[str, str]:
    """``URL=LOCAL`` (a bundle, a bare repository or a directory) -> the insteadOf ``-c`` pair."""
    url, sep, local = text.partition("=")
    if not sep or not url or not local:
        raise RefusedError(f"--from {text!r}: expected URL=PATH (a git bundle or repository for that pinned URL)")
    path = Path(local).expanduser().resolve()
    if not path.exists():
        raise RefusedError(f"--from {text!r}: {path} does not exist")
    return f"url.{path}.insteadOf", url
