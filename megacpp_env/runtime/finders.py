"""The import-hook machinery the runtime patches ride on, and the record of what each one did.

``hook.install()`` puts the two finders on ``sys.meta_path``; ``patches`` arms them. Two
mechanisms, neither of which writes to disk:
- ``PostImportFinder``: a meta-path finder that lets the normal finders locate a module, then wraps
  its loader so a patch function runs right after the module body executed (``is_big_gpu``,
  ``capture_scalar_outputs``). Modules already imported are patched at once.
- ``ShadowFinder``: loads a module from a shadow tree (a modified copy kept outside
  site-packages) in place of the installed file, only when the installed file still has the
  sha256 the shadow was made from. Disabling the gate (or uninstalling the .pth) returns the
  original, because the installed file was never changed.

Every outcome is recorded in ``STATE`` (read by ``megacpp_env.runtime.status()`` once the hook
ran). Stdlib only, and nothing of ``megacpp_env``: ``hook`` imports ``patches``, both import this
module, and nothing imports back (no circle; ``tests/test_layers.py`` checks).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Generic, TypeVar

STATE: dict[str, dict[str, str]] = {}
PostPatch = Callable[[ModuleType], str]
_Entry = TypeVar("_Entry")


def record(name: str, state: str, detail: str = "") -> None:
    STATE[name] = {"state": state, "detail": detail}


class _NamedFinder(importlib.abc.MetaPathFinder, Generic[_Entry]):
    """A finder for the modules named in ``entries``: it asks the other finders on ``sys.meta_path``
    for such a module's spec (``None`` when none has it) and returns what ``_spec`` makes of it."""

    def __init__(self) -> None:
        self.entries: dict[str, _Entry] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        entry = self.entries.get(fullname)
        if entry is None:
            return None
        return self._spec(fullname, entry, self._others_spec(fullname, path, target))

    def _others_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None
    ) -> importlib.machinery.ModuleSpec | None:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def _spec(
        self, fullname: str, entry: _Entry, original: importlib.machinery.ModuleSpec | None
    ) -> importlib.machinery.ModuleSpec | None:
        raise NotImplementedError


class _PatchingLoader(importlib.abc.Loader):
    """Delegates to the real loader, then runs the patch on the executed module."""

    def __init__(self, loader: importlib.abc.Loader, name: str, patch: PostPatch) -> None:
        self._loader = loader
        self._name = name
        self._patch = patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        _run_patch(self._name, self._patch, module)

    def __getattr__(self, attr: str) -> Any:  # get_source, get_filename, is_package, ...
        return getattr(self._loader, attr)


def _run_patch(name: str, patch: PostPatch, module: ModuleType) -> None:
    try:
        record(name, "applied", patch(module))
    except Exception as exc:  # a patch must never break the import it rides on
        record(name, "error", f"{type(exc).__name__}: {exc}")


class PostImportFinder(_NamedFinder[tuple[str, PostPatch]]):
    """Module name -> (patch name, the patch to run once the module body executed)."""

    def add(self, module: str, name: str, patch: PostPatch) -> None:
        if module in sys.modules:
            _run_patch(name, patch, sys.modules[module])
            return
        self.entries[module] = (name, patch)
        record(name, "armed", f"patches {module} when it is imported")

    def _spec(
        self, fullname: str, entry: tuple[str, PostPatch], original: importlib.machinery.ModuleSpec | None
    ) -> importlib.machinery.ModuleSpec | None:
        if original is None or original.loader is None:
            return original
        original.loader = _PatchingLoader(original.loader, *entry)
        return original


class ShadowFinder(_NamedFinder[tuple[str, str, str, str]]):
    """Module name -> (patch name, shadow file, base sha256 of the installed file, shadow sha256)."""

    def _spec(
        self, fullname: str, entry: tuple[str, str, str, str], original: importlib.machinery.ModuleSpec | None
    ) -> importlib.machinery.ModuleSpec | None:
        name, shadow, base_sha, shadow_sha = entry
        origin = original.origin if original else None
        problem = _shadow_problem(origin, base_sha, shadow, shadow_sha)
        if problem:
            record(name, "skipped", problem)
            return original
        record(name, "applied", f"{fullname} loaded from {shadow} instead of {origin}")
        return importlib.util.spec_from_file_location(fullname, shadow)


def _sha256(path: str) -> str | None:
    import hashlib

    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except OSError:
        return None


def _shadow_problem(origin: str | None, base_sha: str, shadow: str, shadow_sha: str) -> str:
    if origin is None:
        return "the original module is not installed"
    got = _sha256(origin)
    if got != base_sha:
        return f"{origin} has sha256 {got}, the shadow was made from {base_sha}: not shadowing a different version"
    if _sha256(shadow) != shadow_sha:
        return f"shadow file {shadow} does not match its recorded sha256"
    return ""


POST_IMPORT = PostImportFinder()
SHADOWS = ShadowFinder()
