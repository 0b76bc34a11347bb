"""The one TOML writer (tomli-w): every string survives, control characters and DEL included,
and no module of the tool assembles TOML from strings any more."""

from __future__ import annotations

import ast
import datetime as dt
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from megacpp_env.facts.store import read_facts, render_facts
from megacpp_env.tomlwrite import dumps, dumps_compact, rfc3339

PACKAGE = Path(__file__).resolve().parent.parent / "megacpp_env"
FACTS = PACKAGE.parent / "facts"
CONTROL = "".join(chr(c) for c in range(0x20)) + "\x7f"


def test_every_control_character_and_del_round_trip():
    doc = {"all": CONTROL, "each": [chr(c) for c in (*range(0x20), 0x7F)], "t": {"k": 'q"b\\' + CONTROL}}
    text = dumps(doc)
    assert "\x7f" not in text and "\x00" not in text  # escaped, not written raw
    assert tomllib.loads(text) == doc


def test_json_escaping_was_not_toml():
    """Why json.dumps is no TOML escaper: it leaves DEL raw, which TOML forbids in a basic string."""
    import json

    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(f"k = {json.dumps('a' + chr(0x7F), ensure_ascii=False)}\n")
    assert tomllib.loads(dumps({"k": "a\x7f"})) == {"k": "a\x7f"}


@given(st.dictionaries(st.text(min_size=1), st.text() | st.lists(st.text(), max_size=3), max_size=5))
def test_any_text_round_trips(doc):
    assert tomllib.loads(dumps(doc)) == doc


def test_comments_come_first_and_must_be_one_line():
    assert dumps({"a": 1}, comments=["made by x", ""]) == "# made by x\n#\na = 1\n"
    for bad in ("two\nlines", "cr\r", "del\x7f"):
        with pytest.raises(ValueError, match="one printable line"):
            dumps({}, comments=[bad])


def test_rfc3339_keeps_the_t_z_spelling():
    text = dumps({"upload-time": rfc3339("2026-03-19T14:22:25Z")})
    assert text == "upload-time = 2026-03-19T14:22:25Z\n"
    assert tomllib.loads(text)["upload-time"] == dt.datetime(2026, 3, 19, 14, 22, 25, tzinfo=dt.UTC)
    assert str(rfc3339("2026-03-19T16:22:25.5+02:00")) == "2026-03-19T14:22:25.500000Z"
    with pytest.raises(ValueError, match="offset"):
        rfc3339("2026-03-19T14:22:25")


def _writes_toml_by_hand(tree: ast.AST) -> list[str]:
    """String constants that look like TOML being assembled: table headers, `key = {` and
    `x = [` fragments in f-strings or joined lists. A constant a comparison reads (``line ==
    "[[packages]]"``: finding an entry's line, not writing one) is not assembling."""
    docstrings = {
        id(body[0].value)
        for node in ast.walk(tree)
        if (body := getattr(node, "body", None)) and isinstance(body, list) and isinstance(body[0], ast.Expr)
    }
    compared = {id(c) for node in ast.walk(tree) if isinstance(node, ast.Compare) for c in [node.left, *node.comparators]}
    hits = []
    for node in ast.walk(tree):
        skip = docstrings | compared
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            s = node.value
            if (s.startswith(("[[", "[tool.", "[project]")) and s.rstrip().endswith("]")) or " = { " in s:
                hits.append(s)
    return hits


def test_no_module_assembles_toml_by_hand():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        hits = _writes_toml_by_hand(ast.parse(path.read_text(encoding="utf-8")))
        if hits:
            found[str(path.relative_to(PACKAGE))] = hits
    assert found == {}


def test_the_hand_writer_detector_detects():
    old = 'out = ["[[packages]]", f"name = {x}"]\nline = "{ " + ", ".join(items)\nvcs = f"vcs = { {1} }"\n'
    assert _writes_toml_by_hand(ast.parse(old)) == ["[[packages]]"]
    assert _writes_toml_by_hand(ast.parse('if line.strip() == "[[packages]]":\n    pass\n')) == []  # reading
    assert _writes_toml_by_hand(
        ast.parse('"""doc: x = { y }"""\nh = "[tool.megacpp-env]"\ns = "name = { index = 1 }"')
    ) == [
        "[tool.megacpp-env]",
        "name = { index = 1 }",
    ]


# ---- the compact layout (the facts files) ---------------------------------------------------------


def test_compact_layout_keeps_every_committed_facts_file_byte_for_byte():
    """The facts files were written by a hand-made writer before; tomli-w now writes each key and
    value, and the layout around them is the same: re-writing a committed file changes nothing."""
    files = sorted(FACTS.glob("*.toml"))
    assert len(files) >= 8
    for path in files:
        assert render_facts(read_facts(path)) == path.read_text(encoding="utf-8"), path.name


def test_compact_layout():
    doc = {
        "a": "x",
        "short": ["p", "q"],
        "long": ["y" * 60, "z" * 60],
        "none": [],
        "odd key": True,
        "t": {"n": 1, "u": {"v": 2}},
        "rows": [{"k": "1"}, {"k": "2", "sub": {"w": 3}}],
    }
    text = dumps_compact(doc, comments=["made by x", ""])
    assert text == (
        "# made by x\n#\n"
        'a = "x"\nshort = ["p", "q"]\n'
        f'long = [\n    "{"y" * 60}",\n    "{"z" * 60}",\n]\n'
        'none = []\n"odd key" = true\n'
        "\n[t]\nn = 1\n\n[t.u]\nv = 2\n"
        '\n[[rows]]\nk = "1"\n\n[[rows]]\nk = "2"\n\n[rows.sub]\nw = 3\n'
    )
    assert tomllib.loads(text) == doc
    with pytest.raises(TypeError, match="compact layout"):
        dumps_compact({"mixed": [1, {"a": 1}]})


@given(st.dictionaries(st.text(min_size=1), st.text() | st.lists(st.text(), max_size=3), max_size=5))
def test_any_text_round_trips_in_the_compact_layout(doc):
    assert tomllib.loads(dumps_compact(doc)) == doc


def test_every_control_character_and_del_round_trip_in_the_compact_layout():
    doc = {"all": CONTROL, "each": [chr(c) for c in (*range(0x20), 0x7F)], "t": {CONTROL: 'q"b\\' + CONTROL}}
    text = dumps_compact(doc)
    assert "\x7f" not in text and "\x00" not in text
    assert tomllib.loads(text) == doc
