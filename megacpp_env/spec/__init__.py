"""The stack spec: typed, validated once. ``load_spec(path)`` is the only entry point that reads YAML.

The names below are loaded when first used (PEP 562): ``megacpp_env.spec.discover``, which finds
the spec file, imports this package, and a command run where there is no spec (``snapshot`` on a
bare machine) never pays for the loader and the model (YAML, the typed model).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from megacpp_env.layout import PLATFORMS
    from megacpp_env.sanity import SanityCheck
    from megacpp_env.spec.loader import load_spec, load_spec_text
    from megacpp_env.spec.model import (
        Alignment,
        GpuSpec,
        ImageRef,
        Index,
        Serving,
        SnapshotConfig,
        Source,
        Spec,
        Target,
        Toolchain,
    )

__all__ = [
    "PLATFORMS",
    "Alignment",
    "GpuSpec",
    "ImageRef",
    "Index",
    "SanityCheck",
    "Serving",
    "SnapshotConfig",
    "Source",
    "Spec",
    "Target",
    "Toolchain",
    "load_spec",
    "load_spec_text",
]

_HOME = {"PLATFORMS": "megacpp_env.layout", "load_spec": "megacpp_env.spec.loader",
         "load_spec_text": "megacpp_env.spec.loader", "SanityCheck": "megacpp_env.sanity"}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME.get(name, "megacpp_env.spec.model")), name)
    globals()[name] = value
    return value
