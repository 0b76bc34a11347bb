"""An sdist's own commit record: the version file setuptools-scm writes into it (``version`` and
``commit_id``, e.g. ``vllm/_version.py``), read statically. It ties the sdist to a commit when the
recorded id is a prefix of the pin and the version is an exact, clean release (no ``.devN``, which
setuptools-scm adds past a tag, and no local part, which it adds for a dirty tree)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

MIN_ID = 7  # git's shortest abbreviation
_ID_RE = re.compile(r"^g?([0-9a-f]{7,40})$")
_NAMES = {"version": ("version", "__version__"), "commit": ("commit_id", "__commit_id__")}


@dataclass(frozen=True, kw_only=True, slots=True)
class CommitRecord:
    path: str  # relative to the sdist's root
    version: str
    commit_id: str  # as written ("g98dff2a81")

    def describe(self) -> str:
        return f"{self.path}: version {self.version}, commit_id {self.commit_id}"

    def ties_to(self, commit: str, dist_version: str) -> str:
        """Why this record does not tie the sdist to ``commit`` (a release of ``dist_version``); '' if it does."""
        found = _ID_RE.match(self.commit_id)
        if found is None:
            return f"{self.path}: commit_id {self.commit_id!r} is not an abbreviated commit"
        if not commit.startswith(found.group(1)):
            return f"{self.path}: commit_id {self.commit_id} is not the pin {commit[:12]}"
        try:
            version = Version(self.version)
        except InvalidVersion:
            return f"{self.path}: version {self.version!r} is not a version"
        if version.is_devrelease or version.local:
            return f"{self.path}: version {self.version} was made past a tag or from a dirty tree, not a clean release"
        if dist_version and Version(dist_version) != version:
            return f"{self.path}: version {self.version} differs from the sdist's PKG-INFO version {dist_version}"
        return ""


def find_record(root: Path) -> CommitRecord | None:
    """The first ``_version.py`` (two levels deep at most, sorted) holding both a version and a commit_id."""
    for path in sorted(root.glob("*/_version.py")) + sorted(root.glob("*/*/_version.py")):
        found = _read(path)
        if found is not None:
            return CommitRecord(path=path.relative_to(root).as_posix(), version=found[0], commit_id=found[1])
    return None


def _read(path: Path) -> tuple[str, str] | None:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    values: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
            continue
        if not isinstance(node.value.value, str):
            continue
        for target in node.targets:
            for key, names in _NAMES.items():
                if isinstance(target, ast.Name) and target.id in names:
                    values[key] = node.value.value
    if "version" in values and "commit" in values and all(_plain(v) for v in values.values()):
        return values["version"], values["commit"]
    return None


def _plain(value: str) -> bool:
    """A short printable ASCII value: what a version or an abbreviated commit is (a hostile file's
    control characters or megabytes never reach the facts file)."""
    return 0 < len(value) <= 64 and all(33 <= ord(c) < 127 for c in value)
