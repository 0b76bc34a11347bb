"""``Probe``: what the probe of the inspected interpreter printed, parsed. Its own module:
``snapshot.context`` (which every collector sees) and ``python_env`` (which runs the probe) both
need it, and neither may import the other."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class Probe:
    """What the probe printed, parsed."""

    data: Mapping[str, Any]
    seconds: float = 0.0

    @property
    def site_dirs(self) -> list[str]:
        seen: list[str] = []
        for p in (self.data.get("purelib"), self.data.get("platlib"), *self.data.get("sys_path", [])):
            if p and p not in seen and Path(p).is_dir():
                seen.append(str(p))
        return seen

    @property
    def scripts(self) -> str:
        return str(self.data.get("scripts") or "")
