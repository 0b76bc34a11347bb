"""The JSON Schema of stack.yaml, generated from the spec model, for editors (yaml-language-server
validates and completes with it) and other tools. The loader stays the authority: its errors name
the line and the remedy, and it checks what a schema cannot (references between sections, versions,
URLs, unsafe characters).

Where it comes from: every mapping's keys and required keys are the loader's (``TOP_KEYS``,
``SOURCE_KEYS``, ``..._REQUIRED``); every value's type is the model field's annotation of the same
name (``str``, ``bool``, ``int``, ``float``, ``tuple[str, ...]``, ``Mapping[str, str]``, a nested
record, ``Literal``); enumerations are the model's and the catalog's (``FEATURES``, ``PLATFORMS``,
``PATCHES``). ``YAML_SHAPES`` holds only the keys whose YAML form is not the model field's (a name
that references another section, ``cuda`` as a string or a mapping); a key the loader allows that
has neither makes generation fail, so the schema cannot fall behind the loader silently.
``megacpp_env/schemas/stack.schema.json`` is this output (tests/test_spec_schema.py keeps it so).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import itertools
import json
import re
import textwrap
import types
from collections.abc import Mapping
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from megacpp_env.layout import PLATFORMS
from megacpp_env.runtime.catalog import PATCHES
from megacpp_env.sanity import SanityCheck
from megacpp_env.spec import fields as F
from megacpp_env.spec import loader as L
from megacpp_env.spec import model as M

SCHEMA_ID = "https://github.com/megacpp/megacpp-env/raw/main/megacpp_env/schemas/stack.schema.json"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
SKIP = frozenset({"name", "path", "lines"})  # the mapping key, the file and its line table: not YAML keys

# Records whose YAML keys differ from their fields: the loader's allowed and required keys.
SECTIONS: dict[type, tuple[tuple[str, ...], tuple[str, ...]]] = {
    M.Index: (L.INDEX_KEYS, L.INDEX_REQUIRED),
    M.Toolchain: (L.TOOLCHAIN_KEYS, L.TOOLCHAIN_REQUIRED),
    M.Source: (L.SOURCE_KEYS, L.SOURCE_REQUIRED),
    M.ArtifactSet: (L.ARTIFACT_KEYS, L.ARTIFACT_REQUIRED),
    M.Target: (L.TARGET_KEYS, L.TARGET_REQUIRED),
    M.Spec: (L.TOP_KEYS, L.TOP_REQUIRED),
}


def _pattern(regex: re.Pattern[str]) -> dict[str, Any]:
    return {"type": "string", "pattern": f"^(?:{regex.pattern})$"}


def _strings(**item: Any) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string", **item}}


def _named(ref: str, names: re.Pattern[str], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "propertyNames": _pattern(names), "additionalProperties": {"$ref": ref}, **extra}


def _env() -> dict[str, Any]:
    return {"type": "object", "propertyNames": _pattern(F.ENV_NAME_RE), "additionalProperties": {"type": "string"}}


def _version() -> dict[str, Any]:
    return {"type": "string", "pattern": f"^(?:{F.VERSION_PATTERN})$"}


def _specifier() -> dict[str, Any]:
    return {"type": "string", "pattern": f"^(?:{F.SPECIFIER_PATTERN})$"}


def _requirements() -> dict[str, Any]:
    return _strings(pattern=f"^(?:{F.REQUIREMENT_PATTERN})$")


def _url(*schemes: str) -> dict[str, Any]:
    """A URL of ``schemes`` (JSON Schema's ``uri`` format, and the loader's pattern)."""
    pattern = F.URL_PATTERN.replace("(?:https?|git|ssh|file)", f"(?:{'|'.join(schemes)})")
    return {"type": "string", "format": "uri", "pattern": f"^{pattern}$"}


def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstrings of a record (the string right after a field), whitespace folded: the
    model's own documentation of each field."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    out: dict[str, str] = {}
    for field, doc in itertools.pairwise(body):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(doc, ast.Expr)
            and isinstance(doc.value, ast.Constant)
            and isinstance(doc.value.value, str)
        ):
            out[field.target.id] = " ".join(doc.value.value.split())
    return out


# YAML keys documented by a model field of another name
YAML_FIELDS: dict[tuple[type, str], str] = {
    (M.Target, "base_image"): "base_images",
    (M.Target, "sanity"): "source_sanity",
}


def _yaml_shapes() -> dict[tuple[type, str], dict[str, Any]]:
    """The keys whose YAML form is not their model field's type, or that have a format to check."""
    tc = field_docs(M.Toolchain)
    target = field_docs(M.Target)
    cuda = {
        "type": "object",
        "properties": {
            "version": {**_version(), "description": "The CUDA release the wheels are of (13 or later)."},
            "pypi": {**_requirements(), "minItems": 1, "description": tc["cuda_pypi"]},
        },
        "required": list(L.CUDA_KEYS),
        "additionalProperties": False,
    }
    per_platform = {
        "type": "object",
        "propertyNames": {"enum": list(PLATFORMS)},
        "additionalProperties": {"type": "string"},
    }
    return {
        (M.Spec, "schema_version"): {"const": M.SCHEMA_VERSION},
        (M.Spec, "project"): _pattern(F.SLUG_RE),
        (M.Spec, "indexes"): _named("#/$defs/Index", F.SLUG_RE),
        (M.Spec, "toolchains"): _named("#/$defs/Toolchain", F.SLUG_RE),
        (M.Spec, "sources"): _named("#/$defs/Source", F.NAME_RE),
        (M.Spec, "artifacts"): _named("#/$defs/ArtifactSet", F.NAME_RE),
        (M.Spec, "targets"): _named("#/$defs/Target", F.NAME_RE, minProperties=1),
        (M.Toolchain, "cuda"): {"oneOf": [_version(), cuda]},
        **{(M.Toolchain, k): _version() for k in ("gcc", "python", "uv", "ptx_isa", "min_driver")},
        **{(M.Toolchain, k): _specifier() for k in ("cudnn", "cutlass", "tensorrt_llm")},
        (M.Index, "url"): _url("https", "http", "file"),
        (M.ArtifactSet, "url"): _url("https", "http", "file"),
        (M.Source, "repo"): {"type": "string", "pattern": f"^(?:{F.URL_PATTERN}|{F.SCP_URL_RE.pattern})$"},
        (M.Source, "extra_requirements"): _requirements(),
        (M.Target, "requirements"): _requirements(),
        (M.Override, "requirement"): {"type": "string", "pattern": f"^(?:{F.REQUIREMENT_PATTERN})$"},
        (M.Source, "commit"): _pattern(F.COMMIT_RE),
        (M.Target, "platforms"): {**_strings(enum=list(PLATFORMS)), "minItems": 1},
        (M.Target, "base_image"): {"oneOf": [{"type": "string"}, per_platform]},
        (M.Target, "toolchain"): {"type": "string", "description": "a name under toolchains"},
        (M.Target, "sources"): _strings(description="a name under sources"),
        (M.Target, "features"): _strings(enum=list(M.FEATURES)),
        (M.Target, "runtime_patches"): _strings(enum=sorted(PATCHES)),
        (M.Target, "env"): {
            "type": "object",
            "properties": {
                "build": {**_env(), "description": target["build_env"]},
                "runtime": {**_env(), "description": target["runtime_env"]},
                "sources": {
                    "type": "object",
                    "additionalProperties": _env(),
                    "description": target["source_env"],
                },
            },
            "additionalProperties": False,
            "description": "The target's environments: build (every source build), runtime (the image at run "
            "time), sources (one source's build).",
        },
        (M.Target, "sanity"): {"type": "object", "additionalProperties": {"$ref": "#/$defs/SanityCheck"}},
        (M.GpuSpec, "archs"): {**_strings(pattern=f"^(?:{F.SM_ARCH_RE.pattern})$"), "minItems": 1},
    }


def _type(hint: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of one annotation."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]
        return _type(inner, defs)
    if origin is Literal:
        return {"enum": list(args)}
    if origin is tuple:
        return {"type": "array", "items": _type(args[0], defs)}
    if origin is Mapping or origin is dict:
        return {"type": "object", "additionalProperties": _type(args[1], defs)}
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        _record(hint, defs)
        return {"$ref": f"#/$defs/{hint.__name__}"}
    simple = {str: "string", bool: "boolean", int: "integer", float: "number"}
    if hint in simple:
        return {"type": simple[hint]}
    raise TypeError(f"no JSON Schema for the annotation {hint!r}")


def _record(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    """The schema of one record: its YAML keys (the loader's, or its fields), each value's type."""
    name = cls.__name__
    if name in defs:
        return dict(defs[name])
    defs[name] = {}  # a placeholder against recursion
    hints = get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in SKIP}
    if cls in SECTIONS:
        keys, required = SECTIONS[cls]
    else:
        keys = tuple(fields)
        missing = dataclasses.MISSING
        required = tuple(n for n, f in fields.items() if f.default is missing and f.default_factory is missing)
    shapes = _yaml_shapes()
    docs = field_docs(cls)
    properties: dict[str, Any] = {}
    for key in keys:
        if (cls, key) in shapes:
            properties[key] = dict(shapes[cls, key])
        elif key in fields:
            properties[key] = _type(hints[key], defs)
        else:
            raise TypeError(f"{name}: the loader allows {key!r}, which has no model field and no YAML shape")
        doc = docs.get(YAML_FIELDS.get((cls, key), key)) or properties[key].get("description")
        if not doc:  # every key an editor completes says what it is: the model documents each field
            raise TypeError(f"{name}.{key}: no attribute docstring in the model (write one under the field)")
        properties[key]["description"] = doc
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = list(required)
    doc = (cls.__doc__ or "").strip().split("\n", 1)[0]
    if doc and not doc.startswith(f"{name}("):  # dataclass's generated signature is no description
        out["description"] = doc
    defs[name] = out
    return out


def stack_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of stack.yaml."""
    defs: dict[str, Any] = {}
    for cls in (*SECTIONS, SanityCheck):  # the records YAML_SHAPES name by $ref, and what they hold
        _record(cls, defs)
    root = defs["Spec"]
    del defs["Spec"]
    return {
        "$schema": DRAFT,
        "$id": SCHEMA_ID,
        "title": "megacpp-env stack.yaml",
        "description": "Generated from megacpp_env.spec (model and loader) by `megacpp-env schema`; do not edit.",
        **root,
        "$defs": dict(sorted(defs.items())),
    }


def render_schema() -> str:
    """The schema as the shipped file holds it: sorted keys, two-space indent, a final newline."""
    return json.dumps(stack_schema(), indent=2, sort_keys=True) + "\n"
