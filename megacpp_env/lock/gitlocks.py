"""Committed locks at a git ref versus the working tree (for ``gate``). All git calls go through
``megacpp_env.git.run_git``; paths are passed ``./``-relative so a spec in a subdirectory works."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from megacpp_env import git, layout
from megacpp_env.errors import SpecError
from megacpp_env.lock.diff import LockDiff, diff_locks
from megacpp_env.lock.pylock import Lock, LockFormatError, read_pylock, read_pylock_text

PREFIX, SUFFIX = layout.LOCK_PREFIX, layout.LOCK_SUFFIX


@dataclass(frozen=True, kw_only=True, slots=True)
class LockPair:
    name: str  # file name: pylock.<target>-<os>-<arch>.toml
    title: str  # "<target> <os>/<arch>"
    base: Lock | None
    head: Lock | None

    def diff(self) -> LockDiff:
        empty = Lock(packages=())
        return diff_locks(self.base or empty, self.head or empty, title=self.title)


def title_of(filename: str) -> str:
    parsed = layout.parse_lock_name(filename)
    if parsed:
        return f"{parsed[0]} {parsed[1]}"
    toolchain = layout.parse_toolchain_lock_name(filename)
    if toolchain:
        return f"{toolchain[0]} {toolchain[2]} ({toolchain[1]} toolchain)"
    return filename.removeprefix(PREFIX).removesuffix(SUFFIX)


def resolve_ref(root: Path, ref: str) -> str:
    """The commit ``ref`` names; for ``HEAD`` of a repository with no commit yet (the first commit,
    where the pre-commit hook runs ``gate --base HEAD``), the empty tree: every lock is new."""
    proc = git.run_git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], root, check=False)
    if proc.returncode == 0:
        return proc.stdout.decode().strip()
    if ref == "HEAD" and _head_is_unborn(root):
        return git.run_git(["hash-object", "-t", "tree", "--stdin"], root, input_bytes=b"").stdout.decode().strip()
    if git.toplevel(root) is None:  # no repository: "unknown ref" would send the user fetching
        raise SpecError(
            f"{root} is not in a git repository: the gate compares the locks committed at a ref with the work tree",
            remedy="run it in a clone of the project (git clone, or git init and commit the locks)",
        )
    raise SpecError(f"unknown git ref {ref!r} in {root}", remedy="fetch it first, e.g. git fetch origin main")


def _head_is_unborn(root: Path) -> bool:
    """HEAD names a branch (``symbolic-ref`` succeeds) that has no commit yet."""
    return git.run_git(["symbolic-ref", "--quiet", "HEAD"], root, check=False).returncode == 0


def base_lock_names(root: Path, commit: str) -> list[str]:
    rel = f"./{layout.locks_dir(root).relative_to(root)}/"
    out = git.run_git(["ls-tree", "--name-only", commit, "--", rel], root).stdout.decode()
    names = [Path(line).name for line in out.splitlines()]
    return sorted(n for n in names if n.startswith(PREFIX) and n.endswith(SUFFIX))


def head_lock_names(root: Path) -> list[str]:
    return sorted(p.name for p in layout.locks_dir(root).glob(f"{PREFIX}*{SUFFIX}"))


def _base_lock(data: bytes, where: str) -> Lock:
    """The lock at the base commit; bytes that are not UTF-8 are a LockFormatError naming it."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LockFormatError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})", file=where
        ) from None
    return read_pylock_text(text, path=where)


def lock_pairs(root: Path, ref: str) -> tuple[str, list[LockPair]]:
    """(commit, pairs) for every lock file at ``ref`` or in the working tree."""
    commit = resolve_ref(root, ref)
    locks_rel = layout.locks_dir(root).relative_to(root)
    pairs = []
    for name in sorted(set(base_lock_names(root, commit)) | set(head_lock_names(root))):
        data = git.show_file(root, f"./{locks_rel}/{name}", commit)
        base = _base_lock(data, f"{ref}:{locks_rel}/{name}") if data is not None else None
        head_path = layout.locks_dir(root) / name
        head = read_pylock(head_path) if head_path.exists() else None
        pairs.append(LockPair(name=name, title=title_of(name), base=base, head=head))
    return commit, pairs
