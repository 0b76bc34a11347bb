"""`diff`: messages, grouping and ranking, ignore patterns, formats, exit codes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from megacpp_env.checkout import default_dest
from megacpp_env.cli import main
from megacpp_env.snapshot.collect import take_snapshot
from megacpp_env.snapshot.diff import diff_snapshots
from megacpp_env.snapshot.document import Snapshot
from megacpp_env.snapshot.report import render
from tests.fixtures.git_repos import make_repo
from tests.fixtures.spec import load_data


def _dist(version, **kw):
    return {
        "name": "torch",
        "version": version,
        "location": "/v/site",
        "installer": "uv",
        "requested": True,
        "direct_url": None,
        "integrity": {"files": 1, "modified": [], "removed": [], "added": [], "status": "ok"},
        **kw,
    }


def _snap(env=None, torch="2.13.0.dev20260413", host=None, **facts):
    base = {
        "env": {"variables": env or {}, "index_config": {}},
        "python": {"distributions": {"torch": _dist(torch)}, "interpreter": {"version": "3.13.1"}},
    }
    base.update(facts)
    return Snapshot(facts=base, host=host or {"hostname": "a"})


def test_messages_for_env_and_versions():
    a = _snap()
    b = _snap(env={"CPPMEGA_MAMBA3_P1": "0"}, torch="2.13.0.dev20260415")
    report = diff_snapshots(a, b)
    assert [(f.area, f.severity, f.message) for f in report.findings] == [
        ("python", "error", "torch 2.13.0.dev20260413 -> 2.13.0.dev20260415"),
        ("env", "warning", "env CPPMEGA_MAMBA3_P1: unset -> 0"),
    ]
    assert [area for area, _ in report.by_area()] == ["python", "env"]


def test_host_only_differences_are_notes_not_drift():
    report = diff_snapshots(_snap(host={"hostname": "a"}), _snap(host={"hostname": "b"}))
    assert not report.drift
    assert [f.message for f in report.findings] == ["hostname: a -> b"]


def test_ignore_patterns_match_keys_and_prefixes():
    a, b = _snap(), _snap(env={"CPPMEGA_MAMBA3_P1": "0", "NCCL_DEBUG": "INFO"})
    report = diff_snapshots(a, b, ignore=["env.NCCL_*"])
    assert [f.key for f in report.findings] == ["env.CPPMEGA_MAMBA3_P1"]
    assert [f.key for f in report.ignored] == ["env.NCCL_DEBUG"]
    assert not diff_snapshots(a, b, ignore=["env"]).drift


def test_unexplained_areas_fall_back_to_key_paths():
    a = _snap(gpu={"driver_version": "580.1", "devices": []})
    b = _snap(gpu={"driver_version": "595.45.04", "devices": []})
    (finding,) = diff_snapshots(a, b).findings
    assert (finding.severity, finding.key, finding.message) == (
        "warning",
        "gpu.driver_version",
        "gpu: driver_version: 580.1 -> 595.45.04",
    )


def test_formats():
    report = diff_snapshots(_snap(), _snap(env={"CPPMEGA_MAMBA3_P1": "0"}))
    text = render(report, "text")
    assert text.splitlines()[0] == "drift between A and B: 1 difference(s) (1 warning)"
    assert "env\n  warning  env CPPMEGA_MAMBA3_P1: unset -> 0\n" in text
    md = render(report, "markdown")
    assert "| warning | env CPPMEGA_MAMBA3_P1: unset -> 0 |" in md
    data = json.loads(render(report, "json"))
    assert data["drift"] is True
    assert data["findings"] == [  # the one finding record of every check: code, where, docs anchor
        {
            "area": "env",
            "code": "SD007",
            "severity": "warning",
            "key": "env.CPPMEGA_MAMBA3_P1",
            "location": "env.CPPMEGA_MAMBA3_P1",
            "file": "",
            "line": 0,
            "message": "env CPPMEGA_MAMBA3_P1: unset -> 0",
            "remedy": "",
            "docs": "docs/CODES.md#sd007",
            "suppressed": "",
        }
    ]


def test_cli_exit_codes(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(_snap().to_json())
    b.write_text(_snap(env={"CPPMEGA_MAMBA3_P1": "0"}).to_json())
    spec = ["--spec", str(tmp_path / "none.yaml")]
    assert main(["diff", str(a), str(b), *spec]) == 1
    assert "env CPPMEGA_MAMBA3_P1: unset -> 0" in capsys.readouterr().out
    assert main(["diff", str(a), str(b), *spec, "--ignore", "env.CPPMEGA_*"]) == 0
    assert main(["diff", str(a), str(a), *spec, "--format", "markdown"]) == 0
    assert "no drift" in capsys.readouterr().out
    assert main(["diff", str(a), str(b), *spec, "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["counts"]["warning"] == 1
    b.write_text(b.read_text().replace('"0"', '"1"'))  # edited by hand: the digest no longer matches
    assert main(["diff", str(a), str(b), *spec]) == 1
    assert "does not match the facts" in capsys.readouterr().err


def test_checkout_without_git_is_a_finding(tmp_path, stack_data, snap_options):
    spec = load_data(stack_data, tmp_path / "stack.yaml")
    dest = default_dest(spec.root, spec.source("megatron_lm"))
    make_repo(dest, {"megatron/core/__init__.py": ""})
    before = take_snapshot(snap_options(spec=spec))
    assert before.facts["checkouts"]["megatron_lm"]["has_git"] is True
    shutil.rmtree(dest / ".git")
    after = take_snapshot(snap_options(spec=spec))
    report = diff_snapshots(before, after)
    assert report.findings[0].message == "megatron_lm: checkout has no .git"
    assert report.findings[0].severity == "error"


def test_checkout_moved_and_dirty(tmp_path, stack_data, snap_options):
    from tests.fixtures.git_repos import commit_all

    spec = load_data(stack_data, tmp_path / "stack.yaml")
    dest = default_dest(spec.root, spec.source("megatron_lm"))
    first = make_repo(dest, {"a.py": "A = 1\n"})
    before = take_snapshot(snap_options(spec=spec))
    (dest / "a.py").write_text("A = 2\n")
    second = commit_all(dest, "move")
    (dest / "a.py").write_text("A = 3\n")
    after = take_snapshot(snap_options(spec=spec))
    messages = [f.message for f in diff_snapshots(before, after).findings]
    assert f"megatron_lm: HEAD {first[:12]} -> {second[:12]} (pin 5be9626709af)" in messages
    assert any(m.startswith("megatron_lm: local changes (diff ") for m in messages)


def test_ignore_before_the_positionals_is_one_pattern(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(_snap().to_json())
    b.write_text(_snap(env={"CPPMEGA_MAMBA3_P1": "0", "NCCL_DEBUG": "INFO"}).to_json())
    spec = ["--spec", str(tmp_path / "none.yaml")]
    assert main(["diff", "--ignore", "env.CPPMEGA_*", str(a), str(b), *spec]) == 1  # NCCL_DEBUG still differs
    assert "env NCCL_DEBUG: unset -> INFO" in capsys.readouterr().out
    assert main(["diff", "--ignore", "env.CPPMEGA_*", "--ignore", "env.NCCL_*", str(a), str(b), *spec]) == 0


def test_a_checkout_path_spelled_two_ways_gives_one_digest(tmp_path, snap_options, monkeypatch):
    repo = tmp_path / "x"
    make_repo(repo, {"a.py": "A = 1\n"})
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "link").symlink_to(repo)
    monkeypatch.chdir(tmp_path / "deep" / "er")
    spellings = [repo, "../../x", tmp_path / "deep" / ".." / "x", tmp_path / "link"]
    snaps = [take_snapshot(snap_options(paths=(Path(p),))) for p in spellings]
    assert list(snaps[0].facts["checkouts"]) == [str(repo.resolve())]
    assert len({s.digest for s in snaps}) == 1
    assert not diff_snapshots(snaps[0], snaps[1]).drift
    assert [s.host["paths"] for s in snaps] == [[str(p)] for p in spellings]  # as spelled, outside the facts


def test_the_summary_counts_add_up():
    """Errors and warnings make the total; notes (host differences) are counted apart from it."""
    a = _snap(host={"hostname": "a"})
    b = _snap(env={"CPPMEGA_MAMBA3_P1": "0"}, torch="2.13.0.dev20260415", host={"hostname": "b"})
    report = diff_snapshots(a, b)
    assert sorted(f.severity for f in report.findings) == ["error", "note", "warning"]
    first = render(report, "text").splitlines()[0]
    assert first == "drift between A and B: 2 difference(s) (1 error, 1 warning); 1 note(s)"
    total, parts = first.split(": ", 1)[1].split(" difference(s) (")
    assert int(total) == sum(int(p.split()[0]) for p in parts.split(")")[0].split(", "))
