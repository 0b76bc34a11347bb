"""Source checkouts: every source of the spec that is checked out where megacpp-env puts it, plus
``--paths``. Uses ``megacpp_env.checkout.inspect_checkout`` (all git calls go through
``megacpp_env.git``). A tree without ``.git`` is recorded as such; ``diff``/``doctor`` make it a finding.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.errors import MegacppEnvError
from megacpp_env.snapshot.envvars import Scrubber

if TYPE_CHECKING:
    from megacpp_env.spec.model import Source, Spec

DROP_KEYS = ("provenance",)  # names the tool version that made the checkout: noise for the digest


def candidate_dirs(spec: Spec, source: Source, environ: Mapping[str, str]) -> list[Path]:
    """Where a checkout of ``source`` may live, in order: the spec's default destination, under
    ``$MEGACPP_ENV_HOME/src``, then the in-image path (``/opt/src/<name-with-dashes>``)."""
    from megacpp_env import layout
    from megacpp_env.checkout import default_dest

    out = [default_dest(spec.root, source)]
    if environ.get("MEGACPP_ENV_HOME"):
        out.append(Path(environ["MEGACPP_ENV_HOME"]) / "src" / source.dist_dir_name)
    out.append(Path(layout.image_checkout_dir(source.name)))
    return out


def _overlay(spec: Spec | None, source: Source | None, path: Path) -> dict[str, Any] | None:
    """The overlay state of a checkout whose source has one (``megacpp_env.overlay``)."""
    if spec is None or source is None or not source.overlay:
        return None
    from megacpp_env import layout, overlay

    try:
        status = overlay.overlay_status(layout.overlay_dir(spec.root, source.overlay), path)
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
    from megacpp_env.checkout import inspect_checkout

    if not path.is_dir():
        return {"path": str(path), "source": source.name if source else None, "error": "no such directory"}
    try:
        state = inspect_checkout(path, source)
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


def collect(spec: Spec | None, paths: Sequence[Path], environ: Mapping[str, str], scrubber: Scrubber) -> dict[str, Any]:
    out: dict[str, Any] = {}
    seen: set[str] = set()
    for source in spec.sources.values() if spec else ():
        for candidate in candidate_dirs(spec, source, environ):  # type: ignore[arg-type]
            if candidate.is_dir():
                out[source.name] = inspect_one(candidate, source, spec, scrubber)
                seen.add(os.path.realpath(candidate))
                break
    for path in paths:
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        out[str(path)] = inspect_one(Path(path), None, spec, scrubber)
    return dict(sorted(out.items()))
