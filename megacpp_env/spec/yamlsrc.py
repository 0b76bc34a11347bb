"""YAML text -> plain Python data plus the line of every key path.

The only module that parses YAML for the spec. Aliases and merge keys are resolved; duplicate keys,
non-string keys, alias bombs and recursive aliases are refused with a SpecError naming the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from megacpp_env.errors import SpecError
from megacpp_env.spec.codes import DUPLICATE, FILE

# libyaml's parser when PyYAML was built with it (about 5x faster on stack.yaml), else the pure-Python one.
Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_NODES = 200_000
MAX_DEPTH = 64


@dataclass(frozen=True, kw_only=True, slots=True)
class Parsed:
    data: Any
    lines: dict[str, int]


def join_key(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


class _Converter:
    def __init__(self, loader: yaml.SafeLoader, file: str) -> None:
        self.loader = loader
        self.file = file
        self.lines: dict[str, int] = {}
        self.count = 0

    def error(self, node: yaml.Node, key: str, message: str, code: str = FILE) -> SpecError:
        return SpecError(message, file=self.file, line=node.start_mark.line + 1, key=key, code=code)

    def convert(self, node: yaml.Node, key: str, depth: int) -> Any:
        self.count += 1
        if self.count > MAX_NODES or depth > MAX_DEPTH:
            raise self.error(node, key, "document too large or too deeply nested (alias expansion?)")
        self.lines.setdefault(key, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, key, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.convert(item, join_key(key, i), depth + 1) for i, item in enumerate(node.value)]
        try:
            return self.loader.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError) as exc:
            raise self.error(node, key, f"invalid scalar: {exc}") from None

    def _mapping(self, node: yaml.MappingNode, key: str, depth: int) -> dict[str, Any]:
        try:
            self.loader.flatten_mapping(node)
        except yaml.YAMLError as exc:
            raise self.error(node, key, f"invalid merge key: {exc}") from None
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            k = (
                self.convert(key_node, key or "<root>", depth + 1)
                if key_node.tag != "tag:yaml.org,2002:str"
                else key_node.value
            )
            if not isinstance(k, str):
                raise self.error(key_node, key, f"keys must be strings, got {type(k).__name__} {k!r}")
            child = join_key(key, k)
            if k in out:
                raise self.error(key_node, child, "duplicate key", DUPLICATE)
            self.lines[child] = key_node.start_mark.line + 1
            out[k] = self.convert(value_node, child, depth + 1)
        return out


def parse_yaml(text: str, file: str) -> Parsed:
    try:
        loader = Loader(text)
    except yaml.reader.ReaderError as exc:
        raise SpecError(f"invalid YAML: {exc.reason} (character {exc.character!r})", file=file, code=FILE) from None
    try:
        node = _single_node(loader, file)
        conv = _Converter(loader, file)
        try:
            data = conv.convert(node, "", 0)
        except RecursionError:
            raise SpecError("document nested too deeply (recursive alias?)", file=file, code=FILE) from None
        return Parsed(data=data, lines=conv.lines)
    finally:
        loader.dispose()


def _single_node(loader: yaml.SafeLoader, file: str) -> yaml.Node:
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "parse error"
        raise SpecError(f"invalid YAML: {problem}", file=file, line=mark.line + 1 if mark else 0, code=FILE) from None
    except yaml.reader.ReaderError as exc:
        raise SpecError(f"invalid YAML: {exc.reason} (character {exc.character!r})", file=file, code=FILE) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"invalid YAML: {str(exc).splitlines()[0]}", file=file, code=FILE) from None
    except RecursionError:
        raise SpecError("invalid YAML: nested too deeply", file=file, code=FILE) from None
    if node is None:
        raise SpecError("the spec is empty", file=file, line=1, remedy="start from the shipped stack.yaml", code=FILE)
    return node
