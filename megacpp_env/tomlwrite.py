"""The one TOML writer: every TOML document megacpp-env writes (PEP 751 locks, overlay manifests,
the pyproject.toml a lock resolves, the facts files) is a plain value tree dumped through
``tomli-w``, never assembled from strings. tomli-w escapes every control character (DEL included)
the way TOML requires, so whatever a string holds, the file parses back to the same value.

Deterministic: the layout is tomli-w's (keys in insertion order, literals before tables), so a
caller that builds its tree in a fixed order gets byte-identical text for equal values.

``dumps_compact`` is the facts files' layout of the same values: a short array of scalars on one
line (tomli-w puts every item on a line of its own) and every table, array-of-tables entry
included, under its own header. Each key and each value in it is still written by tomli-w."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["Rfc3339", "dumps", "dumps_compact", "rfc3339"]


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

    return _comments(comments) + tomli_w.dumps(doc)


def _comments(comments: Iterable[str]) -> str:
    head = []
    for line in comments:
        if any(c in line for c in "\r\n") or not line.isprintable():
            raise ValueError(f"a comment line must be one printable line: {line!r}")
        head.append(f"# {line}".rstrip() + "\n")
    return "".join(head)


# ---- the compact layout (facts files) ------------------------------------------------------------

ONE_LINE = 100  # an array of scalars longer than this goes one item a line (tomli-w's own limit)


def dumps_compact(doc: Mapping[str, Any], *, comments: Iterable[str] = ()) -> str:
    """``doc`` in the compact layout, after ``comments`` (as ``dumps``). Tables are mappings, arrays
    of tables non-empty lists of mappings; every other value is a scalar or an array of scalars."""
    lines: list[str] = []
    _table(lines, doc, ())
    return _comments(comments) + "\n".join(lines).rstrip("\n") + "\n"


def _key(name: str) -> str:
    import tomli_w

    return tomli_w.dumps({name: 0}).removesuffix(" = 0\n")


def _value(value: Any) -> str:
    if isinstance(value, Mapping):
        raise TypeError("a table inside an array of scalars cannot be written in the compact layout")
    if isinstance(value, (list, tuple)):
        items = [_value(v) for v in value]
        one = f"[{', '.join(items)}]"
        return one if len(one) <= ONE_LINE or not items else "[\n" + "".join(f"    {i},\n" for i in items) + "]"
    import tomli_w

    return tomli_w.dumps({"v": value}).removeprefix("v = ").removesuffix("\n")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _table(lines: list[str], table: Mapping[str, Any], path: tuple[str, ...]) -> None:
    nested: list[tuple[str, Any]] = []
    for name, value in table.items():
        if isinstance(value, Mapping) or _is_table_array(value):
            nested.append((name, value))
        else:
            lines.append(f"{_key(name)} = {_value(value)}")
    for name, value in nested:
        child = (*path, _key(name))
        header = ".".join(child)
        for item in [value] if isinstance(value, Mapping) else value:
            lines += ["", f"[{header}]" if item is value else f"[[{header}]]"]
            _table(lines, item, child)
