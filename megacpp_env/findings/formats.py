"""Findings in the formats people and CI read: text lines, JSON, GitHub workflow annotations and
SARIF 2.1.0 (what GitHub code scanning uploads). Pure: each returns text.

Every string of a finding can come from a pull request (a spec value, a lock's package name): the
text and annotation formats keep each finding on its line (``errors.one_line`` escapes every
character that is not printable, and the annotation format percent-encodes what the runner would
read as the end of a command or a property); JSON and SARIF escape through ``json``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from megacpp_env import __version__
from megacpp_env.errors import one_line
from megacpp_env.findings import CodeDoc, Finding, Severity, docs_anchor

FORMATS = ("text", "json", "github", "sarif")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
HOME = "https://github.com/megacpp/megacpp-env"
_ANNOTATION = {"error": "error", "warning": "warning", "info": "notice", "note": "notice"}
_SARIF_LEVEL: dict[Severity, str] = {
    "error": "error",
    "warning": "warning",
    "info": "note",
    "note": "note",
    "ok": "none",
}


def relative(file: str, root: str) -> str:
    """``file`` relative to ``root`` (with '/'), when it lies under it; else as given."""
    if not file or not root:
        return file
    try:
        rel = os.path.relpath(Path(file).absolute(), Path(root).absolute())
    except ValueError:
        return file
    return file if rel == os.pardir or rel.startswith(os.pardir + os.sep) else PurePath(rel).as_posix()


def text_lines(findings: Iterable[Finding]) -> str:
    return "".join(f"{one_line(f.format())}\n" for f in findings)


def to_json(findings: Iterable[Finding]) -> list[dict[str, Any]]:
    return [f.to_dict() for f in findings]


# ---- GitHub workflow commands -------------------------------------------------------------------


def _data(text: str) -> str:
    return one_line(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def github(findings: Iterable[Finding], root: str = "") -> str:
    """One ``::error file=F,line=N,title=T::message`` line per finding (``notice`` for info, notes and
    suppressed ones; none for ``ok``), paths relative to ``root`` (the workspace)."""
    out = []
    for f in findings:
        level = "notice" if f.suppressed else _ANNOTATION.get(f.severity)
        if level is None:
            continue
        props = [f"file={_prop(relative(f.file, root))}"] if f.file else []
        if f.file and f.line:
            props.append(f"line={f.line}")
        title = f"{f.code} {f.key}".strip() + (" (suppressed)" if f.suppressed else "")
        props.append(f"title={_prop(title)}")
        tail = f" (reason: {f.suppressed})" if f.suppressed else f" (remedy: {f.remedy})" if f.remedy else ""
        out.append(f"::{level} {','.join(props)}::{_data(f.message + tail)}\n")
    return "".join(out)


# ---- SARIF 2.1.0 --------------------------------------------------------------------------------


def _rule(doc: CodeDoc) -> dict[str, Any]:
    text = "\n\n".join(p for p in (doc.summary, doc.doc, doc.example and f"Example:\n{doc.example}") if p)
    return {
        "id": doc.code,
        "name": doc.code,
        "shortDescription": {"text": doc.summary},
        "fullDescription": {"text": doc.doc or doc.summary},
        "help": {"text": text},
        "helpUri": f"{HOME}/blob/main/docs/CODES.md#{doc.code.lower()}",
        "defaultConfiguration": {"level": _SARIF_LEVEL[doc.severity]},
        "properties": {"family": doc.family},
    }


def _result(f: Finding, index: dict[str, int], root: str) -> dict[str, Any]:
    message = f.message + (f" (remedy: {f.remedy})" if f.remedy and not f.suppressed else "")
    out: dict[str, Any] = {
        "ruleId": f.code,
        "level": _SARIF_LEVEL[f.severity],
        "kind": "pass" if f.severity == "ok" else "fail" if f.severity in ("error", "warning") else "informational",
        "message": {"text": message},
    }
    if f.code in index:
        out["ruleIndex"] = index[f.code]
    location: dict[str, Any] = {}
    if f.file:
        physical: dict[str, Any] = {"artifactLocation": {"uri": quote(relative(f.file, root)), "uriBaseId": "SRCROOT"}}
        if f.line:
            physical["region"] = {"startLine": f.line}
        location["physicalLocation"] = physical
    if f.key:
        location["logicalLocations"] = [{"fullyQualifiedName": f.key}]
    if location:
        out["locations"] = [location]
    if f.suppressed:
        out["suppressions"] = [{"kind": "external", "status": "accepted", "justification": f.suppressed}]
    return out


def sarif(findings: Sequence[Finding], docs: Iterable[CodeDoc], root: str = "") -> dict[str, Any]:
    """A SARIF 2.1.0 log of one run: the tool, every documented code the findings use as a rule, a
    result per finding (a suppressed one with its justification), paths relative to ``root``."""
    used = {f.code for f in findings}
    rules = [_rule(d) for d in sorted(docs, key=lambda d: d.code) if d.code in used]
    index = {r["id"]: i for i, r in enumerate(rules)}
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "megacpp-env",
                "version": __version__,
                "informationUri": HOME,
                "rules": rules,
            }
        },
        "results": [_result(f, index, root) for f in findings],
        "columnKind": "unicodeCodePoints",
    }
    if root:
        run["originalUriBaseIds"] = {"SRCROOT": {"uri": _base_uri(root)}}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def _base_uri(root: str) -> str:
    """``file:///abs/root/`` (SARIF wants a base URI that ends in '/')."""
    uri = Path(root).absolute().as_uri()
    return uri if uri.endswith("/") else uri + "/"


def sarif_text(findings: Sequence[Finding], docs: Iterable[CodeDoc], root: str = "") -> str:
    return json.dumps(sarif(findings, docs, root), indent=2, sort_keys=True) + "\n"


def render(findings: Sequence[Finding], fmt: str, *, docs: Iterable[CodeDoc] = (), root: str = "") -> str:
    """``findings`` in one of ``FORMATS`` (JSON: a list of finding objects)."""
    if fmt == "github":
        return github(findings, root)
    if fmt == "sarif":
        return sarif_text(findings, docs, root)
    if fmt == "json":
        return json.dumps(to_json(findings), indent=2, sort_keys=True) + "\n"
    return text_lines(findings)


# ---- the documentation of codes (explain, docs/CODES.md) -----------------------------------------

_CODES_HEAD = """\
# Finding codes

Written by `megacpp-env explain --all --format markdown` from the registries of the check families
(tests/test_explain.py keeps this file so). `megacpp-env explain CODE` prints one.

"""


def _doc_line(d: CodeDoc) -> str:
    return f"{d.code}  {d.severity:<7}  {d.summary}\n"


def _doc_text(d: CodeDoc) -> str:
    out = [f"{d.code} ({d.severity}): {d.summary}", f"  reported by: {d.family}"]
    if d.doc:
        out.append(f"  {d.doc}")
    if d.example:
        out.append("  example: " + d.example.replace("\n", "\n    "))
    if d.silence:
        out.append(f"  silence it: {d.silence}")
    out.append(f"  docs: {docs_anchor(d.code)}")
    return "\n".join(out) + "\n\n"


def _doc_markdown(d: CodeDoc) -> str:
    out = [f"## {d.code}", "", f"**{d.summary}** ({d.severity}; {d.family})", ""]
    if d.doc:
        out += [d.doc, ""]
    if d.example:
        out += ["Example:", "", "```", d.example, "```", ""]
    if d.silence:
        out += [f"Silence it: {d.silence}", ""]
    return "\n".join(out) + "\n"


def render_docs(docs: Iterable[CodeDoc], fmt: str = "text") -> str:
    """Codes' documentation: ``text`` (explain), ``markdown`` (docs/CODES.md), ``list`` (one line each),
    ``json``."""
    docs = list(docs)
    if fmt == "json":
        return json.dumps([d.to_dict() for d in docs], indent=2, sort_keys=True) + "\n"
    if fmt == "markdown":
        return _CODES_HEAD + "".join(_doc_markdown(d) for d in docs)
    return "".join((_doc_line if fmt == "list" else _doc_text)(d) for d in docs)
