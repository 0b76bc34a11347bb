"""Re-create a captured checkout at ``DIR/NAME``: a real git checkout at its commit (fetched from its
remotes, or from a source mirror through ``url.<mirror>.insteadOf``), its submodules at their
captured commits, the captured diff applied (``git apply --binary``), the untracked files written
with their modes, its provenance record restored; then proved: its diff and untracked-file hashes
must equal the golden's.

Built in a temporary sibling and renamed into place, as ``checkout`` does. Untracked files are
written under the tree only: no component may be a symbolic link, nothing is overwritten.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from megacpp_env import git
from megacpp_env.errors import MegacppEnvError, RefusedError
from megacpp_env.fsutil import atomic_write_bytes, sha256_bytes, staging_dir
from megacpp_env.records import read_json
from megacpp_env.repro.document import CheckoutCapture, UntrackedFile
from megacpp_env.repro.objects import ObjectStore
from megacpp_env.repro.outcome import Unrecreated
from megacpp_env.worktree import content
from megacpp_env.worktree.provenance import PROVENANCE_NAME


def source_rewrites(mirror: Path | None) -> dict[str, str]:
    """``url.<mirror repo>.insteadOf=<url>`` for every repository of a source mirror
    (``megacpp-env mirror-sources`` layout: ``DIR/sources/<name>/index.json``); {} without one."""
    out: dict[str, str] = {}
    if mirror is None:
        return out
    for index in sorted(Path(mirror).glob("sources/*/index.json")):
        repos = read_json(index).data.get("repos") or {}
        for url, entry in repos.items():
            rel = entry.get("path") if isinstance(entry, Mapping) else None
            if isinstance(rel, str) and rel.startswith("git/") and ".." not in rel:
                out[f"url.{(index.parent / rel).resolve().as_uri()}.insteadOf"] = url
    return out


def _fail(cap: CheckoutCapture, why: str, remedy: str) -> Unrecreated:
    return Unrecreated(what=f"checkout {cap.name} ({cap.path})", why=why, remedy=remedy)


def recreate(cap: CheckoutCapture, dest: Path, store: ObjectStore, rewrites: Mapping[str, str]) -> list[Unrecreated]:
    """Make ``dest`` the captured checkout; what could not be done, in words (empty: done and proved)."""
    if cap.problems or cap.head is None:
        return [_fail(cap, "; ".join(cap.problems) or "no commit", "see the reason; then store the golden again")]
    try:
        # flock-held while this run lives: the next reproduce sweeps what a killed one left
        with staging_dir(dest.parent, f".{dest.name}.partial-") as work:
            try:
                missing = _fetch(cap, work, rewrites)
                if missing is not None:
                    return [missing]
                _tree(cap, work, store, rewrites)
                work.chmod(0o755)
                os.replace(work, dest)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    except (MegacppEnvError, OSError) as exc:
        return [_fail(cap, f"could not be re-created: {exc}", "fix the cause and run reproduce again")]
    return _prove(cap, dest)


def _fetch(cap: CheckoutCapture, work: Path, rewrites: Mapping[str, str]) -> Unrecreated | None:
    assert cap.head is not None
    git.init(work)
    for name, url in cap.remotes.items():
        git.set_remote(work, name, url)
    urls = sorted(cap.remotes.items(), key=lambda kv: (kv[0] != "origin", kv[0]))
    errors = []
    for _name, url in urls:
        try:
            git.fetch_commit(work, url, cap.head, config=dict(rewrites))
            return None
        except MegacppEnvError as exc:
            errors.append(str(exc))
    return _fail(
        cap,
        f"commit {cap.head} is not on any of its remotes ({'; '.join(errors) or 'it has no remote'})",
        "push the commit (or restore the branch that held it) to a remote, or pass --mirror DIR "
        "with a source mirror that has it (megacpp-env mirror-sources)",
    )


def _tree(cap: CheckoutCapture, work: Path, store: ObjectStore, rewrites: Mapping[str, str]) -> None:
    assert cap.head is not None
    git.checkout_detached(work, cap.head)
    if any(s.commit for s in cap.submodules):
        local = any(git.is_local_url(u) for u in cap.remotes.values())
        git.submodule_update(work, allow_file_protocol=local, config=dict(rewrites))
    for sub in cap.submodules:
        if sub.commit and git.head_commit(work / sub.path) != sub.commit:
            url = git.remote_urls(work / sub.path).get("origin", "")
            git.fetch_commit(work / sub.path, url, sub.commit, config=dict(rewrites))
            git.checkout_detached(work / sub.path, sub.commit)
    if cap.diff:
        git.apply_patch(work, store.get(cap.diff), exclude=[s.path for s in cap.submodules])
    for f in cap.untracked:
        write_untracked(work, f, store.get(f.sha256))
    if cap.provenance:
        git.add_exclude(work, f"/{PROVENANCE_NAME}")
        atomic_write_bytes(work / PROVENANCE_NAME, store.get(cap.provenance))


def write_untracked(root: Path, f: UntrackedFile, data: bytes) -> None:
    """Create ``root/f.path`` (never through a symbolic link, never over an existing file)."""
    parent = root
    for part in f.path.split("/")[:-1]:
        parent = parent / part
        if parent.is_symlink() or (parent.exists() and not parent.is_dir()):
            raise RefusedError(f"untracked file {f.path}: {parent} is not a plain directory")
        parent.mkdir(exist_ok=True)
    target = parent / f.path.rsplit("/", 1)[-1]
    if f.mode == "120000":
        target.symlink_to(os.fsdecode(data))
        return
    mode = 0o755 if f.mode == "100755" else 0o644
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(target, mode)


def _prove(cap: CheckoutCapture, dest: Path) -> list[Unrecreated]:
    """HEAD, diff and untracked files as in the golden; files skipped by the capture are named."""
    skipped = [
        _fail(cap, f"untracked file {s.path} was not captured: {s.reason}", f"copy it by hand to {dest / s.path}")
        for s in cap.skipped
    ]
    want = (cap.head, cap.diff or sha256_bytes(b""), None if skipped else cap.untracked_hash)
    tree = content.read(dest)
    got = (tree.head, tree.diff_hash(), None if skipped else tree.untracked_hash())
    if got == want:
        return skipped
    return [*skipped, _fail(cap, f"re-created but not identical: (head, diff, untracked) {got} != golden {want}",
                            "report this as a bug in megacpp-env")]  # fmt: skip
