"""Suppressions with reasons (``ignore: {CODE: reason}`` under a target or a source): a suppression
silences exactly its code where it is declared, the finding stays visible as suppressed with its
reason, an unused one is a warning, an unknown code an error with the closest code; the shipped
spec passes ``check --strict``."""

from __future__ import annotations

import copy
import json
import shutil

import pytest
import yaml

from megacpp_env.cli import main
from tests.fixtures.spec import REPO_ROOT


@pytest.fixture
def spec_dir(stack_data, tmp_path):
    """A copy of the shipped spec with its overlays and facts, without its suppressions."""
    for src in stack_data["sources"].values():
        if "overlay" in src:
            shutil.copytree(REPO_ROOT / "overlays" / src["overlay"], tmp_path / "overlays" / src["overlay"])
    shutil.copytree(REPO_ROOT / "facts", tmp_path / "facts")
    data = copy.deepcopy(stack_data)
    for section in ("targets", "sources"):
        for entry in data[section].values():
            entry.pop("ignore", None)
    return tmp_path, data


def check(capsys, root, data, *args):
    (root / "stack.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    rc = main(["check", "--spec", str(root / "stack.yaml"), "--json", *args])
    return rc, json.loads(capsys.readouterr().out)["findings"]


def by_code(findings, code):
    return [(f["key"], f["suppressed"]) for f in findings if f["code"] == code]


def test_the_shipped_spec_passes_strict(capsys):
    assert main(["check", "--strict", "--spec", str(REPO_ROOT / "stack.yaml")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1].endswith(": ok: 4 targets, 16 sources, 0 errors, 0 warnings, 14 suppressed")
    suppressed = [line for line in out if " suppressed warning " in line]
    assert len(suppressed) == 14 and all("(reason: " in line for line in suppressed)  # visible, with the reason


def test_without_its_suppressions_it_fails_strict(spec_dir, capsys):
    root, data = spec_dir
    rc, findings = check(capsys, root, data, "--strict")
    assert rc == 1
    assert {f["code"] for f in findings if f["severity"] == "warning" and not f["suppressed"]} == {
        "TC005", "UP011", "UP015",
    }  # fmt: skip


def test_a_suppression_silences_exactly_its_code_where_declared(spec_dir, capsys):
    root, data = spec_dir
    data["targets"]["gb10"]["ignore"] = {"TC005": "nvidia/cuda cannot be pinned from here"}
    rc, findings = check(capsys, root, data)
    assert rc == 0
    tc005 = by_code(findings, "TC005")
    assert ("targets.gb10.base_image", "nvidia/cuda cannot be pinned from here") in tc005
    assert [k for k, why in tc005 if not why] == [  # the same code on the other targets is not silenced
        "targets.cloud.base_image",
        "targets.smoke.base_image.linux/amd64",
        "targets.smoke.base_image.linux/arm64",
        "targets.cuda_smoke.base_image.linux/amd64",
        "targets.cuda_smoke.base_image.linux/arm64",
    ]
    assert all(not why for _, why in by_code(findings, "UP015"))  # nor another code
    assert main(["check", "--strict", "--spec", str(root / "stack.yaml")]) == 1
    capsys.readouterr()


def test_a_source_suppression_covers_its_source_only(spec_dir, capsys):
    root, data = spec_dir
    data["sources"]["vllm_flashmla"]["ignore"] = {"UP015": "no snapshot holds 0397728"}
    _, findings = check(capsys, root, data)
    assert {k: bool(why) for k, why in by_code(findings, "UP015")}["sources.vllm_flashmla.unread"] is True
    assert sum(bool(why) for _, why in by_code(findings, "UP015")) == 1


def test_an_error_can_be_suppressed_and_then_passes(spec_dir, capsys):
    root, data = spec_dir
    data["sources"]["vllm"]["build_env"]["VLLM_VERSION_OVERRIDE"] = "0.29.1"  # UP013, an error
    assert check(capsys, root, data)[0] == 1
    data["sources"]["vllm"]["ignore"] = {"UP013": "the team ships 0.29.1 on purpose"}
    rc, findings = check(capsys, root, data)
    reason = "the team ships 0.29.1 on purpose"
    assert rc == 0 and by_code(findings, "UP013") == [("sources.vllm.build_env.VLLM_VERSION_OVERRIDE", reason)]


def test_an_unused_suppression_is_a_warning(spec_dir, capsys):
    root, data = spec_dir
    data["targets"]["smoke"]["ignore"] = {"GB001": "smoke has no GPU"}
    rc, findings = check(capsys, root, data, "--strict")
    (unused,) = [f for f in findings if f["code"] == "SUP001"]
    assert (unused["severity"], unused["key"]) == ("warning", "targets.smoke.ignore.GB001")
    assert unused["line"] > 0 and "silences nothing" in unused["message"]
    assert rc == 1  # --strict: the warning fails
    # a run that does not check that code does not call it unused
    rc, findings = check(capsys, root, data, "--rule", "TC005")
    assert by_code(findings, "SUP001") == []


def test_an_unknown_code_is_an_error_with_the_closest_code(spec_dir, capsys):
    root, data = spec_dir
    data["targets"]["gb10"]["ignore"] = {"TX005": "typo"}
    rc, findings = check(capsys, root, data)
    (bad,) = [f for f in findings if f["code"] == "SUP002"]
    assert rc == 1 and bad["key"] == "targets.gb10.ignore.TX005" and "did you mean 'TC005'?" in bad["remedy"]


def test_a_suppression_needs_a_reason_and_a_code(spec_dir, capsys):
    root, data = spec_dir
    data["targets"]["gb10"]["ignore"] = {"TC005": ""}
    data["sources"]["vllm"]["ignore"] = {"not a code": "why"}
    rc, findings = check(capsys, root, data)
    assert rc == 1
    assert {(f["code"], f["key"]) for f in findings} == {
        ("SP005", "targets.gb10.ignore.TC005"),
        ("SP005", "sources.vllm.ignore.not a code"),
    }


def test_doctor_reports_a_suppressed_finding_and_an_unused_one(stack_data, tmp_path):
    from megacpp_env.doctor import run_doctor
    from megacpp_env.snapshot.document import Snapshot
    from tests.fixtures.spec import load_data

    data = copy.deepcopy(stack_data)
    data["targets"]["smoke"]["ignore"] = {"DR001": "built on amd64, checked here on purpose", "DR003": "no GPU"}
    spec = load_data(data, tmp_path / "stack.yaml")
    report = run_doctor(spec, "smoke", Snapshot(facts={"system": {"machine": "riscv64"}}))
    platform = [f for f in report.findings if f.code == "DR001"]
    assert platform and all(f.suppressed == "built on amd64, checked here on purpose" for f in platform)
    assert [f.key for f in report.findings if f.code == "SUP001"] == ["targets.smoke.ignore.DR003"]
    assert "suppressed DR001" in report.render_text()

