"""Pinned source checkouts: make one (fetch by SHA, submodules at their pinned commits, provenance
record), inspect one (``inspect_checkout``, also used by ``snapshot``) and verify one against its pin.

A checkout is created in a temporary sibling directory and renamed into place, so an interrupted
``checkout`` never leaves a half-made tree at the destination. Never prints, never exits.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env import __version__, git
from megacpp_env.errors import RefusedError
from megacpp_env.fsutil import atomic_write_text
from megacpp_env.redact import strip_url_credentials

if TYPE_CHECKING:
    from megacpp_env.spec.model import Source

PROVENANCE_NAME = ".megacpp-checkout.json"
PROVENANCE_SCHEMA = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Provenance:
    """What ``checkout`` made, written to ``DEST/.megacpp-checkout.json`` (kept out of ``git status``).

    ``overlay`` is set by ``overlay apply`` (name, diff_hash, untracked_hash of the applied state and
    the overlay's paths) and cleared by ``overlay restore``; ``verify-checkout`` accepts exactly that
    recorded state.
    """

    source: str
    url: str
    commit: str
    ref: str = ""
    submodules: dict[str, str] = field(default_factory=dict)
    shallow: bool = False
    tool_version: str = __version__
    overlay: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": PROVENANCE_SCHEMA,
            "source": self.source,
            "url": self.url,
            "commit": self.commit,
            "ref": self.ref,
            "submodules": dict(sorted(self.submodules.items())),
            "shallow": self.shallow,
            "tool": f"megacpp-env {self.tool_version}",
            "overlay": self.overlay,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Provenance:
        return cls(
            source=str(data.get("source", "")),
            url=str(data.get("url", "")),
            commit=str(data.get("commit", "")),
            ref=str(data.get("ref", "")),
            submodules={str(k): str(v) for k, v in (data.get("submodules") or {}).items()},
            shallow=bool(data.get("shallow", False)),
            tool_version=str(data.get("tool", "")).removeprefix("megacpp-env "),
            overlay=data.get("overlay") or None,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckoutState:
    """What a directory is, as far as git can tell. ``expected`` is the pin it is compared with."""

    path: str
    has_git: bool
    head: str | None = None
    expected: str | None = None
    source: str | None = None
    dirty: bool = False
    diff_hash: str | None = None
    untracked: int = 0
    untracked_hash: str | None = None
    changed: tuple[str, ...] = ()  # paths that differ from HEAD (tracked or untracked), sorted
    submodules: tuple[git.SubmoduleState, ...] = ()
    provenance: Provenance | None = None

    @property
    def matches_pin(self) -> bool | None:
        """HEAD equals the pin; None when there is no pin to compare with."""
        return None if self.expected is None else self.head == self.expected

    @property
    def matches_recorded_overlay(self) -> bool:
        """The local changes are exactly the ones ``overlay apply`` recorded: the same diff and
        untracked files, touching exactly the overlay's paths (nothing outside it)."""
        rec = self.provenance.overlay if self.provenance else None
        if not rec or not isinstance(rec.get("paths"), list):
            return False
        same_paths = set(self.changed) == {str(p) for p in rec["paths"]}
        return (
            same_paths and rec.get("diff_hash") == self.diff_hash and rec.get("untracked_hash") == self.untracked_hash
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "source": self.source,
            "has_git": self.has_git,
            "head": self.head,
            "expected": self.expected,
            "matches_pin": self.matches_pin,
            "dirty": self.dirty,
            "diff_hash": self.diff_hash,
            "untracked": self.untracked,
            "untracked_hash": self.untracked_hash,
            "changed": list(self.changed),
            "submodules": [s.to_dict() for s in self.submodules],
            "overlay": self.provenance.overlay if self.provenance else None,
            "provenance": self.provenance.to_dict() if self.provenance else None,
        }


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

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "problems": list(self.problems), **self.state.to_dict()}


# ---- provenance ---------------------------------------------------------------------------------


def read_provenance(path: Path) -> Provenance | None:
    file = Path(path) / PROVENANCE_NAME
    try:
        return Provenance.from_dict(json.loads(file.read_text(encoding="utf-8")))
    except (FileNotFoundError, NotADirectoryError, ValueError, AttributeError):
        return None


def write_provenance(path: Path, prov: Provenance) -> bool:
    """Write the record atomically and keep it out of ``git status`` (``.git/info/exclude``)."""
    git.add_exclude(path, f"/{PROVENANCE_NAME}")
    text = json.dumps(prov.to_dict(), indent=2, sort_keys=True) + "\n"
    return atomic_write_text(Path(path) / PROVENANCE_NAME, text)


def record_overlay(path: Path, overlay: dict[str, Any] | None, *, source: str = "", commit: str = "") -> None:
    """Record (or clear, with None) the overlay state in the provenance record. A checkout made by
    hand gets a minimal record (``source``, ``commit``, origin URL) so the state is still recorded."""
    prov = read_provenance(path)
    if prov is None and overlay is not None:
        url = git.remote_urls(path).get("origin", "")
        prov = Provenance(source=source, url=url, commit=commit or git.head_commit(path) or "")
    if prov is not None:
        write_provenance(path, replace(prov, overlay=overlay))


# ---- inspecting ---------------------------------------------------------------------------------


def inspect_checkout(path: Path | str, source: Source | None = None) -> CheckoutState:
    """Everything ``verify`` and ``snapshot`` need to know about a checkout. Reads only."""
    path = Path(path)
    prov = read_provenance(path)
    expected = source.commit if source else (prov.commit if prov else None)
    name = source.name if source else (prov.source if prov else None)
    if not git.is_git_checkout(path):
        return CheckoutState(path=str(path), has_git=False, expected=expected, source=name, provenance=prov)
    head = git.head_commit(path)
    return CheckoutState(
        path=str(path),
        has_git=True,
        head=head,
        expected=expected,
        source=name,
        dirty=git.is_dirty(path) if head else False,
        diff_hash=git.diff_hash(path) if head else None,
        untracked=git.untracked_count(path),
        untracked_hash=git.untracked_hash(path),
        changed=tuple(c.path for c in git.changes(path)) if head else (),
        submodules=git.submodule_status(path),
        provenance=prov,
    )


def problems_of(state: CheckoutState, *, require_submodules: bool = False) -> tuple[str, ...]:
    """Why ``state`` is not exactly its pin (empty when it is)."""
    if not state.has_git:
        return (unverifiable_message(state),)
    out: list[str] = []
    if state.expected is None:
        out.append("no pin to compare with: pass --expect NAME (a source of the spec)")
    elif state.head != state.expected:
        out.append(f"HEAD is {state.head or '(no commit)'}, the pin is {state.expected}")
    if state.dirty and not state.matches_recorded_overlay:
        out.append(
            f"local changes not recorded by an overlay: diff sha256 {state.diff_hash}, "
            f"{state.untracked} untracked file(s) (see `git -C {state.path} status`)"
        )
    for sub in state.submodules:
        if sub.actual is None and require_submodules:
            out.append(f"submodule {sub.path} is not initialised (pinned at {sub.expected})")
        elif sub.actual is not None and not sub.matches:
            out.append(f"submodule {sub.path} is at {sub.actual}, its superproject pins {sub.expected}")
    return tuple(out)


def unverifiable_message(state: CheckoutState) -> str:
    name = state.source or "NAME"
    if not Path(state.path).exists():
        return f"{state.path} does not exist (make a checkout with `megacpp-env checkout {name} --dest {state.path}`)"
    return (
        f"{state.path} has no .git: it is unverifiable (a copied or exported tree cannot be tied to a "
        f"commit). Make a real checkout with `megacpp-env checkout {name} --dest {state.path}` "
        "(move the tree away first)"
    )


def verify_checkout(path: Path | str, source: Source | None = None) -> Verification:
    state = inspect_checkout(path, source)
    required = bool(source and source.submodules)
    return Verification(state=state, problems=problems_of(state, require_submodules=required))


# ---- making -------------------------------------------------------------------------------------


def checkout_source(source: Source, dest: Path | str) -> CheckoutResult:
    """A real git checkout of ``source`` at its pinned commit in ``dest``. Idempotent: an existing
    checkout exactly at the pin is left alone; one at another commit or with changes is refused."""
    dest = Path(dest)
    if dest.exists() and not (dest.is_dir() and not any(dest.iterdir())):
        return _reuse_existing(source, dest)
    work = _make_work_dir(dest)
    try:
        shallow = _fetch_into(source, work)
        work.chmod(0o755 & ~_umask())  # mkdtemp made it 0700; a checkout is an ordinary directory
        if dest.exists():
            dest.rmdir()
        os.replace(work, dest)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    _write_record(source, dest, shallow=shallow)
    return CheckoutResult(action="created", state=inspect_checkout(dest, source))


def _make_work_dir(dest: Path) -> Path:
    """A temporary sibling of ``dest`` to build the checkout in; a one-line error when impossible."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    except OSError as exc:
        raise RefusedError(f"cannot create a checkout at {dest}: {exc.strerror or exc} (pass another --dest)") from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fetch_into(source: Source, work: Path) -> bool:
    git.init(work)
    git.set_remote(work, "origin", source.repo)
    shallow = git.fetch_commit(work, source.repo, source.commit)
    git.checkout_detached(work, source.commit)
    if source.submodules:
        git.submodule_update(work, allow_file_protocol=git.is_local_url(source.repo))
    return shallow


def _write_record(source: Source, dest: Path, *, shallow: bool) -> None:
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


def _reuse_existing(source: Source, dest: Path) -> CheckoutResult:
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
    if state.dirty and not state.matches_recorded_overlay:
        raise RefusedError(
            f"{dest} has local changes ({state.untracked} untracked, diff sha256 {state.diff_hash}); "
            "refusing to touch it (commit or discard them, or pass another --dest)"
        )
    moved = [s for s in state.submodules if s.actual is not None and not s.matches]
    if moved:
        raise RefusedError(f"{dest}: submodule {moved[0].path} is at {moved[0].actual}, not {moved[0].expected}")
    if source.submodules and any(s.actual is None for s in state.submodules):
        git.submodule_update(dest, allow_file_protocol=git.is_local_url(source.repo))
    _write_record(source, dest, shallow=False)
    return CheckoutResult(action="unchanged", state=inspect_checkout(dest, source))


def default_dest(root: Path, source: Source) -> Path:
    """``./.megacpp/src/<name-with-dashes>`` under the spec's directory (on a host)."""
    return Path(root) / ".megacpp" / "src" / source.dist_dir_name
