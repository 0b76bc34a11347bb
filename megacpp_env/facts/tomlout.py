"""A small, deterministic TOML writer for the facts files (tomli-w is not a dependency).

It writes what ``SourceFacts.to_dict`` produces: tables (dicts), arrays of tables (lists of dicts),
strings, booleans, integers and arrays of scalars. Keys keep the order the caller gives; strings are
TOML basic strings (JSON escapes are valid TOML escapes; DEL is escaped as TOML requires).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def key(name: str) -> str:
    return name if _BARE.match(name) else string(name)


def string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return string(value)
    if isinstance(value, (list, tuple)):
        return array(value)
    raise TypeError(f"cannot write {type(value).__name__} as a TOML scalar")


def array(items: Sequence[Any]) -> str:
    if not items:
        return "[]"
    inner = [scalar(i) for i in items]
    one = "[" + ", ".join(inner) + "]"
    if len(one) <= 100:
        return one
    return "[\n" + "".join(f"    {i},\n" for i in inner) + "]"


def _is_table_array(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(v, Mapping) for v in value)


def dumps(doc: Mapping[str, Any], *, header: str = "") -> str:
    lines = [f"# {h}" if h else "#" for h in header.splitlines()] if header else []
    _table(lines, doc, ())
    return "\n".join(lines).rstrip("\n") + "\n"


def _table(lines: list[str], table: Mapping[str, Any], path: tuple[str, ...]) -> None:
    nested: list[tuple[str, Any]] = []
    for name, value in table.items():
        if isinstance(value, Mapping) or _is_table_array(value):
            nested.append((name, value))
        else:
            lines.append(f"{key(name)} = {scalar(value)}")
    for name, value in nested:
        child = (*path, key(name))
        if isinstance(value, Mapping):
            lines += ["", f"[{'.'.join(child)}]"]
            _table(lines, value, child)
        else:
            for item in value:
                lines += ["", f"[[{'.'.join(child)}]]"]
                _table(lines, item, child)
