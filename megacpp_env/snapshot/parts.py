"""``Parts``: a collector's result split into hashed ``facts`` and unhashed ``live`` readings.

A module of its own because the collectors return it and ``registry`` (which loads the collectors
through importlib) and ``collect`` read it: defined in ``registry`` it made a circle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class Parts:
    """A collector's result in two parts: ``facts`` (hashed when the area is) and ``live``."""

    facts: Any
    live: Any
