"""``explain CODE``: every code any check family reports is documented in its family's registry, with
an example and how to silence it; docs/CODES.md is that documentation, current; an unknown code is a
usage error with the closest one."""

from __future__ import annotations

import json

import pytest

from megacpp_env import codes
from megacpp_env.cli import main
from megacpp_env.findings import DOCS_PAGE
from megacpp_env.findings.formats import render_docs
from megacpp_env.rules import all_rules
from megacpp_env.snapshot import registry
from megacpp_env.snapshot.diff import area_codes, diff_code
from tests.fixtures.spec import REPO_ROOT

DOCS = codes.documented()


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.code)
def test_explain_works_for_every_code(doc, capsys):
    assert main(["explain", doc.code.lower()]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{doc.code} ({doc.severity}): {doc.summary}\n")
    assert "  example: " in out and "  silence it: " in out and f"docs: {DOCS_PAGE}#{doc.code.lower()}" in out
    assert doc.example and doc.silence and doc.family


def test_every_code_a_family_reports_is_documented():
    from megacpp_env import depcheck, doctor
    from megacpp_env.facts import check as facts_check
    from megacpp_env.lock import gate
    from megacpp_env.spec import codes as spec_codes

    documented = {d.code for d in DOCS}
    reported = {r.code for r in all_rules()}
    reported |= {v for k, v in vars(spec_codes).items() if k.isupper() and isinstance(v, str) and v[:2] in ("SP", "SU")}
    reported |= {*gate.CODE_OF.values(), gate.UNUSED_ACK, *doctor.AREA_CODES.values(), *facts_check.CODE_OF.values()}
    reported |= {*depcheck.CODE_OF.values(), *(diff_code(a) for a in registry.areas()), diff_code("no-such-area")}
    assert reported <= documented, sorted(reported - documented)
    assert set(registry.areas()) <= set(area_codes()), "a registered snapshot area without a diff code"


def test_docs_codes_md_is_current():
    page = REPO_ROOT / DOCS_PAGE
    assert page.read_text() == render_docs(codes.documented(), "markdown"), (
        f"{page} is stale: megacpp-env explain --all --format markdown > {DOCS_PAGE}"
    )


def test_list_and_json(capsys):
    assert main(["explain", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(DOCS) and lines[0].split()[0] == DOCS[0].code
    assert main(["explain", "TC005", "SP002", "--json"]) == 0
    assert [d["code"] for d in json.loads(capsys.readouterr().out)] == ["TC005", "SP002"]


def test_a_rule_example_is_its_trip_edit(capsys):
    rule = next(r for r in all_rules() if r.code == "GB001")
    assert main(["explain", "GB001"]) == 0
    out = capsys.readouterr().out
    assert all(edit in out for edit in rule.trip) and "makes it fire" in out


@pytest.mark.parametrize(("asked", "hint"), [("TC05", "TC005"), ("tc0005", "TC005"), ("SP02", "SP002"), ("LG01", "LG001")])
def test_an_unknown_code_is_a_usage_error_with_the_closest(asked, hint, capsys):
    assert main(["explain", asked]) == 2
    err = capsys.readouterr().err
    assert f"unknown code {asked.upper()!r}" in err and f"did you mean {hint!r}?" in err


def test_explain_without_a_code_is_a_usage_error(capsys):
    assert main(["explain"]) == 2
    assert "name a CODE" in capsys.readouterr().err


def test_every_rule_documents_why():
    assert [r.code for r in all_rules() if not r.doc().doc] == []
