"""Re-locking moves only what was asked: the committed lock is uv's preferences; ``--upgrade-package``
and ``--upgrade`` say what else may move; ``--exclude-newer`` (recorded in the lock) makes a resolution
from scratch give the same lock on another day. Against a real local index (uv, real wheels, upload
times in the index) that gains newer versions between two runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from megacpp_env.cli import main
from megacpp_env.lock.pylock import read_pylock
from tests.fixtures.index import IndexServer, make_wheel, pypi_wheels, write_lock_spec, write_simple_index

OLD, NEW = "2025-01-01T00:00:00Z", "2026-01-01T00:00:00Z"
LOCKS = ("pylock.smoke-linux-amd64.toml", "pylock.smoke-linux-arm64.toml")


def first_release(dest: Path) -> list[Path]:
    """What the index holds at first: the default index's stand-ins and a small graph of our own."""
    return [
        *pypi_wheels(dest),
        make_wheel(dest, "app", "1.0", requires=("lib>=1",)),
        make_wheel(dest, "lib", "1.0"),
        make_wheel(dest, "idna", "3.10"),
        make_wheel(dest, "newpkg", "1.0", requires=("helper",)),
        make_wheel(dest, "helper", "1.0"),
    ]


def second_release(dest: Path) -> list[Path]:
    """Uploaded later: a newer version of nearly everything (a tool dependency included)."""
    return [
        make_wheel(dest, "app", "2.0", requires=("lib>=2",)),
        make_wheel(dest, "lib", "2.0"),
        make_wheel(dest, "lib", "3.0"),
        make_wheel(dest, "idna", "3.20"),
        make_wheel(dest, "six", "1.18.0"),
        make_wheel(dest, "helper", "2.0"),
        make_wheel(dest, "packaging", "26.1"),
    ]


class Index:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.old = first_release(root / "built-old")
        self.new = second_release(root / "built-new")
        self.publish(newer=False)
        self.server = IndexServer(root / "index").start()

    def publish(self, *, newer: bool) -> None:
        wheels = [*self.old, *(self.new if newer else [])]
        times = {w.name: OLD for w in self.old} | {w.name: NEW for w in self.new}
        write_simple_index(self.root / "index", wheels, upload_times=times)


@pytest.fixture
def index(tmp_path):
    idx = Index(tmp_path / "idx")
    yield idx
    idx.server.stop()


@pytest.fixture
def repo(tmp_path, index, monkeypatch):
    monkeypatch.setenv("UV_DEFAULT_INDEX", index.server.url)
    for name in ("UV_INDEX", "UV_EXTRA_INDEX_URL", "UV_INDEX_URL", "UV_EXCLUDE_NEWER"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "repo"


def spec_for(repo: Path, smoke: str) -> Path:
    return write_lock_spec(repo, "http://127.0.0.1:9/simple", smoke=smoke)


def lock(repo, capsys, monkeypatch, *args):
    """``lock smoke ARGS --json`` with an empty uv cache (each run sees the index as it is now)."""
    cache = repo.parent / f"uv-cache-{len(list(repo.parent.glob('uv-cache-*')))}"
    monkeypatch.setenv("UV_CACHE_DIR", str(cache))
    rc = main(["lock", "resolve", "smoke", "--spec", str(repo / "stack.yaml"), "--json", *args])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if out.startswith("{") else out), err


def versions(repo) -> dict[str, dict[str, str]]:
    return {name: {p.name: p.version for p in read_pylock(repo / "locks" / name).packages} for name in LOCKS}


def moved(run) -> set[str]:
    """The packages every written lock says moved (the same on both platforms here)."""
    per_lock = [{c["name"] for c in row["changes"]} for row in run["locks"]]
    assert all(x == per_lock[0] for x in per_lock), per_lock
    return per_lock[0]


def snapshot(repo) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((repo / "locks").iterdir())}


def test_a_changed_pin_and_an_added_package_move_only_what_they_force(repo, index, capsys, monkeypatch):
    spec_for(repo, '["app==1.0", "idna==3.10", six]')
    rc, _first, err = lock(repo, capsys, monkeypatch)
    assert rc == 0, err
    before = versions(repo)
    assert {k: before[LOCKS[0]][k] for k in ("app", "lib", "idna", "six", "packaging")} == {
        "app": "1.0", "lib": "1.0", "idna": "3.10", "six": "1.17.0", "packaging": "26.0"}  # fmt: skip

    index.publish(newer=True)  # newer idna, six, lib, helper, app and packaging appear
    spec_for(repo, '["app>=2", idna, six, newpkg]')  # a pin moved, another relaxed, a package added
    rc, run, err = lock(repo, capsys, monkeypatch)
    assert rc == 0, err
    after = versions(repo)
    for name in LOCKS:
        changed = {k for k in before[name].keys() | after[name].keys() if before[name].get(k) != after[name].get(k)}
        assert changed == {"app", "lib", "newpkg", "helper"}, (name, changed)
        assert (after[name]["app"], after[name]["lib"], after[name]["newpkg"], after[name]["helper"]) == (
            "2.0", "3.0", "1.0", "2.0")  # fmt: skip
        assert after[name]["idna"] == "3.10" and after[name]["six"] == "1.17.0"  # relaxed, still kept
        assert after[name]["packaging"] == "26.0"  # untouched: kept although 26.1 is there
    # the run says which moved, and how
    assert moved(run) == {"app", "lib", "newpkg", "helper"}
    row = run["locks"][0]
    assert {c["name"]: (c["kinds"], c["old"], c["new"]) for c in row["changes"]} == {
        "app": (["upgraded"], "1.0", "2.0"), "lib": (["upgraded"], "1.0", "3.0"),
        "newpkg": (["added"], "", "1.0"), "helper": (["added"], "", "2.0"),
    }  # fmt: skip
    rc = main(["lock", "resolve", "smoke", "--spec", str(repo / "stack.yaml")])  # the text form lists them too
    out = capsys.readouterr().out
    assert rc == 0 and "unchanged: locks/pylock.smoke-linux-amd64.toml" in out
    assert "  app:" not in out  # nothing moved this time


def test_upgrade_package_moves_only_that_package_and_what_it_forces(repo, index, capsys, monkeypatch):
    spec_for(repo, '[app, idna, six]')
    assert lock(repo, capsys, monkeypatch)[0] == 0
    before = versions(repo)
    index.publish(newer=True)
    rc, run, err = lock(repo, capsys, monkeypatch, "--upgrade-package", "App")  # any spelling of the name
    assert rc == 0, err
    after = versions(repo)
    assert moved(run) == {"app", "lib"}  # lib>=2 is what app 2.0 forces
    for name in LOCKS:
        assert (after[name]["app"], after[name]["lib"]) == ("2.0", "3.0")
        assert {k: v for k, v in after[name].items() if k not in ("app", "lib")} == {
            k: v for k, v in before[name].items() if k not in ("app", "lib")}  # fmt: skip
    rc, run, err = lock(repo, capsys, monkeypatch, "--upgrade-package", "six", "--upgrade-package", "idna")
    assert rc == 0, err
    assert moved(run) == {"six", "idna"}
    assert versions(repo)[LOCKS[0]]["six"] == "1.18.0" and versions(repo)[LOCKS[0]]["idna"] == "3.20"
    text = snapshot(repo)
    rc, _run, err = lock(repo, capsys, monkeypatch, "--upgrade-package", "nmupy")
    assert rc == 1
    assert "--upgrade-package: nmupy: in no selected lock and no requirement" in err
    assert snapshot(repo) == text  # nothing written


def test_a_relock_with_unchanged_inputs_changes_no_byte_after_the_index_moved(repo, index, capsys, monkeypatch):
    spec_for(repo, '[app, idna, six, newpkg]')
    assert lock(repo, capsys, monkeypatch)[0] == 0
    before = snapshot(repo)
    index.publish(newer=True)
    rc, run, err = lock(repo, capsys, monkeypatch)
    assert rc == 0, err
    assert [row["state"] for row in run["locks"]] == ["unchanged", "unchanged"]
    assert moved(run) == set()
    assert snapshot(repo) == before
    # the index did move: resolving from scratch takes every newer version
    rc, run, err = lock(repo, capsys, monkeypatch, "--upgrade")
    assert rc == 0, err
    assert moved(run) == {"app", "lib", "idna", "six", "helper", "packaging"}


def test_exclude_newer_is_recorded_and_makes_a_fresh_resolution_repeatable(repo, index, capsys, monkeypatch):
    spec_for(repo, '[app, idna, six]')
    rc, _run, err = lock(repo, capsys, monkeypatch, "--exclude-newer", "2025-06-01")
    assert rc == 0, err
    text = (repo / "locks" / LOCKS[0]).read_text()
    assert 'exclude-newer = "2025-06-01T00:00:00Z"' in text
    assert "--exclude-newer 2025-06-01T00:00:00Z" in read_pylock(repo / "locks" / LOCKS[0]).meta.uv_command
    before = snapshot(repo)
    index.publish(newer=True)
    # from scratch, another day: the cutoff the lock records hides what was uploaded since
    rc, run, err = lock(repo, capsys, monkeypatch, "--upgrade")
    assert rc == 0, err
    assert snapshot(repo) == before and moved(run) == set()
    # moving the cutoff moves the lock; `none` drops it
    rc, run, err = lock(repo, capsys, monkeypatch, "--upgrade", "--exclude-newer", "2026-06-01T00:00:00+02:00")
    assert rc == 0, err
    assert moved(run) == {"app", "lib", "idna", "six", "packaging"}
    assert 'exclude-newer = "2026-05-31T22:00:00Z"' in (repo / "locks" / LOCKS[0]).read_text()
    rc, run, err = lock(repo, capsys, monkeypatch, "--exclude-newer", "none")
    assert rc == 0, err
    assert "exclude-newer" not in (repo / "locks" / LOCKS[0]).read_text() and moved(run) == set()
    assert main(["lock", "check", "smoke", "--spec", str(repo / "stack.yaml")]) == 0  # not an input
    capsys.readouterr()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--exclude-newer", "yesterday"], "--exclude-newer: not a date or an RFC 3339 time: 'yesterday'"),
        (["--check", "--upgrade"], "unrecognized arguments: --check"),  # check is a sub-command of its own
    ],
)
def test_bad_upgrade_options_are_one_line(repo, capsys, monkeypatch, args, message):
    spec_for(repo, "[six]")
    rc, _out, err = lock(repo, capsys, monkeypatch, *args)
    assert rc in (1, 2) and message in err and "Traceback" not in err


def test_the_shipped_locks_keep_their_bytes():
    """A lock with no cutoff has no exclude-newer key: the committed locks re-render byte for byte."""
    from megacpp_env.lock.pylock import render_pylock

    for path in sorted((Path(__file__).resolve().parents[1] / "locks").glob("pylock.*.toml")):
        lock = read_pylock(path)
        assert lock.meta is not None and lock.meta.exclude_newer == ""
        assert render_pylock(lock) == path.read_text(), path.name


def test_a_nightly_relock_keeps_its_torch_until_asked(tmp_path, local_indexes, capsys, monkeypatch):
    """The explicit-index path (a probe, then the final run): a newer nightly on the index moves
    nothing until ``--upgrade-package torch`` (and what torch forces)."""
    from tests.fixtures.index import ARM, X86, nightly_wheels

    root = tmp_path / "nightly"
    wheels = nightly_wheels(root / "built")
    write_simple_index(root, wheels)
    server = IndexServer(root).start()
    try:
        repo = tmp_path / "repo"
        spec = write_lock_spec(repo, server.url)
        monkeypatch.setenv("UV_DEFAULT_INDEX", local_indexes.pypi.url)
        monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "cache-1"))
        assert main(["lock", "resolve", "gpu", "--spec", str(spec)]) == 0, capsys.readouterr()
        capsys.readouterr()
        path = repo / "locks" / "pylock.gpu-linux-arm64.toml"
        before = path.read_bytes()
        newer = "2.13.0.dev20261120+cu132"
        deps = ("numpy", "filelock", "pytorch-triton==3.6.0+git1234abcd")
        wheels += [make_wheel(root / "built", "torch", newer, tag=t, requires=deps) for t in (X86, ARM)]
        write_simple_index(root, wheels)
        monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "cache-2"))
        assert main(["lock", "resolve", "gpu", "--spec", str(spec)]) == 0
        assert "unchanged: locks/pylock.gpu-linux-arm64.toml" in capsys.readouterr().out
        assert path.read_bytes() == before
        assert main(["lock", "resolve", "gpu", "--spec", str(spec), "--upgrade-package", "torch"]) == 0
        out = capsys.readouterr().out
        assert f"torch: upgraded (pre-release) 2.13.0.dev20261101+cu132 -> {newer}" in out
        assert {p.name: p.version for p in read_pylock(path).packages}["torch"] == newer
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("name", "value", "remedy"),
    [
        ("UV_EXCLUDE_NEWER", OLD, "--exclude-newer"),
        ("UV_PRERELEASE", "allow", "resolutions.prereleases"),
        ("UV_RESOLUTION", "lowest", "pin the versions"),
        ("UV_INDEX_URL", "http://127.0.0.1:9/simple", "UV_DEFAULT_INDEX"),
        ("UV_NO_BINARY", "1", "a lock holds wheels"),
        ("UV_FIND_LINKS", "/srv/wheels", "indexes:"),
        ("UV_NO_BUILD", "true", "metadata"),
    ],
)
def test_a_uv_setting_that_would_reach_the_lock_unrecorded_is_refused_and_the_locks_kept(
    repo, index, capsys, monkeypatch, name, value, remedy
):
    """uv reads its settings from the environment too: one that changes what resolves (a cut-off, a
    pre-release or resolution mode, another index, no wheels) would make a lock that does not say how it
    was made. The resolution is refused, naming the variable and where the setting belongs; the
    committed locks stay as they were."""
    spec_for(repo, '["app==1.0", "idna==3.10", six]')
    rc, _, err = lock(repo, capsys, monkeypatch)
    assert rc == 0, err
    before = snapshot(repo)
    index.publish(newer=True)
    monkeypatch.setenv(name, value)
    rc, out, err = lock(repo, capsys, monkeypatch, "--upgrade")
    assert rc == 1, (out, err)
    assert f"{name} is set in the environment" in err and remedy in err and "unset it" in err, err
    assert snapshot(repo) == before


def test_a_resolution_passes_on_only_the_uv_settings_that_cannot_change_the_lock(
    repo, index, capsys, monkeypatch, tmp_path
):
    """What the real uv saw (a wrapper records its environment, then runs it): the cache, the default
    index, TLS and a named index's credentials; not a setting megacpp-env does not know (it could be one
    that changes a resolution), nor a uv config file's variable, nor a switch set off."""
    import shutil

    from megacpp_env.uv import uv_executable

    seen = tmp_path / "uv-env.json"
    spy = tmp_path / "uv-spy"
    spy.write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        f"json.dump(dict(os.environ), open({str(seen)!r}, 'w'))\n"
        f"os.execv({uv_executable()!r}, [{uv_executable()!r}, *sys.argv[1:]])\n"
    )
    spy.chmod(0o755)
    assert shutil.which(str(spy))
    monkeypatch.setenv("MEGACPP_ENV_UV", str(spy))
    monkeypatch.setenv("UV_INDEX_NIGHTLY_PASSWORD", "s3cret")
    monkeypatch.setenv("UV_SOME_FUTURE_SETTING", "1")
    monkeypatch.setenv("UV_NO_CONFIG", "1")
    monkeypatch.setenv("UV_NO_BINARY", "0")  # a switch set off changes nothing: dropped, not refused
    monkeypatch.setenv("UV_SYSTEM_CERTS", "1")
    spec_for(repo, '["app==1.0"]')
    rc, _, err = lock(repo, capsys, monkeypatch)
    assert rc == 0, err
    env = json.loads(seen.read_text())
    assert {k for k in env if k.startswith("UV_")} == {
        "UV_CACHE_DIR", "UV_DEFAULT_INDEX", "UV_INDEX_NIGHTLY_PASSWORD", "UV_PYTHON_DOWNLOADS", "UV_SYSTEM_CERTS"}  # fmt: skip
    assert env["UV_PYTHON_DOWNLOADS"] == "never"


def test_align_moves_only_what_the_reference_pins(repo, index, capsys, monkeypatch):
    """``--align`` re-resolves a diverging member constrained to the reference's versions, as its own
    re-lock: with its committed lock as uv's preferences and its recorded cut-off. A package only that
    platform has (six, which fastpath requires on aarch64 alone) is pinned by no constraint: it stays."""
    spec_for(repo, '["app==1.0", fastpath]')
    rc, _, err = lock(repo, capsys, monkeypatch)
    assert rc == 0, err
    before = versions(repo)
    assert "six" in before[LOCKS[1]] and "six" not in before[LOCKS[0]]  # aarch64's fastpath wheel needs six
    index.publish(newer=True)  # six 1.18.0 appears, among others
    spec_for(repo, '["app==1.0", fastpath, simdlib]')  # simdlib 1.1.0 has no x86_64 wheel: the platforms diverge
    rc, run, err = lock(repo, capsys, monkeypatch, "--align")
    assert rc == 0, (run, err)
    assert any("aligned smoke linux/arm64 to smoke linux/amd64" in n for n in run["notes"]), run
    after = versions(repo)
    for name in LOCKS:
        changed = {k for k in before[name].keys() | after[name].keys() if before[name].get(k) != after[name].get(k)}
        assert changed == {"simdlib"} and after[name]["simdlib"] == "1.0.0", (name, changed)


def test_align_keeps_the_recorded_cutoff(repo, index, capsys, monkeypatch):
    """The aligned member is written with the cut-off the run resolved with, like every other lock."""
    spec_for(repo, '["app==1.0", simdlib]')
    rc, run, err = lock(repo, capsys, monkeypatch, "--align", "--exclude-newer", "2025-06-01")
    assert rc == 0, (run, err)
    assert any("aligned smoke linux/arm64 to smoke linux/amd64" in n for n in run["notes"]), run
    cutoffs = {name: read_pylock(repo / "locks" / name).meta.exclude_newer for name in LOCKS}
    assert set(cutoffs.values()) == {"2025-06-01T00:00:00Z"}, cutoffs
