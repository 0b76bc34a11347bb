"""Integrity of installed distributions in a real venv: edit, delete, add, and the hash cache."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from megacpp_env.snapshot.collect import take_snapshot
from megacpp_env.snapshot.collectors import gpu
from megacpp_env.snapshot.diff import diff_snapshots


def _messages(report):
    return [f.message for f in report.findings]


def test_unchanged_environment_has_the_same_digest_and_uses_the_cache(snap_options):
    first = take_snapshot(snap_options())
    second = take_snapshot(snap_options())
    assert first.digest == second.digest
    assert first.timing["integrity"]["hashed"] == first.timing["integrity"]["files"] > 0
    assert second.timing["integrity"]["hashed"] == 0
    assert second.timing["integrity"]["cache_hits"] == second.timing["integrity"]["files"]
    assert not diff_snapshots(first, second).drift


def test_inspects_the_given_interpreter_not_the_tool(snap_options, snap_venv):
    snap = take_snapshot(snap_options())
    dists = snap.facts["python"]["distributions"]
    assert set(dists) == {"demo-pkg", "other-thing"}
    demo = dists["demo-pkg"]
    assert demo["version"] == "1.0"
    assert demo["installer"] == "uv"
    integrity = demo["integrity"]
    assert integrity["files"] >= 7  # the four files, METADATA, WHEEL and what uv adds (INSTALLER, ...)
    assert (integrity["status"], integrity["modified"], integrity["removed"], integrity["added"]) == ("ok", [], [], [])
    assert snap.facts["python"]["interpreter"]["executable"].startswith(str(snap_venv.root))


def test_virtual_env_variable_selects_the_venv(snap_options, snap_venv):
    environ = {**os.environ, "VIRTUAL_ENV": str(snap_venv.root)}
    snap = take_snapshot(snap_options(python=None, environ=environ))
    assert set(snap.facts["python"]["distributions"]) == {"demo-pkg", "other-thing"}


def test_edit_in_place_names_distribution_and_file(snap_options, snap_venv):
    before = take_snapshot(snap_options())
    target = snap_venv.site / "demo_pkg" / "ops" / "x.py"
    target.write_text("def f(a):\n    return a + 2\n")  # same size: only the hash tells
    after = take_snapshot(snap_options())
    assert after.facts["python"]["distributions"]["demo-pkg"]["integrity"]["modified"] == ["demo_pkg/ops/x.py"]
    report = diff_snapshots(before, after)
    assert report.drift
    assert _messages(report) == ["demo_pkg 1.0: 1 file modified since install: demo_pkg/ops/x.py"]
    assert report.findings[0].severity == "error"


def test_edit_that_restores_mtime_still_misses_the_cache(snap_options, snap_venv):
    take_snapshot(snap_options())  # warm the cache
    target = snap_venv.site / "demo_pkg" / "ops" / "x.py"
    st = target.stat()
    target.write_text("def f(a):\n    return a + 3\n")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = take_snapshot(snap_options())
    assert after.facts["python"]["distributions"]["demo-pkg"]["integrity"]["modified"] == ["demo_pkg/ops/x.py"]


def test_deleted_file_is_reported(snap_options, snap_venv):
    before = take_snapshot(snap_options())
    (snap_venv.site / "demo_pkg" / "data" / "table.bin").unlink()
    after = take_snapshot(snap_options())
    assert _messages(diff_snapshots(before, after)) == [
        "demo_pkg 1.0: 1 file removed since install: demo_pkg/data/table.bin"
    ]


def test_stray_file_in_a_package_is_reported(snap_options, snap_venv):
    before = take_snapshot(snap_options())
    (snap_venv.site / "demo_pkg" / "ops" / "patched.py").write_text("HOT = 1\n")
    (snap_venv.site / "demo_pkg" / "ops" / "__pycache__").mkdir(exist_ok=True)
    (snap_venv.site / "demo_pkg" / "ops" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"ignored")
    after = take_snapshot(snap_options())
    assert _messages(diff_snapshots(before, after)) == [
        "demo_pkg 1.0: 1 file added to the package since install: demo_pkg/ops/patched.py"
    ]


def test_unowned_pth_file_in_site_packages_is_recorded(snap_options, snap_venv):
    before = take_snapshot(snap_options())
    (snap_venv.site / "zz_hook.pth").write_text("import os\n")
    after = take_snapshot(snap_options())
    unowned = after.facts["python"]["unowned_site_files"][str(snap_venv.site)]
    assert "zz_hook.pth" in unowned
    assert any("zz_hook.pth" in m for m in _messages(diff_snapshots(before, after)))


def test_version_change_is_one_finding(snap_options, snap_venv, tmp_path):
    from tests.fixtures.snapshot import DEMO_FILES, make_wheel

    before = take_snapshot(snap_options())
    snap_venv.install(make_wheel(tmp_path / "wheels", "demo_pkg", "1.1", DEMO_FILES))
    after = take_snapshot(snap_options())
    assert _messages(diff_snapshots(before, after)) == ["demo_pkg 1.0 -> 1.1"]


def test_runs_with_no_gpu_no_git_no_compilers(snap_options, tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    bare = tmp_path / "tree"
    (bare / "src").mkdir(parents=True)
    environ = {"PATH": str(empty), "HOME": str(tmp_path)}
    snap = take_snapshot(snap_options(environ=environ, paths=(bare,)))
    assert snap.facts["compilers"]["gcc"] == {"error": "gcc not found"}
    assert snap.facts["compilers"]["nvcc"] == {"error": "nvcc not found"}
    if not snap.facts["gpu"].get("devices"):  # a GPU host's NVML answers whatever PATH holds
        assert snap.facts["gpu"] == {"present": False, "devices": [], "reason": gpu.NO_DRIVER}  # a fact, no error
    assert snap.facts["checkouts"][str(bare)]["has_git"] is False
    assert set(snap.facts["python"]["distributions"]) == {"demo-pkg", "other-thing"}


def test_split_units_find_the_same_drift(snap_options, snap_venv, monkeypatch):
    from megacpp_env.snapshot.verify import integrity

    whole = take_snapshot(snap_options(workers=1))
    monkeypatch.setattr(integrity, "SPLIT_MIN", 1)  # split demo_pkg into ops/, data/ and the rest
    split = take_snapshot(snap_options(workers=8))
    assert split.timing["integrity"]["workers"] > 1
    assert split.digest == whole.digest
    (snap_venv.site / "demo_pkg" / "ops" / "x.py").write_text("patched = True\n")
    (snap_venv.site / "demo_pkg" / "data" / "extra.bin").write_bytes(b"x")
    (snap_venv.site / "demo_pkg" / "stray.py").write_text("")
    integ = take_snapshot(snap_options(workers=8)).facts["python"]["distributions"]["demo-pkg"]["integrity"]
    assert integ["modified"] == ["demo_pkg/ops/x.py"]
    assert integ["added"] == ["demo_pkg/data/extra.bin", "demo_pkg/stray.py"]
    assert integ["files"] == whole.facts["python"]["distributions"]["demo-pkg"]["integrity"]["files"]


def test_a_failed_probe_is_recorded_not_raised(snap_options, tmp_path):
    bogus = tmp_path / "bin" / "python"
    bogus.parent.mkdir()
    bogus.write_text("#!/bin/sh\nexit 3\n")
    bogus.chmod(0o755)
    snap = take_snapshot(snap_options(python=str(bogus)))
    assert "python failed (exit 3)" in snap.facts["python"]["error"]
    assert "system" in snap.facts and "error" not in snap.facts["system"]


def _age_tree(root, seconds=3600):
    """Directories last modified an hour ago: old enough for the walk to be cached (not racy)."""
    past = time.time_ns() - seconds * 1_000_000_000
    for d in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        os.utime(d, ns=(past, past))


def test_warm_run_skips_the_walk_until_a_directory_changes(snap_options, snap_venv):
    _age_tree(snap_venv.site)
    first = take_snapshot(snap_options())
    assert first.timing["integrity"]["walked"] >= 1
    warm = take_snapshot(snap_options())
    assert (warm.timing["integrity"]["walked"], warm.digest) == (0, first.digest)
    assert warm.timing["integrity"]["cache_hits"] == warm.timing["integrity"]["files"]
    (snap_venv.site / "demo_pkg" / "ops" / "x.py").write_text("patched = True\n")  # no directory changes
    edited = take_snapshot(snap_options())
    integ = edited.facts["python"]["distributions"]["demo-pkg"]["integrity"]
    assert (edited.timing["integrity"]["walked"], integ["modified"]) == (0, ["demo_pkg/ops/x.py"])
    ops = snap_venv.site / "demo_pkg" / "ops"
    st = ops.stat()
    (ops / "stray.py").write_text("")
    os.utime(ops, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime put back: ctime still moved
    added = take_snapshot(snap_options()).facts["python"]["distributions"]["demo-pkg"]["integrity"]["added"]
    assert added == ["demo_pkg/ops/stray.py"]


def test_cache_is_one_marshal_file_per_unit(snap_options, tmp_path):
    take_snapshot(snap_options())
    (cache,) = (tmp_path / "cache").glob("record-hashes-*")
    names = sorted(p.suffix for p in cache.iterdir())
    assert set(names) == {".bin", ".json"} and names.count(".json") == 1  # plan.json and the units


def test_the_planner_orders_work_by_bytes_not_rows():
    """Two distributions of 10 rows each: one holds six 3 MiB files, the other ten small files;
    500 rows of small files in a third. From an empty cache the 18 MiB are claimed first; with every
    unit cached (a repeat: a stat per row), rows decide and the 500 rows go first."""
    from megacpp_env.snapshot.verify import integrity

    def record(key: str, rows: list[tuple[str, int]]) -> integrity.DistRecord:
        text = "".join(f"{path},sha256=x,{size}\n" for path, size in rows)
        return integrity.DistRecord.from_text(key, f"/site/{key}.dist-info", text.encode())

    mid = 3 << 20
    assert mid < integrity.BIG_FILE
    big = record(
        "big", [*((f"big/lib/l{i}.so", mid) for i in range(6)), *((f"big/lib/f{i}.py", 100) for i in range(4))]
    )
    small = record("small", [(f"small/f{i}.py", 100) for i in range(10)])
    many = record("many", [(f"many/f{i}.py", 100) for i in range(500)])
    assert big.lines == 10 and big.heavy[""] == big.heavy["big/lib"] == 6 * mid // integrity.BYTES_PER_ROW
    assert big.big == []  # under BIG_FILE: a worker's
    groups = integrity.group_records([big, small, many])
    cold = integrity.unit_order(groups, 2)
    assert cold[0].group.dists[0].key == "big"  # by rows it would have come after "many"
    warm = integrity.unit_order(groups, 2, warm=lambda _unit: True)
    assert warm[0].group.dists[0].key == "many"
    assert {u.id for u in warm} == {u.id for u in cold}  # the same units: the same cache files


def test_big_rows_are_the_parents_and_weigh_nothing_in_the_deal():
    from megacpp_env.snapshot.verify import integrity

    huge = 2 << 30
    rows = [
        f"t/lib/libhuge.so,sha256=abc,{huge}",
        f'"t/lib/q,uoted.so",sha256=abc,{huge}',  # quoted: the worker parses it
        f"./t/lib/odd.so,sha256=abc,{huge}",  # normalized by the worker: its
        f"t/lib/nohash.so,,{huge}",
        "t/lib/small.py,sha256=abc,100",
    ]
    rec = integrity.DistRecord.from_text("t", "/site/t.dist-info", ("\n".join(rows) + "\n").encode())
    assert rec.big == [["t/lib/libhuge.so", "sha256=abc", huge]]
    assert rec.big_paths() == ["/site/t/lib/libhuge.so"]
    assert rec.heavy.get("t/lib", 0) == 0  # no worker hashes a big file: no unit weighs it
    (unit,) = integrity.group_records([rec])[0].units(10**9)
    assert _claimed(unit)["big"] == ["/site/t/lib/libhuge.so"]


def test_big_files_hashed_by_the_parent_find_the_same_drift(snap_options, snap_venv, monkeypatch, tmp_path):
    """Every file made "big": the parent's threads and its cache see what the workers see."""
    import re

    from megacpp_env.snapshot.verify import integrity

    whole = take_snapshot(snap_options())
    monkeypatch.setattr(integrity, "BIG_FILE", 1)
    monkeypatch.setattr(integrity, "BIG_RE", re.compile(r",(\d+)\r?$", re.MULTILINE))
    opts = snap_options(cache_dir=tmp_path / "cache-big")
    first = take_snapshot(opts)
    stats = first.timing["integrity"]
    assert first.digest == whole.digest
    assert stats["big_files"] > 0 and stats["hashed"] == stats["files"]
    again = take_snapshot(opts).timing["integrity"]
    assert (again["hashed"], again["cache_hits"]) == (0, again["files"])
    target = snap_venv.site / "demo_pkg" / "ops" / "x.py"
    st = target.stat()
    target.write_text("def f(a):\n    return a + 3\n")  # same size, mtime put back: ctime moved
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    (snap_venv.site / "demo_pkg" / "data" / "table.bin").unlink()
    integ = take_snapshot(opts).facts["python"]["distributions"]["demo-pkg"]["integrity"]
    assert (integ["modified"], integ["removed"]) == (["demo_pkg/ops/x.py"], ["demo_pkg/data/table.bin"])
    assert integ["files"] == whole.facts["python"]["distributions"]["demo-pkg"]["integrity"]["files"]
    assert list((tmp_path / "cache-big").glob("record-hashes-*/big-files.bin"))


def test_deep_split_units_find_the_same_drift(snap_options, snap_venv, monkeypatch, tmp_path):
    """Directories split down to the fourth level (a unit's ``only`` with its big subdirectories
    excluded): the same files checked, the same edits and strays found."""
    from megacpp_env.snapshot.verify import integrity
    from tests.fixtures.snapshot import make_wheel

    files = {
        "deep_pkg/__init__.py": "",
        "deep_pkg/a/__init__.py": "",
        "deep_pkg/a/b/x.py": "X = 1\n",
        "deep_pkg/a/b/c/y.py": "Y = 1\n",
        "deep_pkg/a/b/c/d/z.py": "Z = 1\n",
        "deep_pkg/a/other.py": "",
    }
    snap_venv.install(make_wheel(tmp_path / "wheels", "deep_pkg", "1.0", files))
    whole = take_snapshot(snap_options(workers=1))
    monkeypatch.setattr(integrity, "SPLIT_MIN", 1)
    opts = snap_options(workers=8, cache_dir=tmp_path / "cache-split")
    split = take_snapshot(opts)
    assert split.digest == whole.digest
    units = [p.stem for p in next((tmp_path / "cache-split").glob("record-hashes-*")).glob("*.bin")]
    assert len(units) >= 6  # demo_pkg's and deep_pkg's levels, other_thing
    deep = snap_venv.site / "deep_pkg" / "a" / "b"
    (deep / "c" / "y.py").write_text("Y = 2\n")
    (deep / "c" / "new.py").write_text("")
    (deep / "stray.py").write_text("")
    (deep / "c" / "d" / "z.py").unlink()
    integ = take_snapshot(opts).facts["python"]["distributions"]["deep-pkg"]["integrity"]
    assert integ["modified"] == ["deep_pkg/a/b/c/y.py"]
    assert integ["removed"] == ["deep_pkg/a/b/c/d/z.py"]
    assert integ["added"] == ["deep_pkg/a/b/c/new.py", "deep_pkg/a/b/stray.py"]
    assert integ["files"] == whole.facts["python"]["distributions"]["deep-pkg"]["integrity"]["files"]


def test_units_split_a_costly_directory_one_level_down():
    from megacpp_env.snapshot.verify import integrity

    rows = [f"t/inc/big/f{i}.h" for i in range(900)] + [f"t/inc/small/f{i}.h" for i in range(50)]
    rows += [f"t/inc/f{i}.h" for i in range(450)] + [f"t/mod/f{i}.py" for i in range(10)]
    text = "".join(f"{r},sha256=x,100\n" for r in rows)
    rec = integrity.DistRecord.from_text("t", "/site/t.dist-info", text.encode())
    assert rec.subdirs["t/inc"] == 1400 and rec.subdirs["t/inc/big"] == 900
    units = integrity.group_records([rec])[0].units(600)
    got = {(u.only, u.exclude): u.weight for u in units}
    assert got == {(("t/inc/big",), ()): 900, (("t/inc",), ("t/inc/big",)): 500, ((), ("t/inc",)): 10}
    assert sum(got.values()) == rec.lines


def _plan_by_rows(text: str) -> tuple[dict[str, int], dict[str, int]]:
    """The planner's counts the slow way, one row at a time (the reference ``from_text`` must equal):
    rows under each second-, third- and fourth-level directory, and their bytes in rows."""
    from megacpp_env.snapshot.verify import integrity

    subdirs: dict[str, int] = {}
    heavy = {"": 0}
    for line in text.splitlines():
        path, _, size = line.rpartition(",")
        path = path.rpartition(",")[0]
        m = re.match(r'"?([^/,"]+(?:/[^/,"]+)*)/', path) if "\n" not in path else None
        dirs = m.group(1).split("/") if m else []
        levels = ["/".join(dirs[:i]) for i in range(2, min(len(dirs), 4) + 1)]
        for level in levels:
            subdirs[level] = subdirs.get(level, 0) + 1
        n = int(size) // integrity.BYTES_PER_ROW if size.isdigit() and len(size) >= 5 else 0
        if n and n < integrity.BIG_FILE // integrity.BYTES_PER_ROW:
            heavy[""] += n
            for level in levels:
                heavy[level] = heavy.get(level, 0) + n
    kept = {p: n for p, n in subdirs.items() if n + heavy.get(p, 0) >= integrity.SPLIT_MIN}
    return kept, {p: n for p, n in heavy.items() if not p or p in kept}


@pytest.mark.parametrize("seed", range(6))
def test_the_planners_counts_equal_a_row_by_row_count(seed):
    """``from_text`` counts levels with one pattern each (in C); a row-by-row count of random
    RECORDs (deep trees, quoted names with commas, CRLF, sizes around the thresholds) is the same."""
    import random

    from megacpp_env.snapshot.verify import integrity

    rnd = random.Random(seed)
    names = ["a", "b", "inc", "ops", "x y", "z.d"]
    sizes = [0, 10, 9999, 32767, 32768, 100_000, (4 << 20) - 1, 4 << 20, 9 << 20]
    rows = []
    for _ in range(rnd.randint(600, 2500)):
        depth = rnd.choice([0, 1, 2, 3, 4, 5, 6])
        parts = ["t", *(rnd.choice(names) for _ in range(depth)), f"f{rnd.randint(0, 99)}.py"]
        rel = "/".join(parts)
        if rnd.random() < 0.05:
            rel = f'"{rel.replace("f", "q,", 1)}"'
        size = rnd.choice(sizes) + rnd.randint(0, 3)
        rows.append(f"{rel},sha256=x,{size}" + ("\r" if rnd.random() < 0.1 else ""))
    text = "\n".join(rows) + "\n"
    rec = integrity.DistRecord.from_text("t", "/site/t.dist-info", text.encode())
    subdirs, heavy = _plan_by_rows(text)
    assert rec.subdirs == subdirs
    assert rec.heavy == heavy
    assert rec.subdirs  # the draw made directories a split can choose


def test_a_units_id_does_not_depend_on_the_cache():
    """The units name their cache files: the same split whether a full run hashes every file or a
    repeat finds every unit cached (a split that moved would make a repeat cold)."""
    from megacpp_env.snapshot.verify import integrity

    rows = [f"t/inc/big/f{i}.h,sha256=x,100" for i in range(900)] + [f"t/mod/f{i}.py,sha256=x,100" for i in range(500)]
    rec = integrity.DistRecord.from_text("t", "/site/t.dist-info", ("\n".join(rows) + "\n").encode())
    groups = integrity.group_records([rec])
    full = integrity.unit_order(groups, 4)
    repeat = integrity.unit_order(groups, 4, warm=lambda _unit: True)
    assert {u.id for u in full} == {u.id for u in repeat}
    assert len(full) > 1  # it was split


def _claimed(unit):
    """What a worker verifies when it claims ``unit``: the units line as the parent sends it, read back."""
    from megacpp_env.snapshot.verify import integrity
    from megacpp_env.snapshot.verify import integrity_worker as one

    return one.claimed(json.loads(integrity._units_line([unit])), 0)


QUEUE_CLAIMER = """
import os, sys, time
sys.path.insert(0, sys.argv[2])  # the worker's own directory: it runs as a script, stdlib only
from integrity_worker import claims
sys.stdin.readline()  # the setup line
got = []
for index in claims(int(sys.argv[-1])):
    got.append(index)
    time.sleep(float(sys.argv[1]) if index == 0 else 0)
print(" ".join(map(str, got)))
"""


def test_the_workers_claim_every_item_once_from_the_shared_queue():
    """``Crew``: real processes claim indices from one pipe; each index goes to exactly one of them,
    in order, and a worker held up by its first item (the largest file) leaves the rest to the others."""
    import sys

    from megacpp_env.snapshot.verify import integrity
    from megacpp_env.snapshot.verify.crew import Crew

    argv = [sys.executable, "-c", QUEUE_CLAIMER, "0.5", str(integrity.WORKER.parent)]
    crew = Crew(argv, 4)
    crew.begin("{}\n", 1)  # the largest file first, alone
    results = crew.finish("{}\n", 3000, timeout=60)
    claimed = [[int(i) for i in r.stdout.split()] for r in results]
    every = sorted(i for c in claimed for i in c)
    assert every == list(range(3001))  # none lost, none twice: each read of an index is atomic
    assert all(c == sorted(c) for c in claimed)  # each claims in queue order
    holder = next(c for c in claimed if 0 in c)
    assert len(holder) < 3001 // 4  # the others took most of the rest while it was busy


def test_programs_take_their_input_in_two_parts_and_report_a_failure(tmp_path):
    """``Programs``: each starts on its first part, gets the rest later; one that fails is named
    with its last stderr line; ``kill`` reaps what was started."""
    import sys

    from megacpp_env.errors import ToolError
    from megacpp_env.snapshot.proc import Programs

    echo = [sys.executable, "-c", "import sys\nfor line in sys.stdin: print(line.strip().upper())"]
    programs = Programs([echo, echo], ["a\n", "b\n"])
    assert [r.stdout.split() for r in programs.finish(["c\n", "d\n"], timeout=30)] == [["A", "C"], ["B", "D"]]
    fails = [sys.executable, "-c", "import sys; sys.stdin.readline(); sys.exit('no such job')"]
    with pytest.raises(ToolError, match="no such job"):
        Programs([echo, fails], ["x\n", "y\n"]).finish(["z\n", "w\n" * 100_000], timeout=30)
    waits = Programs([echo], ["q\n"])
    waits.kill()
    assert all(p.returncode is not None for p in waits.procs)


def test_the_timeout_counts_the_last_part_too():
    """A program that never reads its stdin cannot hold ``finish`` past the timeout with a last
    part bigger than the pipe: it is killed and reported as timed out."""
    import sys

    from megacpp_env.errors import ToolError
    from megacpp_env.snapshot.proc import Programs

    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    started = time.monotonic()
    with pytest.raises(ToolError, match="timed out after 1s"):
        Programs([sleeper], [""]).finish(["x" * (1 << 20)], timeout=1)
    assert time.monotonic() - started < 30


def test_only_the_largest_files_worker_keeps_its_priority_in_a_full_run(tmp_path):
    """Every worker is told to yield when big files are to be hashed; the one whose first claim is
    the largest (index 0) keeps its priority, every other runs ``YIELD_NICE`` lower; a repeat
    (nothing to hash) changes no priority."""
    import os

    from megacpp_env.snapshot.verify import integrity
    from megacpp_env.snapshot.verify.crew import Crew

    files = []
    for i, size in enumerate((3 << 20, 2 << 20, 1 << 20)):
        (tmp_path / f"{i}.so").write_bytes(b"x" * size)
        files.append(("t", (f"t/{i}.so", str(tmp_path / f"{i}.so"), "sha256=x", size), (size, 1, 2, 3)))
    big = integrity.BigFiles(None, None, [])
    big.pending = files
    setup = json.loads(integrity._setup_line(big, None))
    assert setup["nice"] == integrity.YIELD_NICE and [f[2] for f in setup["hash"]] == [3 << 20, 2 << 20, 1 << 20]
    crew = Crew(integrity.WORKER_ARGV, 3)
    crew.begin(integrity._setup_line(big, None), 3)
    results = [json.loads(r.stdout) for r in crew.finish(integrity._units_line([]), 0, timeout=60)]
    base = os.nice(0)
    by_first = {r["digests"][0][0]: r["nice"] for r in results if r["digests"]}
    assert by_first[0] == base
    assert all(nice == base + integrity.YIELD_NICE for first, nice in by_first.items() if first != 0)
    big.pending = []
    assert "nice" not in json.loads(integrity._setup_line(big, None))


def _cold_reading_every_row(group, only, exclude):
    """``integrity_worker.cold`` as it was: every row of the group's RECORDs parsed for every unit."""
    from megacpp_env.snapshot.verify import integrity_worker as one

    location = group["location"]
    dirs: list = []
    kinds = one.top_kinds(location, group["tops"], only, exclude)
    seen = one.scan(location, kinds, exclude, dirs)
    dists = [(key, one.read_record(location, info)) for key, info, *_ in group["dists"]]
    recorded = {path for _key, entries in dists for _r, path, _d, _s in entries}
    strays = seen - recorded
    added = one._attribute(strays, location, dists) if strays else {}
    checks = [(key, [e for e in one.in_unit(entries, only, exclude) if e[2]]) for key, entries in dists]
    inside = {e[1] for _k, entries in dists for e in one.in_unit(entries, only, exclude)}
    return kinds, checks, added, recorded & inside


@pytest.mark.parametrize("quoted", [False, True])
def test_a_unit_parses_its_own_rows_and_finds_what_reading_every_row_finds(tmp_path, monkeypatch, quoted):
    """A unit parses only the rows under its part of the tree (torch's units parsed all of torch's
    RECORD each): the same rows to check, strays and owners, recorded files, for every unit of a
    split group, with rows written ``./``, ``a/../``, ``a//b`` and (second case) quoted rows."""
    from megacpp_env.snapshot.verify import integrity
    from megacpp_env.snapshot.verify import integrity_worker as one

    site = tmp_path / "site"
    rows = []
    for i in range(40):
        for sub in ("inc/ops", "inc/core", "lib", "mod"):
            rel = f"t/{sub}/f{i}.py"
            (site / rel).parent.mkdir(parents=True, exist_ok=True)
            (site / rel).write_text(f"# {i}\n")
            rows.append(f"{rel},sha256=x,5")
    rows += ["./t/lib/dot.py,sha256=x,5", "t/mod/../lib/up.py,sha256=x,5", "t//inc/ops/dbl.py,sha256=x,5"]
    for rel in ("t/lib/dot.py", "t/lib/up.py", "t/inc/ops/dbl.py"):
        (site / rel).write_text("x\n")
    if quoted:
        rows.append('"t/inc/core/q,uoted.py",sha256=x,5')
        (site / "t/inc/core/q,uoted.py").write_text("x\n")
    rows += ["t-1.0.dist-info/RECORD,,", "../../bin/t-tool,sha256=x,5"]
    info = site / "t-1.0.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    for stray in ("t/inc/ops/stray.py", "t/inc/new/deep/s.py", "t/lib/s2.py", "t/s3.py"):
        (site / stray).parent.mkdir(parents=True, exist_ok=True)
        (site / stray).write_text("")
    monkeypatch.setattr(integrity, "SPLIT_MIN", 10)
    rec = integrity.DistRecord.from_text("t", str(info), (info / "RECORD").read_bytes())
    units = integrity.group_records([rec])[0].units(30)
    assert len(units) >= 4 and any(u.only and u.exclude for u in units)
    for unit in units:
        group, only, exclude = _claimed(unit), list(unit.only), list(unit.exclude)
        state, recorded, _trusted = one.cold(group, only, exclude)
        kinds, checks, added, recorded_inside = _cold_reading_every_row(group, only, exclude)
        assert (state["kinds"], state["checks"], state["added"]) == (kinds, checks, added), unit.id
        assert recorded == recorded_inside, unit.id
    found = {
        rel
        for unit in units
        for rels in one.cold(_claimed(unit), list(unit.only), list(unit.exclude))[0]["added"].values()
        for rel in rels
    }
    assert found == {"t/inc/ops/stray.py", "t/inc/new/deep/s.py", "t/lib/s2.py", "t/s3.py"}


WRAPPED_WORKER = """
import json, os, signal, subprocess, sys
data = sys.stdin.read()
mapped = any(json.loads(line).get("mapped") for line in data.splitlines() if line.strip())
with open(sys.argv[1], "a") as log:
    log.write("mapped\\n" if mapped else "plain\\n")
if mapped and sys.argv[2] == "sigbus":
    os.kill(os.getpid(), signal.SIGBUS)
if sys.argv[2] == "exit3":
    sys.exit(3)
queue = int(sys.argv[-1])
done = subprocess.run(
    [sys.executable, "-I", "-S", sys.argv[3], str(queue)], input=data, capture_output=True, text=True, pass_fds=(queue,)
)
sys.stdout.write(done.stdout)
sys.stderr.write(done.stderr)
sys.exit(done.returncode)
"""


@pytest.mark.parametrize("fault", ["sigbus", "exit3", "none"])
def test_a_worker_killed_by_sigbus_makes_the_run_start_again_without_maps(tmp_path, monkeypatch, fault):
    """The big files are hashed from memory maps; a file truncated under a map kills its worker with
    SIGBUS: the run starts again without maps and reports what a plain run reports. Any other
    failure is reported, not retried."""
    import base64
    import hashlib
    import re
    import sys

    from megacpp_env.errors import ToolError
    from megacpp_env.snapshot.verify import integrity

    site = tmp_path / "site"
    (site / "p").mkdir(parents=True)
    rows = []
    for i, size in enumerate((3 << 20, 2 << 20, 5)):
        data = bytes([i]) * size
        (site / "p" / f"f{i}.bin").write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"p/f{i}.bin,sha256={digest},{size}")
    (site / "p" / "f1.bin").write_bytes(b"\1" * (2 << 20) + b"x")  # drifted
    info = site / "p-1.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("\n".join([*rows, "p-1.dist-info/RECORD,,"]) + "\n")
    monkeypatch.setattr(integrity, "BIG_FILE", 1 << 20)
    monkeypatch.setattr(integrity, "BIG_RE", re.compile(r",(\d+)\r?$", re.MULTILINE))
    log = tmp_path / "workers.log"
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(WRAPPED_WORKER)
    argv = (sys.executable, str(wrapper), str(log), fault, str(integrity.WORKER))
    monkeypatch.setattr(integrity, "WORKER_ARGV", argv)
    if fault == "exit3":
        with pytest.raises(ToolError, match="exit 3"):
            integrity.verify([("p", str(info))], cache_dir=None, workers=2)
        assert log.read_text().split() == ["mapped"]
        return
    verified = integrity.verify([("p", str(info))], cache_dir=None, workers=2)
    report = verified.reports["p"]
    assert (report["files"], report["modified"], report["status"]) == (3, ["p/f1.bin"], "drifted")
    assert verified.stats["hashed"] == 2  # f1 is caught by its size, unread
    runs = log.read_text().split()
    if fault == "sigbus":
        assert "mapped" in runs and runs[-1] == "plain"  # the second run: no maps
        assert runs.index("plain") == runs.count("mapped")  # every mapped worker came first
    else:
        assert set(runs) == {"mapped"}


def test_a_record_that_appears_after_the_workers_were_counted_still_gets_one(tmp_path, monkeypatch):
    """The workers are started before the RECORDs are read, one per RECORD found then; a RECORD
    that appears in between (a distribution installed meanwhile) still gets a worker: its files are
    verified, none is dropped."""
    import re

    from megacpp_env.snapshot.verify import integrity

    site = tmp_path / "site"
    (site / "p").mkdir(parents=True)
    (site / "p" / "a.py").write_text("A = 1\n")
    (site / "p" / "big.bin").write_bytes(b"\0" * (2 << 20))
    info = site / "p-1.dist-info"
    info.mkdir()
    (info / "RECORD").write_text(f"p/a.py,sha256=wrong,6\np/big.bin,sha256=wrong,{2 << 20}\np-1.dist-info/RECORD,,\n")
    monkeypatch.setattr(integrity, "BIG_FILE", 1 << 20)
    monkeypatch.setattr(integrity, "BIG_RE", re.compile(r",(\d+)\r?$", re.MULTILINE))
    monkeypatch.setattr(integrity.os.path, "isfile", lambda _path: False)  # counted before it was there
    verified = integrity.verify([("p", str(info))], cache_dir=None, workers=4)
    report = verified.reports["p"]
    assert (report["files"], sorted(report["modified"])) == (2, ["p/a.py", "p/big.bin"])
    assert verified.stats["workers"] == 1 and verified.stats["hashed"] == 2


def test_a_repeat_starts_half_the_workers_and_big_files_to_hash_start_them_all(tmp_path, monkeypatch):
    """With a plan from the last run (a repeat: a stat per file) half the workers start, four at
    least; with no plan (a first run) or with big files to hash (one was replaced) all of them."""
    import base64
    import hashlib
    import re

    from megacpp_env.snapshot.verify import integrity

    monkeypatch.setattr(integrity, "BIG_FILE", 1 << 16)
    monkeypatch.setattr(integrity, "BIG_RE", re.compile(r",(\d+)\r?$", re.MULTILINE))
    site = tmp_path / "site"
    dists = []
    for i in range(10):
        (site / f"p{i}").mkdir(parents=True)
        data = bytes([i]) * (1 << 17)
        (site / f"p{i}" / "lib.so").write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        info = site / f"p{i}-1.dist-info"
        info.mkdir()
        (info / "RECORD").write_text(f"p{i}/lib.so,sha256={digest},{1 << 17}\np{i}-1.dist-info/RECORD,,\n")
        dists.append((f"p{i}", str(info)))
    rows = []  # one distribution big enough to be split into units: the split must not follow the workers started
    # many/a (900 rows) is split in two for a run of 10 workers (a target of ~455 rows), not for 5
    for sub, count in (("a/x", 450), ("a/y", 450), ("b", 1800), ("c", 1800)):
        (site / "many" / sub).mkdir(parents=True)
        for j in range(count):
            (site / "many" / sub / f"m{j}.py").write_bytes(b"")
            rows.append(f"many/{sub}/m{j}.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0")
    (site / "many-1.dist-info").mkdir()
    (site / "many-1.dist-info" / "RECORD").write_text("\n".join([*rows, "many-1.dist-info/RECORD,,"]) + "\n")
    dists.append(("many", str(site / "many-1.dist-info")))

    def run() -> dict:
        verified = integrity.verify(dists, cache_dir=tmp_path / "cache", key=b"k" * 32, workers=10)
        files = {key: (r["status"], r["files"]) for key, r in verified.reports.items()}
        assert files == {**{f"p{i}": ("ok", 1) for i in range(10)}, "many": ("ok", 4500)}  # each once, every one
        return verified.stats

    first = run()
    assert (first["workers"], first["hashed"]) == (10, 10 + 4500)
    repeat = run()  # every unit found its cache file (named by the unit): nothing hashed
    assert (repeat["workers"], repeat["hashed"]) == (integrity.warm_workers(10), 0)
    assert repeat["workers"] == 5
    data = bytes([3]) * (1 << 17)
    (site / "p3" / "lib.so").unlink()
    (site / "p3" / "lib.so").write_bytes(data)  # the same bytes, a new file: its stat misses the cache
    replaced = run()
    assert (replaced["workers"], replaced["hashed"]) == (10, 1)


CLOSED_FD_CHILD = """
import json, os, sys
fd, site, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
os.close(fd)  # started with stdin, stdout or stderr closed: the queue's pipe may not take its number
from megacpp_env.snapshot.verify import integrity
dists = sorted((p.name, str(p)) for p in __import__("pathlib").Path(site).glob("*.dist-info"))
try:
    verified = integrity.verify(dists, cache_dir=None, workers=2)
    result = {k: [r["status"], r["files"]] for k, r in verified.reports.items()}
except Exception as exc:
    result = {"error": f"{type(exc).__name__}: {exc}"}
with open(out, "w") as fh:
    json.dump(result, fh)
"""


@pytest.mark.parametrize("closed", [0, 1, 2])
def test_a_parent_started_with_a_standard_stream_closed_still_verifies(tmp_path, snap_venv, closed):
    """The queue's pipe would otherwise get the closed stream's number, which a worker's own stdin,
    stdout or stderr then takes: the workers read indices from their stdin (review finding)."""
    import subprocess
    import sys
    from pathlib import Path

    out = tmp_path / "out.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    argv = [sys.executable, "-c", CLOSED_FD_CHILD, str(closed), str(snap_venv.site), str(out)]
    subprocess.run(argv, env=env, check=True, timeout=120, capture_output=closed != 0)
    result = json.loads(out.read_text())
    assert "error" not in result, result
    assert [status for status, _files in result.values()] == ["ok", "ok"] and result["demo_pkg-1.0.dist-info"][1] >= 4


def test_workers_that_cannot_start_leave_no_descriptor_open(tmp_path, monkeypatch, snap_venv):
    from megacpp_env.errors import ToolError
    from megacpp_env.snapshot.verify import integrity

    monkeypatch.setattr(integrity, "WORKER_ARGV", (str(tmp_path / "no-python"), "worker.py"))
    dists = [(p.name, str(p)) for p in snap_venv.site.glob("*.dist-info")]
    before = sorted(os.listdir("/proc/self/fd"))
    for _ in range(3):
        with pytest.raises(ToolError, match="could not start"):
            integrity.verify(dists, cache_dir=None, workers=2)
    assert sorted(os.listdir("/proc/self/fd")) == before


def test_a_killed_workers_temporary_cache_file_is_pruned_once_old(tmp_path):
    """A run stopped while a worker wrote its cache leaves ``.cache-*``; pruning removes it once it
    is older than ``TEMP_AGE`` (a younger one may be another snapshot's, being written)."""
    from megacpp_env.snapshot.verify import integrity

    old, young = tmp_path / ".cache-old", tmp_path / ".cache-young"
    old.write_bytes(b"x")
    young.write_bytes(b"x")
    stale = time.time() - integrity.TEMP_AGE - 5
    os.utime(old, (stale, stale))
    integrity.prune_cache(tmp_path, frozenset())
    assert not old.exists() and young.exists()
