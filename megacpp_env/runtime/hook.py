"""The import hook the .pth line loads when at least one gate is on: ``install()`` puts the
finders of ``finders`` on ``sys.meta_path`` and arms every patch of ``patches`` whose gate is on.
Neither mechanism writes to disk (see ``finders``). Stdlib only.
"""

from __future__ import annotations

import sys

from megacpp_env.runtime import enabled, patches
from megacpp_env.runtime.catalog import PATCHES
from megacpp_env.runtime.finders import POST_IMPORT, SHADOWS, STATE, record


def install() -> None:
    """Arm every patch whose gate is on (called by the .pth line). Idempotent."""
    for finder in (SHADOWS, POST_IMPORT):
        if finder not in sys.meta_path:
            sys.meta_path.insert(0, finder)
    for name in PATCHES:
        if not enabled(name) or name in STATE:
            continue
        try:
            patches.ARMERS[name]()
        except Exception as exc:
            record(name, "error", f"{type(exc).__name__}: {exc}")
