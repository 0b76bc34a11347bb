"""The collector registry: every collector declares its area, timeout, diff severity and digest
membership in one place, and a new collector is one module plus one registration."""

from __future__ import annotations

import importlib
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from megacpp_env.snapshot import registry
from megacpp_env.snapshot.collect import take_snapshot
from megacpp_env.snapshot.diff import diff_snapshots, explainer
from megacpp_env.snapshot.document import Snapshot
from megacpp_env.snapshot.registry import SEVERITIES, Collector
from tests.conftest import REPO_ROOT

SNAPSHOT_DIR = REPO_ROOT / "megacpp_env" / "snapshot" / "collectors"


@pytest.mark.parametrize("collector", registry.COLLECTORS, ids=lambda c: c.area)
def test_every_collector_declares_area_timeout_severity_and_digest(collector: Collector) -> None:
    assert re.fullmatch(r"[a-z][a-z_]*", collector.area)
    assert isinstance(collector.timeout, float) and 0 < collector.timeout <= 900
    assert collector.severity in SEVERITIES
    assert collector.severity != "note" or not collector.hashed  # a note never drifts: only for unhashed areas
    assert isinstance(collector.hashed, bool) and isinstance(collector.after_launch, bool)
    module = importlib.import_module(f"megacpp_env.snapshot.collectors.{collector.module}")
    assert callable(module.start)
    for name in (collector.explain, collector.explain_live):  # the explainers it names are diff's
        assert name == "" or callable(explainer(name))
    assert not (collector.explain_live and collector.hashed), "live readings of a hashed area are never a note"
    assert collector.code not in {c.code for c in registry.COLLECTORS if c is not collector}


def test_an_unknown_explainer_or_code_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no explainer 'diff_wifi' in megacpp_env/snapshot/diff\.py"):
        explainer("diff_wifi")
    with pytest.raises(ValueError, match=r"code 'X1' .* is not valid"):
        Collector(area="x", module="x", timeout=1.0, code="X1", severity="info")
    with pytest.raises(ValueError, match=r"older 'ignore' .* is not valid"):
        Collector(area="x", module="x", timeout=1.0, code="SD099", severity="info", older="ignore")


def test_areas_are_unique_and_host_is_not_one() -> None:
    areas = registry.areas()
    assert len(set(areas)) == len(areas) and registry.HOST_AREA not in areas


def test_every_collector_module_is_registered() -> None:
    """A module that defines ``start(ctx)`` but has no registration would silently never run."""
    defining = {p.stem for p in SNAPSHOT_DIR.glob("*.py") if re.search(r"^def start\(ctx", p.read_text(), re.M)}
    assert defining == {c.module for c in registry.COLLECTORS}


def test_a_snapshot_has_exactly_the_registered_areas(snap_options) -> None:
    snap = take_snapshot(snap_options())
    assert sorted(snap.facts) == sorted(a for a in registry.areas() if registry.hashed(a))
    assert {a for a in registry.areas() if not registry.hashed(a)} <= set(snap.live)  # unhashed: under live
    assert set(snap.live) <= set(registry.areas())
    assert set(registry.areas()) <= set(snap.timing)


COLLECTOR_MODULE = """
import time


from megacpp_env.snapshot.parts import Parts


def start_parts(ctx):
    return lambda: Parts(facts={"limit": ctx.environ.get("PROBE_ANSWER", "42")}, live={"now": ctx.environ.get("NOW")})


def start(ctx):
    if ctx.environ.get("PARTS"):
        return start_parts(ctx)
    if ctx.environ.get("PROBE_SLEEP"):
        return lambda: time.sleep(float(ctx.environ["PROBE_SLEEP"])) or {"late": True}
    return lambda: {"answer": int(ctx.environ.get("PROBE_ANSWER", "42")), "python": ctx.python}
"""


@pytest.fixture
def extra_collectors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One new module of the snapshot package (its search path extended to a temporary directory,
    the source tree untouched) and one registration each: nothing else changes."""
    import megacpp_env.snapshot

    (tmp_path / "probe_collector.py").write_text(COLLECTOR_MODULE)
    collectors = megacpp_env.snapshot.collectors
    monkeypatch.setattr(collectors, "__path__", [*collectors.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "megacpp_env.snapshot.collectors.probe_collector", raising=False)
    extra = (
        Collector(area="probe", module="probe_collector", timeout=60.0, code="SD090", severity="error"),
        Collector(area="unhashed", module="probe_collector", timeout=60.0, code="SD091", severity="info", hashed=False),
    )
    monkeypatch.setattr(registry, "COLLECTORS", (*registry.COLLECTORS, *extra))


def test_a_registered_collector_runs_counts_and_explains(extra_collectors, snap_options, snap_venv) -> None:
    import os

    environ = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    a = take_snapshot(snap_options(environ=environ))
    b = take_snapshot(snap_options(environ={**environ, "PROBE_ANSWER": "43"}))
    assert a.facts["probe"] == {"answer": 42, "python": str(snap_venv.python)}
    assert a.live["unhashed"] == a.facts["probe"] and "unhashed" not in a.facts  # an unhashed area: under live
    assert a.digest != b.digest  # "probe" counts in the digest
    findings = [f for f in diff_snapshots(a, b).findings if f.area == "probe"]
    assert [(f.severity, f.key, f.message) for f in findings] == [("error", "probe.answer", "probe: answer: 42 -> 43")]
    unhashed = {**a.facts, "unhashed": {"answer": 7}}
    assert Snapshot(facts=unhashed).digest == Snapshot(facts=a.facts).digest  # "unhashed" does not


def test_a_collector_with_live_readings_splits_them_out_of_the_digest(extra_collectors, snap_options) -> None:
    """``Parts``: the facts count in the digest, the live part is recorded under ``live``, unhashed."""
    import os

    environ = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    a = take_snapshot(snap_options(environ={**environ, "PARTS": "1", "NOW": "1"}))
    b = take_snapshot(snap_options(environ={**environ, "PARTS": "1", "NOW": "2"}))
    c = take_snapshot(snap_options(environ={**environ, "PARTS": "1", "NOW": "1", "PROBE_ANSWER": "7"}))
    assert (a.facts["probe"], a.live["probe"], b.live["probe"]) == ({"limit": "42"}, {"now": "1"}, {"now": "2"})
    assert a.digest == b.digest != c.digest
    assert [f.key for f in diff_snapshots(a, b).findings if f.area == "probe"] == []  # a reading is no drift


def test_a_collector_past_its_timeout_records_an_error(extra_collectors, snap_options) -> None:
    import os

    environ = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    snap = take_snapshot(snap_options(environ={**environ, "PROBE_SLEEP": "3"}, timeouts={"probe": 0.5}))
    assert snap.facts["probe"] == {"error": "timed out after 0.5s"}
    assert snap.facts["system"].get("machine")  # the others are not held up


def test_diff_severity_and_order_come_from_the_registry() -> None:
    a = Snapshot(facts={"system": {"kernel": "1"}, "python": {"x": 1}, "gpu": {"d": 1}})
    b = Snapshot(facts={"system": {"kernel": "2"}, "python": {"x": 2}, "gpu": {"d": 2}})
    report = diff_snapshots(a, b)
    assert [(area, fs[0].severity) for area, fs in report.by_area()] == [
        ("python", "warning"),  # python's own explainer rates a non-distribution fact a warning
        ("gpu", "warning"),
        ("system", "info"),
    ]
    assert registry.severity_of("system") == "info" and registry.severity_of("host") == "note"


@pytest.mark.parametrize("module", ["os.path", "probe_pkg.collector", "megacpp_env.lock.pylock", "../evil", "", "Gpu"])
def test_a_collector_loads_only_a_module_of_the_snapshot_package(module) -> None:
    with pytest.raises(ValueError, match=r"not a module name of megacpp_env\.snapshot"):
        Collector(area="x", module=module, timeout=1.0, code="SD099", severity="info")


def test_a_document_older_than_an_area_reads_it_by_the_registrations_rule(monkeypatch) -> None:
    """``older="note"``: a golden stored before the area existed predates it (one note, no drift);
    ``older="drift"`` (every shipped area): a document without it differs in every fact."""
    new = Collector(area="uptime", module="system", timeout=1.0, code="SD090", severity="warning", older="note")
    monkeypatch.setattr(registry, "COLLECTORS", (*registry.COLLECTORS, new))
    golden = Snapshot(facts={"system": {"kernel": "1"}})
    live = Snapshot(facts={"system": {"kernel": "1"}, "uptime": {"boot": "x"}})
    report = diff_snapshots(golden, live, a_label="golden g", b_label="live")
    assert not report.drift
    assert [(f.code, f.severity, f.message) for f in report.findings] == [
        ("SD090", "note", "uptime: golden g predates this area (taken by an older megacpp-env): not compared")
    ]
    monkeypatch.setattr(registry, "COLLECTORS", (*registry.COLLECTORS[:-1], replace(new, older="drift")))
    report = diff_snapshots(golden, live)
    assert report.drift and [(f.severity, f.key) for f in report.findings] == [("warning", "uptime.boot")]
    both = Snapshot(facts={**live.facts, "uptime": {"boot": "y"}})
    assert [f.key for f in diff_snapshots(live, both).findings] == ["uptime.boot"]  # compared once both have it
