"""Pinned checkouts as files on disk, read-only: their provenance records, overlay manifests and
journals (one typed reader and writer per format), and what a checkout or an overlay on it is now
(``status``). Used by the pipeline (``checkout``, ``overlay``) and by ``snapshot``, which must not
import the pipeline. Only ``git`` below it; no spec: callers pass the pin they compare with.
"""

from __future__ import annotations
