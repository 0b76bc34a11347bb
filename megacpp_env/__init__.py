"""megacpp-env: one spec for the MegaCpp stack, rendered, locked, built and fingerprinted."""

from __future__ import annotations

__version__ = "0.1.0"
