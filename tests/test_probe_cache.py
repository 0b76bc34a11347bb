"""The probe always starts the inspected interpreter (its ``.pth`` files and what they import run
every time); only its distribution listing is reused, while the stat signature of what the listing
reads holds, and listed again after anything it reads changed: a distribution installed or removed,
a METADATA edited, a directory added to sys.path by a ``.pth`` file or the environment."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from megacpp_env.snapshot.options import Cache
from megacpp_env.snapshot.verify import probe_cache
from tests.fixtures.snapshot import make_wheel


@pytest.fixture
def probe(snap_venv, tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    cache = Cache(root=tmp_path / "cache", key=b"k" * 32, records=tmp_path / "cache" / "r")

    def run(**extra: str):
        return probe_cache.run_probe(str(snap_venv.python), {**env, **extra}, cache)

    return run


def _age(path: Path, seconds: int = 10) -> None:
    """Make ``path`` look older than the racy window (a change made just now is not cached)."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def _settle(venv) -> None:
    for p in [venv.root / "pyvenv.cfg", venv.site, *venv.site.iterdir(), *venv.site.glob("*.dist-info/METADATA")]:
        _age(p)


def test_the_listing_is_reused_while_nothing_changed_and_the_interpreter_still_runs(probe, snap_venv):
    _settle(snap_venv)
    first = probe()
    again = probe()
    assert not first.reused and again.reused and again.data == first.data and again.seconds > 0


@pytest.mark.parametrize("change", ["install", "remove", "metadata", "pth", "env"])
def test_listed_again_after_a_change(probe, snap_venv, tmp_path, change):
    _settle(snap_venv)
    probe()
    extra = {}
    if change == "install":
        snap_venv.install(make_wheel(tmp_path, "late", "1.0", {"late.py": ""}))
    elif change == "remove":
        import shutil

        shutil.rmtree(next(snap_venv.site.glob("other_thing-*.dist-info")))
    elif change == "metadata":
        meta = next(snap_venv.site.glob("demo_pkg-*.dist-info")) / "METADATA"
        meta.write_text(meta.read_text().replace("Version: 1.0", "Version: 1.1"))
    elif change == "pth":
        (snap_venv.site / "extra.pth").write_text(str(tmp_path) + "\n")
    else:
        extra = {"PYTHONPATH": str(tmp_path)}
    after = probe(**extra)
    assert not after.reused
    names = {(d["name"], d["version"]) for d in after.data["distributions"]}
    expected = {
        "install": ("late", "1.0") in names,
        "remove": ("other-thing", "2.0") not in names and ("other_thing", "2.0") not in names,
        "metadata": ("demo_pkg", "1.1") in names,
        "pth": str(tmp_path) in after.data["sys_path"],
        "env": str(tmp_path) in after.data["sys_path"],
    }
    assert expected[change]


def test_a_module_a_pth_file_imports_is_run_every_time(probe, snap_venv, tmp_path):
    """A ``.pth`` file's import edited in place (same size): its new sys.path is seen."""
    (snap_venv.site / "zz.pth").write_text("import zzhook\n")
    hook = snap_venv.site / "zzhook.py"
    hook.write_text("#" * 200 + "\n")
    probe()  # its byte-code is written into site-packages: settled after
    _settle(snap_venv)
    probe()
    assert probe().reused
    before = hook.stat()
    body = f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
    hook.write_text(body.ljust(before.st_size - 1, "#") + "\n")  # same size; a new mtime (else python
    after = probe()  # itself runs the old byte-code: its own cache keys on size and mtime)
    assert after.data["sys_path"][0] == str(tmp_path) and not after.reused


def test_a_finder_that_lists_distributions_itself_is_never_cached(probe, snap_venv):
    (snap_venv.site / "zz.pth").write_text("import zzfinder\n")
    (snap_venv.site / "zzfinder.py").write_text(
        "import sys\nclass F:\n    def find_spec(self, *a):\n        return None\n"
        "    def find_distributions(self, *a, **k):\n        return iter(())\nsys.meta_path.append(F())\n"
    )
    _settle(snap_venv)
    probe()
    again = probe()
    assert not again.reused and again.data["finders"] == ["zzfinder.F"]


def test_a_change_within_the_racy_window_is_not_cached(probe):
    probe()  # the venv was made just now: its stats are too recent to trust
    assert not probe().reused


@pytest.mark.parametrize("damage", ["garbage", "fifo", "unsealed-edit"])
def test_a_damaged_probe_cache_is_discarded_with_a_note(probe, snap_venv, tmp_path, damage):
    _settle(snap_venv)
    probe()
    (path,) = (tmp_path / "cache").glob("probe-*.json")
    if damage == "garbage":
        path.write_bytes(b"{not json")
    elif damage == "fifo":
        path.unlink()
        os.mkfifo(path)
    else:
        path.write_bytes(path.read_bytes().replace(b"other-thing", b"other-thinx"))
    again = probe()
    assert not again.reused and again.notes
    assert {d["name"] for d in again.data["distributions"]} >= {"other-thing"}
