"""build_source on bare metal: the real smoke C extension from a source mirror, with its overlay, through the
`build-source` verb and through `python -m megacpp_env.srcbuild` run from the tool's closure alone (what an
image's source stage runs); declared fetches, path sources, collect, and failures that name their step."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from megacpp_env.commands import build_source as build_source_cmd
from megacpp_env.errors import RefusedError
from megacpp_env.sourceplans import mirror_requests, plan_of, target_plans
from megacpp_env.spec import load_spec
from megacpp_env.srcbuild.build import BuildInputs, build_source
from megacpp_env.srcbuild.closure import copy_closure
from megacpp_env.srcbuild.collect import collect
from megacpp_env.srcbuild.jobs import GIB, Resources
from megacpp_env.srcbuild.mirror import mirror_sources
from megacpp_env.srcbuild.run import StepFailedError
from megacpp_env.worktree import content
from tests.fixtures.srcbuild import REPO_ROOT, make_scratch_venv, two_source_spec

OVERLAY_PATHS = ["megacpp_smoke_ext/__init__.py", "megacpp_smoke_ext/overlay_info.py"]


def run_py(python: Path, code: str) -> str:
    return subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True).stdout.strip()


def wheel_files(path: str) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist() if not n.endswith("/RECORD")}


def test_verb_builds_the_smoke_extension_with_its_overlay(smoke_mirror, scratch_venv, tmp_path, capsys) -> None:
    args = argparse.Namespace(
        spec=str(REPO_ROOT / "stack.yaml"), name="megacpp-smoke-ext", target="", venv=str(scratch_venv.parent.parent),
        mirror=smoke_mirror, workdir=tmp_path / "src" / "megacpp-smoke-ext", wheel_dir=tmp_path / "wheels",
        install=True, no_sanity=False, jobs=0, json=True, dry_run=False, resources_root=None,
    )  # fmt: skip
    assert build_source_cmd.run(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in report["steps"]] == ["checkout", "verify", "overlay", "fetches", "wheel", "install",
                                                   "sanity"]  # fmt: skip
    files = wheel_files(report["wheel"])
    assert files["megacpp_smoke_ext/_build_info.py"] == b"FORCE_BUILD = 'TRUE'\n"  # the plan's build_env reached it
    assert b'OVERLAY_MARKER = "overlay:smoke-ext"' in files["megacpp_smoke_ext/__init__.py"]
    assert "megacpp_smoke_ext/overlay_info.py" in files
    assert any(n.startswith("megacpp_smoke_ext/_core.") and n.endswith(".so") for n in files)
    assert report["sanity"][-1] == "[megacpp_smoke_ext] ok: assert megacpp_smoke_ext.add(2, 3) == 5"
    assert run_py(scratch_venv, "import megacpp_smoke_ext as m; print(m.add(40, 2), m.OVERLAY_MARKER)") == (
        "42 overlay:smoke-ext"
    )
    checkout = Path(report["checkout"])
    assert sorted(c.path for c in content.read(checkout).delta.changes()) == OVERLAY_PATHS  # build leftovers removed
    assert not (checkout / "build").exists()
    assert report["jobs"]["env"] == {} and report["jobs"]["max_jobs"] >= 1


def test_the_same_plan_from_the_closure_alone(smoke_mirror, scratch_venv, tmp_path) -> None:
    """What a source stage runs: the rendered plan, `python -m megacpp_env.srcbuild`, PYTHONPATH = the closure."""
    spec = load_spec(REPO_ROOT / "stack.yaml")
    (plan,) = target_plans(spec, spec.target("smoke"))
    plan_file = tmp_path / "megacpp_smoke_ext.json"
    plan_file.write_text(plan.dumps())
    tool = copy_closure(tmp_path / "tool")
    env = {**os.environ, "PYTHONPATH": str(tool)}
    argv = [str(scratch_venv), "-P", "-m", "megacpp_env.srcbuild", "build", "--plan", str(plan_file),
            "--venv", str(scratch_venv), "--workdir", str(tmp_path / "opt-src" / plan.dist),
            "--wheel-dir", str(tmp_path / "wheels"), "--mirror", str(smoke_mirror),
            "--overlays", str(REPO_ROOT / "overlays"), "--install", "--json"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert "[megacpp_smoke_ext] wheel: " in proc.stderr and "Successfully built megacpp-smoke-ext" in proc.stderr
    assert wheel_files(report["wheel"])["megacpp_smoke_ext/_build_info.py"] == b"FORCE_BUILD = 'TRUE'\n"
    assert run_py(scratch_venv, "import megacpp_smoke_ext as m; print(m.add(2, 3))") == "5"


def test_declared_fetch_and_path_source_then_collect(smoke_two, smoke_two_lib, tmp_path) -> None:
    spec = load_spec(two_source_spec(tmp_path / "proj", smoke_two, smoke_two_lib))
    target = spec.target("smoke")
    two = spec.source("megacpp_smoke_two")
    root = tmp_path / "mirror"
    mirror_sources(root, [*mirror_requests(spec, target)[1:], _lib_request(spec)])
    for bare in (smoke_two.path, smoke_two_lib.path):
        bare.rename(bare.with_name(bare.name + ".gone"))  # from here on only the mirror has them
    python = make_scratch_venv(tmp_path / "build-venv")
    src = tmp_path / "opt-src"
    inputs = BuildInputs(python=python, workdir=src / "megacpp-smoke-two", wheel_dir=tmp_path / "wheels" / two.name,
                         mirror=root)  # fmt: skip
    result = build_source(plan_of(spec, target, two), inputs)
    assert result.fetches == {"SMOKE_TWO_LIB_DIR": str((src / "smoke-two-lib").resolve())}
    assert wheel_files(result.wheel)["megacpp_smoke_two/_lib.py"] == b"LIB = 'pinned library v1'\n"
    lib_plan = plan_of(spec, target, spec.source("smoke_two_lib"))
    lib = build_source(lib_plan, replace(inputs, workdir=src / "smoke-two-lib", wheel_dir=tmp_path / "unused"))
    assert lib.wheel == "" and not (tmp_path / "unused").exists()
    fresh = make_scratch_venv(tmp_path / "image-venv")
    done = collect([plan_of(spec, target, two), lib_plan], python=fresh, wheels=tmp_path / "wheels", src=src)
    assert done.sanity[-1] == "[smoke_two_lib] ok: assert smokelib.VALUE == 7"
    assert "[megacpp_smoke_two] ok: assert megacpp_smoke_two.mul(6, 7) == 42" in done.sanity
    assert run_py(fresh, "import megacpp_smoke_two, smokelib; print(megacpp_smoke_two.mul(3, 4), smokelib.VALUE)") == (
        "12 7"
    )


def _lib_request(spec):
    from megacpp_env.sourceplans import mirror_request

    return mirror_request(spec, spec.source("smoke_two_lib"))


def test_failing_pre_build_names_the_source_and_step(smoke_mirror, scratch_venv, tmp_path) -> None:
    spec = load_spec(REPO_ROOT / "stack.yaml")
    plan = replace(plan_of(spec, spec.target("smoke"), spec.source("megacpp_smoke_ext")),
                   pre_build=("true", "echo about to fail; exit 3"))  # fmt: skip
    inputs = BuildInputs(python=scratch_venv, workdir=tmp_path / "co", wheel_dir=tmp_path / "w",
                         overlays=REPO_ROOT / "overlays", mirror=smoke_mirror)  # fmt: skip
    with pytest.raises(StepFailedError) as exc:
        build_source(plan, inputs)
    assert str(exc.value).splitlines()[0] == "megacpp_smoke_ext: pre_build[1] failed (exit 3); last lines of its output:"
    assert exc.value.tail == ("about to fail",)


def test_build_without_the_forced_env_fails_in_the_wheel_step(smoke_mirror, scratch_venv, tmp_path) -> None:
    spec = load_spec(REPO_ROOT / "stack.yaml")
    plan = replace(plan_of(spec, spec.target("smoke"), spec.source("megacpp_smoke_ext")), build_env={})
    inputs = BuildInputs(python=scratch_venv, workdir=tmp_path / "co", wheel_dir=tmp_path / "w",
                         overlays=REPO_ROOT / "overlays", mirror=smoke_mirror)  # fmt: skip
    with pytest.raises(StepFailedError, match=r"^megacpp_smoke_ext: wheel failed") as exc:
        build_source(plan, inputs)
    assert any("set MEGACPP_SMOKE_EXT_FORCE_BUILD=TRUE" in line for line in exc.value.tail)
    assert not (tmp_path / "w").exists() or not list((tmp_path / "w").iterdir())


def test_a_mirror_without_the_pin_is_refused(smoke_mirror, scratch_venv, tmp_path) -> None:
    spec = load_spec(REPO_ROOT / "stack.yaml")
    plan = replace(plan_of(spec, spec.target("smoke"), spec.source("megacpp_smoke_ext")), commit="2" * 40)
    inputs = BuildInputs(python=scratch_venv, workdir=tmp_path / "co", wheel_dir=tmp_path / "w", mirror=smoke_mirror)
    with pytest.raises(RefusedError, match=r"lacks git://127.0.0.1:9418/megacpp-smoke-ext.git @ 2{40} \(run `megacpp"):
        build_source(plan, inputs)
    assert not (tmp_path / "co").exists()


def test_a_build_from_the_mirror_reads_nothing_else(smoke_mirror) -> None:
    """Issue 19 item 9's sibling in build-source: besides the mirror's own URLs, every other URL (a
    submodule the mirror lacks, even a local repository) is rewritten to a path that does not exist."""
    from megacpp_env.srcbuild.build import _mirror_config

    spec = load_spec(REPO_ROOT / "stack.yaml")
    cfg = _mirror_config(plan_of(spec, spec.target("smoke"), spec.source("megacpp_smoke_ext")), smoke_mirror)
    assert cfg["url./megacpp-source-mirror-lacks-this-url/.insteadOf"] == ""
    mirrored = [k for k in cfg if k != "url./megacpp-source-mirror-lacks-this-url/.insteadOf" and k.startswith("url.")]
    assert mirrored and all(k.startswith(f"url.file://{smoke_mirror}") for k in mirrored)


def test_jobs_decision_reaches_the_build_env(smoke_mirror, scratch_venv, tmp_path) -> None:
    spec = load_spec(REPO_ROOT / "stack.yaml")
    base = plan_of(spec, spec.target("smoke"), spec.source("megacpp_smoke_ext"))
    plan = replace(base, jobs=replace(base.jobs, reads=("MAX_JOBS",), mem_per_job_gib=4),
                   pre_build=('test "$MAX_JOBS" = 3 && echo "MAX_JOBS=$MAX_JOBS"',))  # fmt: skip
    tight = Resources(memory=13 * GIB, memory_from="test", cpus=16, cpus_from="test")
    inputs = BuildInputs(python=scratch_venv, workdir=tmp_path / "co", wheel_dir=tmp_path / "w",
                         overlays=REPO_ROOT / "overlays", mirror=smoke_mirror, resources=tight)  # fmt: skip
    lines: list[str] = []
    result = build_source(plan, inputs, progress=lines.append)
    assert "MAX_JOBS=3" in lines and result.jobs.env == {"MAX_JOBS": "3"}
