"""vLLM's model registry, read statically: the architecture names ``_VLLM_MODELS`` maps (the dict
literals it unpacks, followed), so a sanity check can be judged against the pin without importing it."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REGISTRY = "vllm/model_executor/models/registry.py"
ROOT_NAME = "_VLLM_MODELS"


@dataclass(frozen=True, kw_only=True, slots=True)
class Registry:
    models: tuple[str, ...]
    at: str  # "vllm/model_executor/models/registry.py:745 _VLLM_MODELS"


def read_registry(project: Path) -> Registry | None:
    path = project / REGISTRY
    if not path.is_file():
        return None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    dicts: dict[str, tuple[int, ast.Dict]] = {}
    for node in tree.body:
        target, value = _assignment(node)
        if target and isinstance(value, ast.Dict):
            dicts[target] = (node.lineno, value)
    if ROOT_NAME not in dicts:
        return None
    names = _keys(ROOT_NAME, dicts, frozenset())
    return Registry(models=tuple(sorted(names)), at=f"{REGISTRY}:{dicts[ROOT_NAME][0]} {ROOT_NAME}")


def _assignment(node: ast.stmt) -> tuple[str, ast.expr | None]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id, node.value
    return "", None


def _keys(name: str, dicts: dict[str, tuple[int, ast.Dict]], seen: frozenset[str]) -> set[str]:
    if name in seen or name not in dicts:
        return set()
    out: set[str] = set()
    for key, value in zip(dicts[name][1].keys, dicts[name][1].values, strict=True):
        if key is None and isinstance(value, ast.Name):  # **OTHER
            out |= _keys(value.id, dicts, seen | {name})
        elif isinstance(key, ast.Constant) and isinstance(key.value, str):
            out.add(key.value)
    return out
