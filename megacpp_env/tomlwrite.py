"""The one TOML writer: every TOML document megacpp-env writes (PEP 751 locks, overlay manifests,
the pyproject.toml a lock resolves) is a plain value tree dumped by ``tomli-w``, never assembled
from strings. tomli-w escapes every control character (DEL included) the way TOML requires, so
whatever a string holds, the file parses back to the same value.

Deterministic: the layout is tomli-w's (keys in insertion order, literals before tables), so a
caller that builds its tree in a fixed order gets byte-identical text for equal values.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["Rfc3339", "dumps", "rfc3339"]


class Rfc3339(dt.datetime):
    """A UTC datetime that tomli-w writes in RFC 3339's ``T``/``Z`` spelling (``2026-03-19T14:22:25Z``),
    the way uv and PEP 751's examples write ``upload-time``; a plain datetime would come out as
    ``2026-03-19 14:22:25+00:00`` (valid TOML too, but a needless change of every committed lock)."""

    def __str__(self) -> str:
        return self.isoformat().replace("+00:00", "Z")


def rfc3339(text: str) -> Rfc3339:
    """``2026-03-19T14:22:25Z`` (or any ISO 8601 date-time with an offset) as an ``Rfc3339``."""
    value = dt.datetime.fromisoformat(text)
    if value.tzinfo is None:
        raise ValueError(f"not an offset date-time: {text!r}")
    value = value.astimezone(dt.UTC)
    return Rfc3339(
        value.year, value.month, value.day, value.hour, value.minute, value.second, value.microsecond, tzinfo=dt.UTC
    )


def dumps(doc: Mapping[str, Any], *, comments: Iterable[str] = ()) -> str:
    """``doc`` as TOML (tomli-w), after ``comments`` written as ``# `` lines (what made the file and
    how to remake it: comments are not values, so they are the one thing added around tomli-w)."""
    import tomli_w

    head = []
    for line in comments:
        if any(c in line for c in "\r\n") or not line.isprintable():
            raise ValueError(f"a comment line must be one printable line: {line!r}")
        head.append(f"# {line}".rstrip() + "\n")
    return "".join(head) + tomli_w.dumps(doc)
