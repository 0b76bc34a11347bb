"""Source checkouts: every source of the spec that is checked out where megacpp-env puts it, plus
``--paths``. Uses ``megacpp_env.worktree`` (what a checkout and its overlay are; all git calls
go through ``megacpp_env.git``), never the pipeline that makes them. A tree without ``.git`` is
recorded as such; ``diff``/``doctor`` make it a finding.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.errors import MegacppEnvError
from megacpp_env.snapshot.scrub import Scrubber
from megacpp_env.snapshot.tasks import map_threads
from megacpp_env.snapshot.verify import checkout_cache

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context
    from megacpp_env.snapshot.options import Cache
    from megacpp_env.spec.model import Source, Spec

MAX_PARALLEL = 8
DROP_KEYS = ("provenance",)  # names the tool version that made the checkout: noise for the digest


def candidate_dirs(spec: Spec, source: Source, environ: Mapping[str, str]) -> list[Path]:
    """Where a checkout of ``source`` may live, in order: the spec's default destination, under
    ``$MEGACPP_ENV_HOME/src``, then the in-image path (``/opt/src/<name-with-dashes>``)."""
    from megacpp_env import layout

    out = [layout.host_checkout_dir(spec.root, source.name)]
    if environ.get("MEGACPP_ENV_HOME"):
        out.append(Path(environ["MEGACPP_ENV_HOME"]) / "src" / source.dist_dir_name)
    out.append(Path(layout.image_checkout_dir(source.name)))
    return out


def _overlay(spec: Spec | None, source: Source | None, path: Path) -> dict[str, Any] | None:
    """The overlay state of a checkout whose source has one (``megacpp_env.worktree.status``)."""
    if spec is None or source is None or not source.overlay:
        return None
    from megacpp_env import layout
    from megacpp_env.worktree.status import overlay_status

    try:
        status = overlay_status(layout.overlay_dir(spec.root, source.overlay), path)
    except (MegacppEnvError, OSError, ValueError) as exc:
        return {"name": source.overlay, "error": str(exc)}
    return {
        "name": status.name,
        "state": status.state,
        "ok": status.ok,
        "files": {f.path: f.state for f in status.files},
        "problems": list(status.problems),
    }


def inspect_one(path: Path, source: Source | None, spec: Spec | None, scrubber: Scrubber) -> dict[str, Any]:
    from megacpp_env import git
    from megacpp_env.worktree.status import checkout_state

    if not path.is_dir():
        return {"path": str(path), "source": source.name if source else None, "error": "no such directory"}
    try:
        state = checkout_state(path, pin=source.commit, name=source.name) if source else checkout_state(path)
        facts = {k: v for k, v in state.to_dict().items() if k not in DROP_KEYS}
        if state.has_git:
            facts["remotes"] = git.remote_urls(path)
    except MegacppEnvError as exc:
        facts = {"path": str(path), "source": source.name if source else None, "error": str(exc)}
    overlay = _overlay(spec, source, path)
    if overlay is not None:
        facts["overlay_status"] = overlay
    cleaned: dict[str, Any] = scrubber.clean_tree(facts)
    return cleaned


def _source_of(spec: Spec | None, path: Path) -> Source | None:
    """The spec's source a ``--paths`` checkout was cloned from (one of its remotes is the source's repo)."""
    if spec is None or not spec.sources or not (path / ".git").exists():
        return None
    from megacpp_env import git

    try:
        remotes = set(git.remote_urls(path).values())
    except MegacppEnvError:
        return None
    return next((s for s in spec.sources.values() if s.repo in remotes), None)


def _extra_key(path: Path, spec: Spec | None, taken: set[str]) -> tuple[str, Source | None]:
    """A ``--paths`` checkout, keyed by its real path, or by its source's name when it is a checkout
    of a spec source not found elsewhere (its pin and overlay are then checked too)."""
    found = _source_of(spec, path)
    if found is None or found.name in taken:
        return str(path), None
    return found.name, found


def _plan(
    spec: Spec | None, paths: Sequence[Path], environ: Mapping[str, str]
) -> list[tuple[str, Path, Source | None]]:
    """(key, real path, source) of every checkout to inspect: the spec's first, then ``--paths``."""
    out: list[tuple[str, Path, Source | None]] = []
    seen: set[str] = set()
    for source in spec.sources.values() if spec else ():
        for candidate in candidate_dirs(spec, source, environ):  # type: ignore[arg-type]
            if candidate.is_dir():
                real = os.path.realpath(candidate)
                out.append((source.name, Path(real), source))
                seen.add(real)
                break
    for path in paths:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            key, found = _extra_key(Path(real), spec, {k for k, _p, _s in out})
            out.append((key, Path(real), found))
    return out


def collect(
    spec: Spec | None,
    paths: Sequence[Path],
    environ: Mapping[str, str],
    scrubber: Scrubber,
    cache: Cache | None = None,
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """Checkouts by source name (or real path): how a path is spelled never changes the facts.
    Each checkout is inspected in its own thread (its git calls are processes: they overlap), and
    its facts are reused while its stat signature holds (``checkout_cache``)."""
    plan = _plan(spec, paths, environ)
    if not plan:
        return {}

    def one(item: tuple[str, Path, Source | None]) -> dict[str, Any]:
        key, path, source = item
        full = functools.partial(inspect_one, path, source, spec, scrubber)
        if source is not None and source.overlay:  # the overlay's own files are part of its status
            return full()
        tag = f"{key}|{source.name}@{source.commit}" if source else key
        return checkout_cache.cached(path, tag, cache, full, environ=environ, notes=notes if notes is not None else [])

    found = map_threads(one, plan, workers=MAX_PARALLEL)
    return dict(sorted(zip((key for key, _p, _s in plan), found, strict=True)))


def start(ctx: Context) -> Callable[[], dict[str, Any]]:
    return lambda: collect(ctx.spec(), ctx.opts.paths, ctx.environ, ctx.scrubber, ctx.plan.cache, ctx.notes)
