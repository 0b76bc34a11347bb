"""The stack spec: typed, validated once. ``load_spec(path)`` is the only entry point that reads YAML."""

from __future__ import annotations

from megacpp_env.layout import PLATFORMS
from megacpp_env.spec.loader import load_spec, load_spec_text
from megacpp_env.spec.model import (
    Alignment,
    GpuSpec,
    ImageRef,
    Index,
    SanityCheck,
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
