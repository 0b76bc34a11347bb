"""Issue 19 item 2: a golden names nothing that runs outside its digest.

`run --golden` and `bisect-check` inspect the interpreter the golden's hashed facts record (an edited
`host.inspected_python`, outside the digest, is never executed; an edited fact breaks the digest and
is refused). `reproduce` refuses a capture whose fields that choose an interpreter, a fetch URL, a
commit, a diff, a distribution's URL or a build env differ from the hashed facts, and a capture
whose `creator`, `maker` or `.pth` lines would run something else, before anything is made."""

from __future__ import annotations

import json
import sys

import pytest

from megacpp_env.cli import main
from megacpp_env.repro import goldens
from megacpp_env.snapshot.document import load_snapshot
from tests.fixtures.git_repos import FILE_OK, make_repo, write_files
from tests.fixtures.repro import training_repo


def _plant(tmp_path):
    """An executable that leaves a marker when run (as an interpreter, it answers nothing useful)."""
    marker = tmp_path / "PWNED"
    evil = tmp_path / "evil" / "python3"
    evil.parent.mkdir()
    evil.write_text(f'#!/bin/sh\ntouch {marker}\nexec {sys.executable} "$@"\n')
    evil.chmod(0o755)
    return evil, marker


def _edit(path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True))


@pytest.fixture
def golden(tmp_path, monkeypatch, snap_venv):
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    repo = training_repo(tmp_path / "training")
    gold = tmp_path / "golden"
    assert main(["snapshot", "--spec", str(tmp_path / "none.yaml"), "--python", str(snap_venv.python),
                 "--paths", str(repo.path), "--golden", "bench", "--golden-dir", str(gold)]) == 0  # fmt: skip
    return gold, repo


def _run(gold, *cmd):
    return main(["run", "--spec", str(gold / "none.yaml"), "--golden", "bench", "--golden-dir", str(gold), "--", *cmd])


def _bisect(gold, repo):
    return main(["bisect-check", "bench", "--spec", str(gold / "none.yaml"), "--golden-dir", str(gold),
                 "--worktree", str(repo.path)])  # fmt: skip


@pytest.mark.parametrize("verb", ["run", "bisect-check"])
def test_an_edited_host_inspected_python_is_never_executed(golden, tmp_path, verb, capsys):
    gold, repo = golden
    evil, marker = _plant(tmp_path)
    _edit(gold / "bench.json", lambda d: d["host"].__setitem__("inspected_python", str(evil)))
    load_snapshot(gold / "bench.json")  # outside the digest: the tamper check passes ...
    code = _run(gold, sys.executable, "-c", "pass") if verb == "run" else _bisect(gold, repo)
    assert not marker.exists()  # ... and the named file still never runs
    assert code == 0, capsys.readouterr().err  # the golden's real interpreter was inspected: no drift


@pytest.mark.parametrize("verb", ["run", "bisect-check"])
@pytest.mark.parametrize("field", ["executable", "prefix"])
def test_an_edited_interpreter_fact_is_refused(golden, tmp_path, verb, field, capsys):
    gold, repo = golden
    evil, marker = _plant(tmp_path)
    _edit(gold / "bench.json", lambda d: d["facts"]["python"]["interpreter"].__setitem__(field, str(evil)))
    code = _run(gold, "true") if verb == "run" else _bisect(gold, repo)
    assert (code, marker.exists()) == ((1, False) if verb == "run" else (128, False))
    assert "does not match the facts" in capsys.readouterr().err


def test_the_inspected_interpreter_comes_from_the_facts(golden, snap_venv):
    gold, _repo = golden
    snap = load_snapshot(gold / "bench.json")
    assert goldens.inspected_python(snap) == snap.area("python")["interpreter"]["executable"]
    assert goldens.options_like(snap, python=None, paths=None, spec=lambda: None).python == str(snap_venv.python)


def test_an_edited_host_spec_is_only_a_hint(golden, tmp_path):
    """host.spec is outside the digest: a spec there that is no spec, or is relative, is not loaded."""
    gold, _repo = golden
    hostile = tmp_path / "hostile.yaml"
    hostile.write_text("version: [\n")
    for value in (str(hostile), "hostile.yaml", 7):
        _edit(gold / "bench.json", lambda d, v=value: d["host"].__setitem__("spec", v))
        snap = load_snapshot(gold / "bench.json")
        assert goldens.spec_loader(snap, lambda: "fallback")() == "fallback"  # type: ignore[arg-type,return-value]


# ---- reproduce: the capture -------------------------------------------------------------------


@pytest.fixture
def captured(tmp_path, monkeypatch, snap_venv):
    """A golden whose capture has a checkout with a remote, a diff and an untracked file."""
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    from megacpp_env import git

    origin = tmp_path / "origin"
    make_repo(origin, {"lib.py": "X = 1\n"})
    src = tmp_path / "src" / "lib"
    git.run_git(["clone", "--quiet", str(origin), str(src)], config=FILE_OK)
    write_files(src, {"lib.py": "X = 2\n", "local.txt": "mine\n"})
    gold = tmp_path / "golden"
    assert main(["snapshot", "--spec", str(tmp_path / "none.yaml"), "--python", str(snap_venv.python),
                 "--paths", str(src), "--golden", "bench", "--golden-dir", str(gold)]) == 0  # fmt: skip
    return gold


def _checkout(d):
    return next(iter(d["checkouts"].values()))


def _dist(d):
    return d["distributions"]["demo-pkg"]


EDITS = {
    "python.base_prefix": (lambda d, e: d["python"].__setitem__("base_prefix", str(e.parent.parent)), "python.base_prefix"),
    "python.executable": (lambda d, e: d["python"].__setitem__("executable", str(e)), "python.executable"),
    "python.version": (lambda d, e: d["python"].__setitem__("version", "3.99.0"), "python.version"),
    "checkout.remotes": (lambda d, e: _checkout(d)["remotes"].__setitem__("origin", "ext::sh -c touch% /tmp/x"),
                         ".remotes"),
    "checkout.head": (lambda d, e: _checkout(d).__setitem__("head", "1" * 40), ".head"),
    "checkout.path": (lambda d, e: _checkout(d).__setitem__("path", "/etc"), ".path"),
    "checkout.diff": (lambda d, e: _checkout(d).__setitem__("diff", "0" * 64), ".diff"),
    "checkout.untracked_hash": (lambda d, e: _checkout(d).__setitem__("untracked_hash", "x"), ".untracked_hash"),
    "dist.version": (lambda d, e: _dist(d).__setitem__("version", "6.6.6"), "distributions.demo-pkg.version"),
    "dist.direct_url": (lambda d, e: _dist(d).__setitem__("direct_url", {"url": "https://evil.invalid/x.tar.gz"}),
                        "distributions.demo-pkg.direct_url"),
    "dist.build_env": (lambda d, e: _dist(d).__setitem__("build", {"checkout": "lib", "source": "direct_url",
                                                                  "build_env": {"CC": str(e)}}),
                       "distributions.demo-pkg.build.build_env"),
    "dist.origin": (lambda d, e: _dist(d).__setitem__("origin", "editable"), "distributions.demo-pkg.origin"),
    "dist.unknown": (lambda d, e: d["distributions"].__setitem__("evil", {**_dist(d), "name": "evil"}),
                     "distributions.evil"),
}  # fmt: skip


def _reproduce(tmp_path, gold):
    out = tmp_path / "again"
    return main(["reproduce", "bench", "--golden-dir", str(gold), "--venv", str(out / "venv"),
                 "--checkouts", str(out / "src")]), out  # fmt: skip


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_capture_field_that_chooses_what_runs_is_refused_when_edited(captured, tmp_path, edit, capsys):
    change, key = EDITS[edit]
    evil, marker = _plant(tmp_path)
    _edit(captured / "bench.capture.json", lambda d: change(d, evil))
    code, out = _reproduce(tmp_path, captured)
    err = capsys.readouterr().err
    assert code == 1 and "disagrees with the hashed facts of golden bench" in err and key in err, err
    assert not out.exists() and not marker.exists()


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("creator", "../../../evil/python3", "expected an interpreter's file name"),
        ("creator", "sh", "expected an interpreter's file name"),
        ("maker", "evil", "expected one of venv, uv, virtualenv, none"),
    ],
)
def test_how_the_venv_was_made_names_no_other_program(captured, tmp_path, key, value, message, capsys):
    _edit(captured / "bench.capture.json", lambda d: d["python"].__setitem__(key, value))
    code, out = _reproduce(tmp_path, captured)
    assert code == 1 and f"python.{key}: {message}" in capsys.readouterr().err and not out.exists()


@pytest.fixture
def with_pth(tmp_path, monkeypatch, snap_venv):
    """A golden whose venv has an unowned .pth file naming one existing directory."""
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    (tmp_path / "extra").mkdir()
    (snap_venv.site / "local_paths.pth").write_text(f"{tmp_path / 'extra'}\n")
    gold = tmp_path / "golden"
    assert main(["snapshot", "--spec", str(tmp_path / "none.yaml"), "--python", str(snap_venv.python),
                 "--golden", "bench", "--golden-dir", str(gold)]) == 0  # fmt: skip
    return gold


@pytest.mark.parametrize("how", ["line", "another-line", "relative-line", "new-file"])
def test_a_pth_path_line_the_golden_did_not_have_is_refused(with_pth, tmp_path, how, capsys):
    """A directory on the re-made venv's sys.path runs its sitecustomize.py at every start."""
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "sitecustomize.py").write_text(f"open({str(tmp_path / 'PWNED')!r}, 'w')\n")

    def change(d):
        (entry,) = d["path_entries"]
        if how == "line":
            entry["lines"] = [str(evil)]
        elif how == "another-line":
            entry["lines"].append(str(evil))
        elif how == "relative-line":
            entry["lines"].append("../../../../evil")
        else:
            d["path_entries"].append({**entry, "file": "zz.pth", "lines": [str(evil)]})

    _edit(with_pth / "bench.capture.json", change)
    code, out = _reproduce(tmp_path, with_pth)
    err = capsys.readouterr().err
    assert code == 1 and "disagrees with the hashed facts" in err and "path_entries[" in err, err
    assert not out.exists() and not (tmp_path / "PWNED").exists()


def test_the_goldens_own_pth_lines_agree(with_pth):
    from megacpp_env.repro import covered
    from megacpp_env.repro.document import load_capture

    cap = load_capture(with_pth / "bench.capture.json")
    assert len(cap.path_entries) == 1 and covered.disagreements(cap, load_snapshot(with_pth / "bench.json")) == []


@pytest.mark.parametrize("line", ["import os; os.system('touch PWNED')", "import sys"])
def test_a_pth_line_that_runs_code_is_refused(captured, tmp_path, line, capsys):
    entry = {"site": "{venv}/lib/python3.11/site-packages", "file": "evil.pth", "lines": ["/ok", line]}
    _edit(captured / "bench.capture.json", lambda d: d["path_entries"].append(entry))
    code, out = _reproduce(tmp_path, captured)
    err = capsys.readouterr().err
    assert code == 1 and "path_entries[0]" in err and "a line that runs code at every interpreter start" in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PYTHONSTARTUP", "/tmp/evil.py"),
        ("GIT_SSH_COMMAND", "touch PWNED"),
        ("BASH_ENV", "/tmp/evil.sh"),
        ("LD_AUDIT", "/tmp/evil.so"),
        ("PATH", "evil:/usr/bin"),
        ("PYTHONPATH", ":{checkout}/src"),
        ("NODE_OPTIONS", "--require /tmp/evil.js"),
    ],
)
def test_a_build_records_env_passes_the_specs_env_policy(captured, tmp_path, name, value, capsys):
    """A build record's env is not in the facts; it came from a spec's build env, so it passes that policy."""
    build = {"checkout": "lib", "source": "record", "build_env": {"MAX_JOBS": "8", name: value}}
    _edit(captured / "bench.capture.json", lambda d: _dist(d).update(origin="local-build", build=build))
    code, out = _reproduce(tmp_path, captured)
    err = capsys.readouterr().err
    assert code == 1 and f"distributions.demo-pkg.build.build_env.{name}: " in err and not out.exists(), err


def test_a_build_records_env_of_compiler_knobs_and_checkout_paths_is_read(captured, tmp_path):
    from megacpp_env.repro.document import load_capture

    env = {"MAX_JOBS": "8", "CC": "/usr/bin/gcc", "PYTHONPATH": "{checkout}/src", "TORCH_CUDA_ARCH_LIST": "9.0"}
    build = {"checkout": "lib", "source": "record", "build_env": env}
    _edit(captured / "bench.capture.json", lambda d: _dist(d).update(origin="local-build", build=build))
    dist = load_capture(captured / "bench.capture.json").distributions["demo-pkg"]
    assert dist.build is not None and dist.build.build_env == env


def _synthetic(direct_url):
    from megacpp_env.repro import portable
    from megacpp_env.repro.document import BuildInfo, Capture, DistCapture, PythonCapture
    from megacpp_env.snapshot.document import Snapshot

    interp = {"version": "3.11.7", "implementation": "CPython", "prefix": "/v", "base_prefix": "/b",
              "executable": "/v/bin/python"}  # fmt: skip
    fact = {"name": "x", "version": "1", "installer": "pip", "location": "/v/lib/python3.11/site-packages",
            "direct_url": direct_url}  # fmt: skip
    snap = Snapshot(facts={"python": {"interpreter": interp, "distributions": {"x": fact}}})
    dist = DistCapture(key="x", name="x", version="1", installer="pip", requested=True, origin="local-build",
                       direct_url=portable.direct_url_form(direct_url, portable.roots_of(snap)[1]), build=BuildInfo(checkout="lib", build_env={"CC": "/tmp/evil/cc"}))  # fmt: skip
    cap = Capture(golden="g", snapshot_digest=snap.digest, python=PythonCapture(**interp), distributions={"x": dist})
    return cap, snap


def test_a_build_record_cannot_make_an_index_distribution_a_local_build():
    from megacpp_env.repro import covered

    cap, snap = _synthetic(None)
    assert "distributions.x.origin: a local build, where facts.python.distributions.x says 'index'" in (
        covered.disagreements(cap, snap)
    )
    cap, snap = _synthetic({"url": "file:///w/x-1-py3-none-any.whl", "archive_info": {}})
    # a wheel installed from a file: a build record may rebuild it, but not with a compiler the facts lack
    assert covered.disagreements(cap, snap) == [
        "distributions.x.build.build_env.CC: '/tmp/evil/cc' names an absolute path that the golden's facts "
        "(facts.env) do not hold for CC"
    ]


@pytest.mark.parametrize("value", ["/tmp/evil/cc", "ccache /tmp/evil/gcc", "-fplugin=/tmp/evil.so", "~/bin/cc",
                                   "{checkout}/bin:/tmp/evil"])  # fmt: skip
def test_a_build_records_absolute_paths_must_be_the_goldens_own(value):
    """Issue 19 item 2, the sibling left open: a record's env is not hashed, so a path in it (which
    picks the program a rebuild runs) must be what the golden's facts hold; knobs stay free."""
    import dataclasses

    from megacpp_env.repro import covered
    from megacpp_env.repro.document import BuildInfo

    cap, snap = _synthetic({"url": "file:///w/x-1-py3-none-any.whl", "archive_info": {}})
    for env, bad in (({"CC": value}, True), ({"MAX_JOBS": "8", "CC": "gcc-15", "X": "{checkout}/src"}, False)):
        dist = dataclasses.replace(cap.distributions["x"], build=BuildInfo(checkout="lib", build_env=env))
        edited = dataclasses.replace(cap, distributions={"x": dist})
        assert bool(covered.disagreements(edited, snap)) is bad, (env, covered.disagreements(edited, snap))


def test_the_goldens_spec_is_used_only_when_it_agrees_with_the_checkout_facts():
    """host.spec names the repository's stack.yaml; it is loaded only when every source-keyed checkout
    of the golden is a source of it at the recorded pin, else the fallback (--spec, or found upward)."""
    from megacpp_env.snapshot.document import Snapshot
    from megacpp_env.spec import load_spec
    from tests.fixtures.spec import STACK_YAML

    spec = load_spec(STACK_YAML)
    name, source = next(iter(spec.sources.items()))

    def golden(key: str, pin: str) -> Snapshot:
        entry = {"path": f"/src/{key}", "source": key, "expected": pin, "head": pin}
        return Snapshot(facts={"checkouts": {key: entry}}, host={"spec": str(STACK_YAML)})

    assert goldens.spec_agrees(spec, golden(name, source.commit))
    assert goldens.spec_loader(golden(name, source.commit), lambda: None)() == spec
    for wrong in (golden(name, "0" * 40), golden("not-a-source-of-it", source.commit)):
        assert not goldens.spec_agrees(spec, wrong)
        assert goldens.spec_loader(wrong, lambda: "fallback")() == "fallback"  # type: ignore[arg-type,return-value]
