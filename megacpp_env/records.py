"""Typed records at file boundaries: one validating reader with a context path, and ``to_dict``
derived from a record's fields.

Every file megacpp-env reads (PEP 751 locks, overlay manifests and journals, checkout provenance
records, snapshot documents, ``locks/ACKNOWLEDGED.toml``) is parsed once (tomllib or json) and then
read through a ``Table``. Each accessor checks the type of one key; a wrong one raises the format's
error class (a ``FormatError``) naming the file and the key path, e.g.
``locks/x.toml: packages[3].wheels[0].hashes: expected a table, got a string`` -- the context chain
``packaging.pylock`` gives its ``PylockValidationError``.

Records are ``@dataclass(frozen=True, kw_only=True, slots=True)`` with ``from_dict``/``to_dict``;
``as_dict`` derives ``to_dict`` from the fields (``renamed``/``HIDDEN`` field metadata), and a record
whose ``to_dict`` is just that subclasses ``Record``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from megacpp_env.chars import dangerous_char, describe_char
from megacpp_env.errors import FormatError, InputError
from megacpp_env.fsutil import read_bounded

HIDDEN = {"dump": False}  # field(metadata=HIDDEN): not part of to_dict
R = TypeVar("R")
_MISSING: Any = object()
_NAMES = {
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    list: "an array",
    dict: "a table",
    type(None): "null",
}


def renamed(key: str) -> dict[str, str]:
    """``field(metadata=renamed("schema-version"))``: the key ``as_dict`` writes for this field."""
    return {"key": key}


def join(path: str, key: str | int) -> str:
    """``join("packages[3]", "wheels")`` -> ``packages[3].wheels``; an int key is an index."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def kind_of(value: object) -> str:
    for kind, name in _NAMES.items():
        if type(value) is kind or (kind is dict and isinstance(value, Mapping)):
            return name
    return type(value).__name__


@dataclass(frozen=True, slots=True)
class Table:
    """One table of a parsed document and where it is (file + key path). Accessors return typed
    values or raise ``error`` (``FILE: PATH.KEY: expected ..., got ...``)."""

    data: Mapping[str, Any]
    file: str
    path: str = ""
    error: type[FormatError] = FormatError

    @classmethod
    def root(cls, data: object, file: str, error: type[FormatError] = FormatError) -> Table:
        if not isinstance(data, Mapping):
            raise error(f"expected a table at the top, got {kind_of(data)}", file=file)
        return cls(data, file, "", error)

    def where(self, key: str | int | None = None) -> str:
        return self.path if key is None else join(self.path, key)

    def fail(self, message: str, key: str | int | None = None, *, remedy: str = "") -> NoReturn:
        raise self.error(message, file=self.file, key=self.where(key), remedy=remedy)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def _get(self, key: str, kind: type | tuple[type, ...], what: str, default: Any) -> Any:
        value = self.data.get(key)
        if value is None:
            if default is _MISSING:
                self.fail(f"missing (expected {what})", key)
            return default
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
            self.fail(f"expected {what}, got {kind_of(value)}", key)
        return value

    def _safe(self, value: str, where: str) -> str:
        """No string read from a file may hold a character that breaks out of a line or hides text
        (``megacpp_env.chars``): values reach requirements exports, Dockerfiles and markdown."""
        ch = dangerous_char(value)
        if ch is not None:
            raise self.error(f"control character {describe_char(ch)} in {value[:40]!r}", file=self.file, key=where)
        return value

    def text(self, key: str, default: Any = _MISSING, *, nonempty: bool = False, verbatim: bool = False) -> str:
        """A string; ``verbatim``: any character (as ``texts``)."""
        value: str = self._get(key, str, "a string", default)
        if nonempty and not value.strip():
            self.fail("expected a non-empty string", key)
        return self._safe(value, self.where(key)) if value is not default and not verbatim else value

    def opt_text(self, key: str) -> str | None:
        value: str | None = self._get(key, str, "a string", None)
        return None if value is None else self._safe(value, self.where(key))

    def flag(self, key: str, default: Any = _MISSING) -> bool:
        value: bool = self._get(key, bool, "a boolean", default)
        return value

    def number(self, key: str, default: Any = _MISSING) -> int:
        value: int = self._get(key, int, "an integer", default)
        return value

    def texts(self, key: str, default: Any = (), *, verbatim: bool = False) -> tuple[str, ...]:
        """An array of strings; ``verbatim``: any character (the arguments of a command line, where a
        ``python -c`` script holds newlines: never written into a line-based file, shown escaped)."""
        items: list[Any] = self._get(key, list, "an array of strings", default)
        for i, item in enumerate(items):
            where = join(self.where(key), i)
            if not isinstance(item, str):
                raise self.error(f"expected a string, got {kind_of(item)}", file=self.file, key=where)
            if not verbatim:
                self._safe(item, where)
        return tuple(items)

    def text_map(self, key: str) -> dict[str, str]:
        table = self.table(key, default=None)
        if table is None:
            return {}
        return {table._safe(k, table.where(k)): table.text(k) for k in table.data}

    def table(self, key: str, default: Any = _MISSING) -> Table:
        value: Mapping[str, Any] | None = self._get(key, Mapping, "a table", default)
        if value is None:
            return default  # type: ignore[no-any-return]
        return Table(value, self.file, self.where(key), self.error)

    def opt_table(self, key: str) -> Table | None:
        return self.table(key, default=None)

    def tables(self, key: str, default: Any = ()) -> list[Table]:
        items: list[Any] = self._get(key, list, "an array of tables", default)
        out = []
        for i, item in enumerate(items):
            where = join(self.where(key), i)
            if not isinstance(item, Mapping):
                raise self.error(f"expected a table, got {kind_of(item)}", file=self.file, key=where)
            out.append(Table(item, self.file, where, self.error))
        return out

    def only(self, allowed: Collection[str]) -> None:
        """Refuse keys a format does not define (a typo must not be ignored)."""
        unknown = sorted(set(self.data) - set(allowed))
        if unknown:
            self.fail(f"unknown key(s): {', '.join(unknown)} (known: {', '.join(sorted(allowed))})")


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def read_text(path: Path, error: type[FormatError] = FormatError) -> str:
    """The UTF-8 text of a document (a BOM is allowed), bounded in size (``fsutil.read_bounded``);
    FileNotFoundError passes through (callers decide what absence means), anything else unreadable
    is ``error`` naming the file."""
    try:
        data = read_bounded(Path(path))
    except InputError as exc:
        raise error(exc.detail, file=str(path)) from None
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(path) from None
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})", file=str(path)) from None


def parse_toml(text: str, file: str, error: type[FormatError] = FormatError) -> dict[str, Any]:
    """tomllib, with a malformed or absurdly nested document as ``error`` (tomllib recurses per level)."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"not valid TOML: {exc}", file=file) from None
    except RecursionError:
        raise error("not valid TOML: nested too deeply", file=file) from None


def read_toml(path: Path, error: type[FormatError] = FormatError) -> dict[str, Any]:
    """Read (bounded, UTF-8, BOM allowed) and parse a TOML document; FileNotFoundError passes through."""
    return parse_toml(read_text(path, error), str(path), error)


def json_object(data: str | bytes, what: str, error: Callable[[str], Exception], *, remedy: str = "") -> dict[str, Any]:
    """``data`` as a JSON object; ``error(message)`` (``what`` first, ``remedy`` last) when it is not
    JSON, is nested too deeply for the parser, or is not an object."""
    tail = f" (remedy: {remedy})" if remedy else ""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise error(f"{what}: not JSON ({exc}){tail}") from None
    except RecursionError:
        raise error(f"{what}: JSON nested too deeply{tail}") from None
    if not isinstance(doc, dict):
        raise error(f"{what}: expected a JSON object{tail}")
    return doc


def read_json(path: Path, error: type[FormatError] = FormatError) -> Table:
    """Parse a JSON document once; FileNotFoundError passes through (callers decide what absence means)."""
    try:
        data = json.loads(read_text(path, error))
    except (ValueError, RecursionError) as exc:
        raise error(f"not valid JSON: {str(exc).splitlines()[0]}", file=str(path)) from None
    return Table.root(data, str(path), error)


def read_document(path: Path, read: Callable[[Table], R], error: type[FormatError], what: str) -> R:
    """``read`` over the JSON document at ``path``: a missing or unreadable file is an ``error`` naming
    it as ``what`` (a snapshot, a capture document)."""
    try:
        return read(read_json(path, error))
    except FileNotFoundError:
        raise error(f"no such {what}", file=str(path)) from None
    except OSError as exc:
        raise error(f"unreadable {what}: {exc.strerror or exc}", file=str(path)) from None


def plain(value: Any) -> Any:
    """A JSON-able copy: records through their ``to_dict``, tuples as lists, mappings as dicts."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        return to_dict() if callable(to_dict) else as_dict(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | frozenset | set):
        items = [plain(v) for v in value]
        return sorted(items) if isinstance(value, frozenset | set) else items
    return value


def as_dict(record: Any) -> dict[str, Any]:
    """``to_dict`` derived from a record's fields, in field order. A field's metadata may rename its
    key (``renamed(...)``) or leave it out (``HIDDEN``)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        if f.metadata.get("dump", True):
            out[f.metadata.get("key", f.name)] = plain(getattr(record, f.name))
    return out


class Record:
    """A record whose ``to_dict`` is its fields (``as_dict``): a frozen dataclass subclasses it instead of
    writing that method again."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self)
