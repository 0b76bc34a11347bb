"""The published JSON Schema of the snapshot document, made from the collector registrations.

Each registered area has its fragment, ``snapshot/schema/<area>.json``: ``facts`` (the schema of what a
hashed area records; its ``description`` is the area's), ``live`` (its readings under the document's
``live``, or the whole area when it is not hashed) and ``defs`` (more ``$defs`` it refers to). They
are put into ``snapshot/schema/document.json`` (the document around the areas: ``host``, ``timing``,
``live.cache``, the ``failed`` area) in the registry's order; an area whose registration reads older
documents without it (``older="note"``) is not required. ``scripts/snapshot_docs.py`` writes the
result to ``megacpp_env/schemas/snapshot.schema.json`` (``snapshot --schema`` prints that file) and
docs/SNAPSHOT.md's field reference from it; tests/test_snapshot_schema.py fails while it is stale.
Standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from megacpp_env.snapshot import registry

FRAGMENTS = Path(__file__).resolve().parent / "schema"
DOCUMENT = "document"  # snapshot/schema/document.json: everything but the areas
FAILED = {"$ref": "#/$defs/failed"}


def fragment(area: str, directory: Path = FRAGMENTS) -> dict[str, Any]:
    """The schema fragment of ``area`` (``snapshot/schema/<area>.json``)."""
    path = directory / f"{area}.json"
    try:
        found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"snapshot area {area!r} has no schema fragment {path}: write one") from None
    return found


def build(directory: Path = FRAGMENTS) -> dict[str, Any]:
    """The whole schema: the document with every registered area's fragment in place."""
    doc = fragment(DOCUMENT, directory)
    facts, live = doc["properties"]["facts"], doc["properties"]["live"]
    defs: dict[str, Any] = dict(doc["$defs"])
    live_parts: dict[str, Any] = {}
    for c in registry.collectors():
        part = fragment(c.area, directory)
        if c.hashed != ("facts" in part):
            raise ValueError(f"snapshot area {c.area!r}: its fragment's facts must be there exactly when it is hashed")
        if "facts" in part:
            description = part["facts"].get("description", "")
            facts["properties"][c.area] = {"anyOf": [FAILED, {"$ref": f"#/$defs/{c.area}"}], "description": description}
            if c.older != "note":
                facts["required"].append(c.area)
            defs[c.area] = part["facts"]
        defs.update(part.get("defs") or {})
        if "live" in part:
            live_parts[c.area] = part["live"]
    live["properties"] = {**live_parts, **live["properties"]}  # the areas', then the document's own (cache)
    doc["$defs"] = defs
    return doc


def render(directory: Path = FRAGMENTS) -> str:
    """The schema's text, as published (``megacpp_env/schemas/snapshot.schema.json``)."""
    return json.dumps(build(directory), indent=2, ensure_ascii=False) + "\n"
