"""Capture one checkout for a golden: commit, remotes, submodule commits, the full uncommitted diff
(``git diff HEAD --binary`` through the one git wrapper, the very bytes the snapshot's ``diff_hash``
hashes) and the untracked files (content and mode), content-addressed in the object store.

Ignored files are never read (``git ls-files --others --exclude-standard``). Untracked files that
look like credentials (``redact.credential_file_reason``), nested repositories, special files and
files over ``MAX_FILE`` are listed as skipped, not stored. The capture re-checks the tree against the
snapshot it belongs to: a tree that changed in between is a problem, not a silent mismatch. A diff
that adds a credential (``redact.diff_secret_reason``) is not stored: the checkout gets a problem
naming the file and line, and reproduce says it cannot re-create that checkout (docs/DESIGN.md).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from megacpp_env.errors import MegacppEnvError
from megacpp_env.fsutil import sha256_bytes
from megacpp_env.redact import credential_file_reason, credential_reason, diff_secret_reason
from megacpp_env.repro.document import CheckoutCapture, Skipped, SubmoduleCommit, UntrackedFile
from megacpp_env.repro.objects import ObjectStore
from megacpp_env.worktree import content
from megacpp_env.worktree.provenance import PROVENANCE_NAME

MAX_FILE = 256 << 20


def _remedy_no_git(name: str) -> str:
    return (
        f"{name} has no .git: a tree without .git cannot be re-created or verified; make it a real "
        "checkout (megacpp-env checkout NAME, or git clone at the commit) and store the golden again"
    )


def capture_checkout(key: str, entry: Mapping[str, Any], store: ObjectStore) -> CheckoutCapture:
    path = Path(str(entry.get("path") or key))
    base = CheckoutCapture(key=key, path=str(path), name=path.name)
    if entry.get("error"):
        return _with(base, problems=(f"{path.name}: the snapshot could not read it: {entry['error']}",))
    if entry.get("has_git") is False:
        return _with(base, problems=(_remedy_no_git(path.name),))
    try:
        return _capture(base, path, entry, store)
    except (MegacppEnvError, OSError) as exc:
        return _with(base, problems=(f"{path.name}: cannot be captured: {exc}",))


def _with(base: CheckoutCapture, **changes: Any) -> CheckoutCapture:
    fields = {f: getattr(base, f) for f in base.__dataclass_fields__}
    return CheckoutCapture(**{**fields, **changes})


def _capture(base: CheckoutCapture, path: Path, entry: Mapping[str, Any], store: ObjectStore) -> CheckoutCapture:
    tree = content.read(path)
    head = tree.head
    diff = tree.diff()
    untracked, skipped = _untracked(path, tree.delta.untracked, store)
    untracked_hash = tree.untracked_hash()
    problems = []
    same = (head, sha256_bytes(diff) if head else None, untracked_hash)
    if same != (entry.get("head"), entry.get("diff_hash"), entry.get("untracked_hash")):
        problems.append(f"{path.name}: changed between the snapshot and its capture (store the golden again)")
    if head is None:
        problems.append(f"{path.name}: has no commit to re-create it from")
    secret = diff_secret_reason(diff) if diff else ""
    if secret:
        problems.append(
            f"{path.name}: its uncommitted diff holds a credential ({secret}): not stored, so reproduce cannot "
            "re-create this checkout; move the secret out of the tree (an environment variable, a file git "
            "ignores) and store the golden again"
        )
    prov = path / PROVENANCE_NAME
    record = prov.read_bytes() if prov.is_file() and not prov.is_symlink() else None
    if record is not None and credential_file_reason(PROVENANCE_NAME, record):
        skipped = (
            *skipped,
            Skipped(path=PROVENANCE_NAME, reason="its provenance record holds a credential: not stored"),
        )
        record = None
    return _with(
        base,
        head=head,
        remotes=dict(entry.get("remotes") or {}),
        submodules=tuple(
            SubmoduleCommit(path=s["path"], commit=s.get("actual")) for s in entry.get("submodules") or ()
        ),
        diff=store.put(diff) if diff and not secret else None,
        untracked_hash=untracked_hash,
        untracked=untracked,
        skipped=skipped,
        provenance=store.put(record) if record is not None else None,
        problems=tuple(problems),
    )


def _untracked(
    root: Path, files: tuple[str, ...], store: ObjectStore
) -> tuple[tuple[UntrackedFile, ...], tuple[Skipped, ...]]:
    kept: list[UntrackedFile] = []
    skipped: list[Skipped] = []
    for rel in files:
        found = _one(root, rel, store)
        if isinstance(found, UntrackedFile):
            kept.append(found)
        else:
            skipped.append(found)
    return tuple(kept), tuple(skipped)


def _not_stored(rel: str, st: os.stat_result) -> Skipped | None:
    if stat.S_ISDIR(st.st_mode):
        return Skipped(path=rel, reason="a nested git repository: clone it there again by hand")
    if not stat.S_ISREG(st.st_mode):
        return Skipped(path=rel, reason="not a regular file")
    if st.st_size > MAX_FILE:
        return Skipped(path=rel, reason=f"larger than {MAX_FILE >> 20} MiB: copy it by hand")
    return None


def _one(root: Path, rel: str, store: ObjectStore) -> UntrackedFile | Skipped:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return Skipped(path=rel.encode("utf-8", "replace").decode(), reason="its name is not valid UTF-8")
    full = root / rel
    st = os.lstat(full)
    if stat.S_ISLNK(st.st_mode):
        target = os.fsencode(full.readlink())
        why = credential_file_reason(rel, target) or credential_reason(os.fsdecode(target))
        if why:
            return Skipped(path=rel, reason=f"a symbolic link that looks like a credential ({why}): not stored")
        return UntrackedFile(path=rel, mode="120000", sha256=store.put(target))
    odd = _not_stored(rel, st)
    if odd is not None:
        return odd
    data = full.read_bytes()
    why = credential_file_reason(rel, data)
    if why:
        return Skipped(path=rel, reason=f"looks like a credential ({why}): not stored")
    mode = "100755" if st.st_mode & 0o111 else "100644"
    return UntrackedFile(path=rel, mode=mode, sha256=store.put(data))
