"""Pinned source checkouts: make one (fetch by SHA, submodules at their pinned commits, provenance
record) and verify one against its pin. What a checkout is (``worktree.status.checkout_state``) and
its provenance record (``worktree.provenance``) live in ``megacpp_env.worktree``, which ``snapshot``
shares.

A checkout is created in a temporary sibling directory and renamed into place, so an interrupted
``checkout`` never leaves a half-made tree at the destination. Never prints, never exits.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from megacpp_env import git, layout
from megacpp_env.errors import RefusedError, SpecError, VerificationError
from megacpp_env.fsutil import file_kind, staging_dir
from megacpp_env.redact import strip_url_credentials
from megacpp_env.worktree.provenance import Provenance, read_provenance, write_provenance
from megacpp_env.worktree.status import CheckoutState, checkout_state

if TYPE_CHECKING:
    from megacpp_env.spec.model import Source, Spec


class PinnedSource(Protocol):
    """What a checkout needs to know of a source: a spec ``Source`` or a source build plan."""

    @property
    def name(self) -> str: ...
    @property
    def repo(self) -> str: ...
    @property
    def commit(self) -> str: ...
    @property
    def ref(self) -> str: ...
    @property
    def submodules(self) -> bool: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckoutResult:
    action: str  # "created" | "unchanged"
    state: CheckoutState

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, **self.state.to_dict()}


@dataclass(frozen=True, kw_only=True, slots=True)
class Verification:
    state: CheckoutState
    problems: tuple[str, ...]
    exceptions: tuple[str, ...] = ()  # declared unobtainable paths left out, with why (reported, not problems)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "problems": list(self.problems), "exceptions": list(self.exceptions),
                **self.state.to_dict()}  # fmt: skip


def unobtainable_of(source: object) -> dict[str, str]:
    """A source's (or plan's) declared exceptions to verification: checkout path -> why (none for a fetch)."""
    value = getattr(source, "unobtainable", None)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def covered(path: str, declared: Iterable[str]) -> bool:
    """``path`` is a declared path or inside one (a declared directory covers what it holds): the rule
    ``facts extract`` applies to a sparse checkout too."""
    return any(path == d.rstrip("/") or path.startswith(d.rstrip("/") + "/") for d in declared)


def declared_exceptions(
    state: CheckoutState, unobtainable: Mapping[str, str]
) -> tuple[frozenset[str], tuple[str, ...]]:
    """(paths excused, report lines). A declared path (a file, a directory or a submodule, and what is
    inside it) is excused only while it is absent: a submodule left uninitialised (and empty: see
    ``stand_ins``), a file missing from the work tree. Present bytes are judged as usual, so a stand-in
    is a local change, never an exception."""
    root = Path(state.path)
    excused: set[str] = set()
    lines: list[str] = []
    for rel, why in sorted(unobtainable.items()):
        subs = [s for s in state.submodules if s.actual is None and covered(s.path, [rel])]
        files = sorted(p for p in state.content_changed if covered(p, [rel]) and _absent(root / p))
        for sub in subs:
            excused.add(sub.path)
            lines.append(f"{sub.path}: submodule pinned at {sub.expected} left out (declared unobtainable: {why})")
        if files:
            excused.update(files)
            what = "file left out" if files == [rel.rstrip("/")] else f"{len(files)} file(s) left out"
            lines.append(f"{rel}: {what} (declared unobtainable: {why})")
        elif not subs and not any(s.path == rel for s in state.submodules) and _absent(root / rel):
            excused.add(rel)
            lines.append(f"{rel}: file left out (declared unobtainable: {why})")
    return frozenset(excused), tuple(lines)


def _absent(path: Path) -> bool:
    return not path.exists() and not path.is_symlink()


def stand_ins(state: CheckoutState) -> list[str]:
    """Problems of submodules that are not initialised (``actual`` None) but whose directory is not as
    git leaves one: empty. Whatever is there (files, a ``.git`` git cannot use, a file or link in place
    of the directory) stands in for the pinned submodule, declared or not, required or not."""
    root, out = Path(state.path), []
    for sub in state.submodules:
        if sub.actual is not None:
            continue
        where = root / sub.path
        try:
            st = os.lstat(where)
        except (FileNotFoundError, NotADirectoryError):
            continue
        if not stat.S_ISDIR(st.st_mode):
            out.append(f"submodule {sub.path} is not initialised and {file_kind(st.st_mode)} stands in its place")
            continue
        with os.scandir(where) as entries:
            names = sorted(e.name for _, e in zip(range(6), entries, strict=False))
        if names:
            shown = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
            out.append(
                f"submodule {sub.path} is not initialised but its directory holds {shown}: a stand-in for the "
                f"pinned commit {sub.expected} (remove it, or make the checkout again)"
            )
    return out


# ---- inspecting ---------------------------------------------------------------------------------


def inspect_checkout(path: Path | str, source: PinnedSource | None = None) -> CheckoutState:
    """The state of the checkout at ``path``, compared with ``source``'s pin (else its provenance record's)."""
    if source is None:
        return checkout_state(path)
    return checkout_state(path, pin=source.commit, name=source.name)


def problems_of(
    state: CheckoutState,
    *,
    require_submodules: bool = False,
    overlay_dir: Path | None = None,
    excused: frozenset[str] = frozenset(),
) -> tuple[str, ...]:
    """Why ``state`` is not exactly its pin (empty when it is). Judged by content: every tracked file's
    bytes and mode against the pinned tree, and every untracked file; a change is accepted only where
    the overlay's own manifest (``overlay_dir``) vouches for its bytes. The provenance record's
    overlay claim is never taken on trust."""
    if not state.has_git:
        return (unverifiable_message(state),)
    out: list[str] = []
    if state.expected is None:
        out.append("no pin to compare with: pass --expect NAME (a source of the spec)")
    elif state.head != state.expected:
        out.append(f"HEAD is {state.head or '(no commit)'}, the pin is {state.expected}")
    explained, overlay_problems = overlay_explains(state, overlay_dir)
    out += overlay_problems
    unexplained = sorted(state.modified_paths - explained - excused)
    if unexplained:
        shown = ", ".join(unexplained[:5]) + (f" and {len(unexplained) - 5} more" if len(unexplained) > 5 else "")
        out.append(f"local changes no overlay manifest accounts for: {shown} (see `git -C {state.path} status`)")
    out += stand_ins(state)
    for sub in state.submodules:
        if sub.path in excused:
            continue
        if sub.actual is None and require_submodules:
            out.append(f"submodule {sub.path} is not initialised (pinned at {sub.expected})")
        elif sub.actual is not None and not sub.matches:
            out.append(f"submodule {sub.path} is at {sub.actual}, its superproject pins {sub.expected}")
    return tuple(out)


def overlay_explains(state: CheckoutState, overlay_dir: Path | None) -> tuple[frozenset[str], list[str]]:
    """(paths whose current bytes are exactly the overlay's replacement, problems). An overlay in use
    must be applied whole, on the commit it names."""
    if overlay_dir is None or not state.modified_paths:
        return frozenset(), []
    from megacpp_env.fsutil import sha256_file
    from megacpp_env.worktree.manifest import load_manifest

    m = load_manifest(overlay_dir)
    root = Path(state.path)
    applied = set()
    for f in m.files:
        target = root / f.path
        now = sha256_file(target) if target.is_file() and not target.is_symlink() else None
        if now == f.sha256 or (f.sha256 is None and not target.exists() and not target.is_symlink()):
            applied.add(f.path)
    if not applied:
        return frozenset(), []
    problems = []
    if state.head != m.commit:
        problems.append(f"overlay {m.name} is for commit {m.commit}, the checkout is at {state.head}")
    missing = sorted({f.path for f in m.files} - applied)
    if missing:
        problems.append(f"overlay {m.name} is partially applied (not applied: {', '.join(missing[:5])})")
    return frozenset(applied), problems


def unverifiable_message(state: CheckoutState) -> str:
    name = state.source or "NAME"
    if not Path(state.path).exists():
        return f"{state.path} does not exist (make a checkout with `megacpp-env checkout {name} --dest {state.path}`)"
    return (
        f"{state.path} has no .git: it is unverifiable (a copied or exported tree cannot be tied to a "
        f"commit). Make a real checkout with `megacpp-env checkout {name} --dest {state.path}` "
        "(move the tree away first)"
    )


def verify_checkout(
    path: Path | str, source: PinnedSource | None = None, *, overlay_dir: Path | None = None
) -> Verification:
    """Is ``path`` exactly ``source``'s pin (plus, where ``overlay_dir`` is given, exactly that
    overlay's files)? See ``problems_of``."""
    state = inspect_checkout(path, source)
    required = bool(source and source.submodules)
    excused, exceptions = declared_exceptions(state, unobtainable_of(source))
    problems = problems_of(state, require_submodules=required, overlay_dir=overlay_dir, excused=excused)
    return Verification(state=state, problems=problems, exceptions=exceptions)


# ---- making -------------------------------------------------------------------------------------


def checkout_source(
    source: PinnedSource,
    dest: Path | str,
    *,
    git_config: Mapping[str, str] | None = None,
    overlay_dir: Path | None = None,
) -> CheckoutResult:
    """A real git checkout of ``source`` at its pinned commit in ``dest``. Idempotent: an existing
    checkout that ``verify-checkout`` would pass (judged by content; changes only where the overlay
    in ``overlay_dir`` vouches for them) is left alone; any other existing tree is refused.

    ``git_config``: ``-c`` settings for every fetch, e.g. a source mirror's ``url.<dir>.insteadOf``
    rewrites, so the recorded origin stays the pinned URL while the objects come from the mirror."""
    dest = Path(dest)
    if dest.exists() and not (dest.is_dir() and not any(dest.iterdir())):
        return _reuse_existing(source, dest, git_config or {}, overlay_dir)
    with _work_dir(dest) as work:
        shallow = _fetch_into(source, work, git_config or {})
        _write_record(source, work, shallow=shallow)  # inside the tree: the rename below publishes both
        work.chmod(0o755 & ~_umask())  # mkdtemp made it 0700; a checkout is an ordinary directory
        if dest.exists():
            dest.rmdir()
        os.replace(work, dest)
    return CheckoutResult(action="created", state=inspect_checkout(dest, source))


@contextlib.contextmanager
def _work_dir(dest: Path) -> Iterator[Path]:
    """A temporary sibling of ``dest`` to build the checkout in (``fsutil.staging_dir``: what killed
    runs left beside ``dest`` is removed first); a one-line error when impossible."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        staging = staging_dir(dest.parent, f".{dest.name}.partial-")
        work = staging.__enter__()
    except OSError as exc:
        raise RefusedError(f"cannot create a checkout at {dest}: {exc.strerror or exc} (pass another --dest)") from None
    with contextlib.ExitStack() as stack:
        stack.push(staging)
        yield work


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fetch_into(source: PinnedSource, work: Path, config: Mapping[str, str]) -> bool:
    git.init(work)
    git.set_remote(work, "origin", source.repo)
    shallow = git.fetch_commit(work, source.repo, source.commit, config=config)
    git.checkout_detached(work, source.commit)
    if source.submodules:
        declared = unobtainable_of(source)
        if declared:
            _submodules_except(
                work, declared, {**_file_config(source.repo), **config}, local=git.is_local_url(source.repo)
            )
        else:
            git.submodule_update(work, allow_file_protocol=git.is_local_url(source.repo), config=config)
    return shallow


def _file_config(url: str) -> dict[str, str]:
    return {"protocol.file.allow": "always"} if git.is_local_url(url) else {}


def _submodules_except(
    repo: Path, declared: Mapping[str, str], config: Mapping[str, str], prefix: str = "", *, local: bool
) -> None:
    """Every submodule of ``repo`` at its pinned commit, recursively, except the declared unobtainable
    ones (left uninitialised). A submodule holding a declared file is fetched without blobs
    (``--filter=blob:none``, from a mirror that allows filters) and checked out sparse, that file
    left out; every other blob is fetched as checkout needs it. Each URL passes the rule of every
    submodule fetch (``git.check_submodule_url``: a local one only when the top superproject,
    ``local``, is local), and git's own file-transport policy then treats the fetch as a submodule's."""
    urls = _gitmodule_urls(repo)
    env = None if local else {"GIT_PROTOCOL_FROM_USER": "0"}  # file:// only where config says "always" (a mirror)
    for rel, sha in sorted(git.gitlinks(repo).items()):
        full = f"{prefix}{rel}"
        if rel not in urls and covered(full, declared):
            continue
        if rel not in urls:
            raise RefusedError(f"{repo}: submodule {rel} has no URL in .gitmodules (fix the pin or declare it)")
        what = f"{repo}/.gitmodules: submodule {rel}: url"
        if full in declared:  # taken where it can be had (a mirror or a remote that has it), else left out
            try:  # a URL the rule refuses cannot be had: left out, never fetched
                git.check_submodule_url(urls[rel], local_superproject=local, what=what)
            except RefusedError:
                (repo / rel).mkdir(parents=True, exist_ok=True)
                continue
            _declared_submodule(repo, rel, urls[rel], sha, declared, config, full, env=env, local=local)
            continue
        git.check_submodule_url(urls[rel], local_superproject=local, what=what)
        if covered(full, declared):  # inside a declared directory: left out
            continue
        inside = sorted(p[len(full) + 1 :] for p in declared if p.startswith(full + "/"))
        sub = repo / rel
        sub.mkdir(parents=True, exist_ok=True)
        git.init(sub)
        git.set_remote(sub, "origin", urls[rel])
        fetch = ["fetch", "--quiet", "--depth", "1", "--no-tags"]
        if inside:
            fetch.append("--filter=blob:none")
            git.git_path(sub, "info").mkdir(parents=True, exist_ok=True)
            patterns = "/*\n" + "".join(f"!/{p}\n" for p in inside)
            git.git_path(sub, "info/sparse-checkout").write_text(patterns, encoding="utf-8")
            git.run_git(["config", "core.sparseCheckout", "true"], sub)
        git.run_git([*fetch, "origin", sha], sub, config=config, env=env, trusted=True)
        git.run_git(["-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", sha], sub,
                    config=config, env=env, trusted=True)  # fmt: skip
        _submodules_except(sub, declared, config, prefix=f"{full}/", local=local)


def _declared_submodule(
    repo: Path,
    rel: str,
    url: str,
    sha: str,
    declared: Mapping[str, str],
    config: Mapping[str, str],
    full: str,
    *,
    env: Mapping[str, str] | None,
    local: bool,
) -> None:
    """A declared-unobtainable submodule: checked out at its pin when the mirror (or its remote) has it, as
    any other; when the fetch fails it is left uninitialised (an empty directory), never stood in for."""
    sub = repo / rel
    git.init(sub)
    git.set_remote(sub, "origin", url)
    fetch = git.run_git(["fetch", "--quiet", "--depth", "1", "--no-tags", "origin", sha], sub, config=config,
                        env=env, trusted=True, check=False)  # fmt: skip
    if fetch.returncode != 0:
        shutil.rmtree(sub)
        sub.mkdir()
        return
    git.run_git(["-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", sha], sub,
                config=config, env=env, trusted=True)  # fmt: skip
    _submodules_except(sub, declared, config, prefix=f"{full}/", local=local)


def _gitmodule_urls(repo: Path) -> dict[str, str]:
    """Submodule path -> URL from the checkout's .gitmodules (relative URLs resolved against origin)."""
    if not (repo / ".gitmodules").is_file():
        return {}
    proc = git.run_git(["config", "-f", ".gitmodules", "--get-regexp", r"^submodule\..*\.(path|url)$"], repo,
                       check=False)  # fmt: skip
    paths: dict[str, str] = {}
    urls: dict[str, str] = {}
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(" ")
        name, _, attr = key[len("submodule.") :].rpartition(".")
        (paths if attr == "path" else urls)[name] = value
    base = git.remote_urls(repo).get("origin", "")
    out = {}
    for name, path in paths.items():
        url = urls.get(name, "")
        if url.startswith(("./", "../")):
            url = _relative_url(base, url)
        if url:
            out[path] = url
    return out


def _relative_url(base: str, url: str) -> str:
    """git's rule for ``./x`` and ``../x`` in .gitmodules: relative to the superproject's URL."""
    head = base.rstrip("/")
    while True:
        if url.startswith("./"):
            url = url[2:]
        elif url.startswith("../"):
            url, head = url[3:], head.rpartition("/")[0] or head
        else:
            return f"{head}/{url}"


def _write_record(source: PinnedSource, dest: Path, *, shallow: bool) -> None:
    old = read_provenance(dest)
    prov = Provenance(
        source=source.name,
        url=strip_url_credentials(source.repo),
        commit=source.commit,
        ref=source.ref,
        submodules={s.path: s.expected for s in git.submodule_status(dest)},
        shallow=shallow if old is None else old.shallow,
        overlay=old.overlay if old else None,
    )
    write_provenance(dest, prov)


def _reuse_existing(
    source: PinnedSource, dest: Path, config: Mapping[str, str], overlay_dir: Path | None
) -> CheckoutResult:
    """Reuse ``dest`` only when it is exactly the pin by content (``problems_of``, as ``verify-checkout``
    judges it): its provenance record, git's index flags and local config vouch for nothing."""
    state = inspect_checkout(dest, source)
    if not state.has_git:
        raise RefusedError(
            f"{dest} exists and is not a git checkout; refusing to overwrite it (move it away, or pass another --dest)"
        )
    if state.head != source.commit:
        raise RefusedError(
            f"{dest} is a checkout at {state.head or '(no commit)'}, not at the pin {source.commit} of "
            f"{source.name}; refusing to change it (move it away, or pass another --dest)"
        )
    declared = unobtainable_of(source)
    excused, _ = declared_exceptions(state, declared)
    problems = problems_of(state, overlay_dir=overlay_dir, excused=excused)
    if problems:
        raise RefusedError(
            f"{dest} is at the pin of {source.name} but its content is not: {'; '.join(problems)}. Refusing to "
            f"reuse or change it: move it away (or delete it) and run `megacpp-env checkout {source.name} "
            f"--dest {dest}` again, or pass another --dest"
        )
    if source.submodules and any(s.actual is None and not covered(s.path, declared) for s in state.submodules):
        if declared:
            _submodules_except(
                dest, declared, {**_file_config(source.repo), **config}, local=git.is_local_url(source.repo)
            )
        else:
            git.submodule_update(dest, allow_file_protocol=git.is_local_url(source.repo), config=config)
    _write_record(source, dest, shallow=False)
    return CheckoutResult(action="unchanged", state=inspect_checkout(dest, source))


def default_dest(root: Path, source: Source) -> Path:
    """``./.megacpp/src/<name-with-dashes>`` under the spec's directory (on a host)."""
    return layout.host_checkout_dir(root, source.name)


def find_source(spec: Spec, name: str) -> Source:
    """``spec.source(name)``, also accepting the dashed directory name (megacpp-smoke-ext)."""
    return spec.sources.get(name.replace("-", "_")) or spec.source(name)


def expected_source(path: Path, *, expect: str | None, spec: Spec | None) -> tuple[Source | None, Path | None]:
    """The source a checkout must match: ``--expect NAME`` (the verb then requires the spec), else the
    one its provenance record names (when a spec is there to say where it is pinned), else none; and,
    when that source has an overlay, the overlay directory whose manifest may vouch for changed files
    (the record only names the source: it is not trusted)."""
    found: Spec | None = spec
    source: Source | None = None
    if expect:
        if spec is None:
            raise SpecError(f"--expect {expect}: no spec to look the source up in", key="--expect")
        source = find_source(spec, expect)
    else:
        prov = read_provenance(path)
        found = spec if prov is not None else None
        source = found.sources.get(prov.source) if found and prov else None
    overlay = layout.overlay_dir(found.root, source.overlay) if found and source and source.overlay else None
    return source, overlay


def verify_as_pinned(path: Path, *, expect: str | None, spec: Spec | None) -> tuple[Source | None, Verification]:
    """``verify-checkout PATH``: the source it must match (``expected_source``) and the verdict."""
    if not path.exists():
        raise VerificationError(f"{path} does not exist: there is no checkout to verify")
    source, overlay_dir = expected_source(path, expect=expect, spec=spec)
    return source, verify_checkout(path, source, overlay_dir=overlay_dir)
