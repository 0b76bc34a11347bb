"""Read-only views of a loaded spec for the reporting verbs (``targets``)."""

from __future__ import annotations

from typing import Any

from megacpp_env.spec.model import Spec


def target_rows(spec: Spec) -> list[dict[str, Any]]:
    """One row per target, in the spec's order: name, platforms, toolchain, CUDA, sources, description."""
    return [
        {
            "name": t.name,
            "platforms": list(t.platforms),
            "toolchain": t.toolchain.name,
            "cuda": t.toolchain.cuda,
            "sources": [s.name for s in t.sources],
            "description": t.description,
        }
        for t in spec.targets.values()
    ]
