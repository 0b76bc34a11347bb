"""The probe of the inspected interpreter is reused while its stat signature holds, and run again
after anything it reads changed: a distribution installed or removed, a METADATA or .pth edited, an
environment variable set."""

from __future__ import annotations

import os
import time

import pytest

from megacpp_env.snapshot.collectors import python_env
from megacpp_env.snapshot.verify import probe_cache
from tests.fixtures.snapshot import make_wheel


@pytest.fixture
def probes(monkeypatch, snap_venv, tmp_path):
    """Run the cached probe; count the real probes behind it."""
    calls = []
    real = python_env.run_probe

    def counting(python, environ):
        calls.append(python)
        return real(python, environ)

    monkeypatch.setattr(python_env, "run_probe", counting)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}

    def probe(**extra: str):
        return probe_cache.run_probe(str(snap_venv.python), {**env, **extra}, tmp_path / "cache")

    return probe, calls


def _age(path, seconds=10):
    """Make ``path`` look older than the racy window (a change made just now is not cached)."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def _settle(venv):
    for p in [venv.root / "pyvenv.cfg", venv.site, *venv.site.iterdir(), *venv.site.glob("*.dist-info/METADATA")]:
        _age(p)


def test_reused_while_nothing_changed(probes, snap_venv):
    probe, calls = probes
    _settle(snap_venv)
    first = probe()
    again = probe()
    assert len(calls) == 1 and again.data == first.data and again.seconds == 0.0


@pytest.mark.parametrize("change", ["install", "remove", "metadata", "pth", "env"])
def test_probed_again_after_a_change(probes, snap_venv, tmp_path, change):
    probe, calls = probes
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
    assert len(calls) == 2
    names = {(d["name"], d["version"]) for d in after.data["distributions"]}
    expected = {
        "install": ("late", "1.0") in names,
        "remove": ("other-thing", "2.0") not in names and ("other_thing", "2.0") not in names,
        "metadata": ("demo_pkg", "1.1") in names,
        "pth": str(tmp_path) in after.data["sys_path"],
        "env": str(tmp_path) in after.data["sys_path"],
    }
    assert expected[change]


def test_a_change_within_the_racy_window_is_not_cached(probes, snap_venv):
    probe, calls = probes
    probe()  # the venv was made just now: its stats are too recent to trust
    probe()
    assert len(calls) == 2
