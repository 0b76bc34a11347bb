"""Cross-target / cross-platform consistency, on the committed fixture locks of the issue's measurement."""

from __future__ import annotations

from pathlib import Path

from megacpp_env.lock import consistency
from megacpp_env.lock.consistency import Group
from megacpp_env.lock.pylock import read_pylock
from megacpp_env.spec import load_spec_text

DATA = Path(__file__).parent / "data" / "locks" / "divergence"
X86, ARM = ("cloud", "linux/amd64"), ("gb10", "linux/arm64")


def fixture_locks():
    return {X86: read_pylock(DATA / "pylock.x86_64.toml"), ARM: read_pylock(DATA / "pylock.aarch64.toml")}


def test_issue_divergence_is_caught():
    group = Group(name="aligned gb10+cloud", members=(ARM, X86), allowed=frozenset())
    report = consistency.compare(group, fixture_locks())
    found = {d.package: dict(d.versions) for d in report.failing}
    assert found["vllm"] == {"gb10 linux/arm64": "0.2.5", "cloud linux/amd64": "0.32.0"}
    assert found["pydantic"] == {"gb10 linux/arm64": "1.10.13", "cloud linux/amd64": "2.14.4"}
    assert found["numpy"] == {"gb10 linux/arm64": "2.5.5", "cloud linux/amd64": "2.4.6"}
    assert found["flashinfer-python"] == {"gb10 linux/arm64": "0.7.2.post1", "cloud linux/amd64": "0.7.0.post1"}
    assert "torch" not in found  # pinned: the same on both
    assert report.summary() == f"aligned gb10+cloud: {len(report.failing)} of {report.shared} shared packages diverge"
    assert len(report.failing) >= 4 and report.only_in  # platform-only packages are listed, not failed


def test_allowed_packages_are_exempt():
    allowed = frozenset({"vllm", "pydantic", "numpy", "flashinfer-python"})
    group = Group(name="g", members=(ARM, X86), allowed=allowed)
    report = consistency.compare(group, fixture_locks())
    assert {d.package for d in report.divergences} >= allowed
    assert not {d.package for d in report.failing} & allowed


def test_groups_from_spec_and_align_constraints():
    text = (Path(__file__).resolve().parent.parent / "stack.yaml").read_text()
    spec = load_spec_text(text, Path(__file__).resolve().parent.parent / "stack.yaml")
    names = [(g.name, g.members) for g in consistency.groups(spec)]
    # every target on two platforms is a group of its own (read from the spec, not a hard-coded list)
    multi = [(f"{n} (platforms)", tuple((n, p) for p in t.platforms)) for n, t in spec.targets.items() if len(t.platforms) > 1]
    assert names == [*multi, ("aligned gb10+cloud", (("gb10", "linux/arm64"), ("cloud", "linux/amd64")))]
    pins = consistency.align_constraints(fixture_locks()[X86], frozenset({"numpy"}))
    assert pins["vllm"] == "0.32.0" and "numpy" not in pins


def test_align_tries_the_newest_resolution_first():
    from megacpp_env.lock.align import reference_order

    locks = fixture_locks()
    report = consistency.compare(Group(name="g", members=(ARM, X86), allowed=frozenset()), locks)
    assert reference_order(report, locks) == [X86, ARM]  # vllm 0.32.0 leads, not the 0.2.5 fallback


def test_check_locks_reads_committed_locks_and_prefers_fresh_ones(tmp_path):
    import shutil

    from tests.fixtures.index import write_lock_spec

    path = write_lock_spec(tmp_path / "repo", "http://127.0.0.1:9/simple")
    (tmp_path / "repo" / "locks").mkdir()
    shutil.copy(DATA / "pylock.aarch64.toml", tmp_path / "repo" / "locks" / "pylock.gpu-linux-arm64.toml")
    shutil.copy(DATA / "pylock.x86_64.toml", tmp_path / "repo" / "locks" / "pylock.cpu-linux-amd64.toml")
    from megacpp_env.spec import load_spec

    spec = load_spec(path)
    [report] = consistency.check_locks(spec)  # smoke has no lock: only the aligned group is compared
    assert report.group.name == "aligned gpu+cpu" and "vllm" in {d.package for d in report.failing}
    same = read_pylock(DATA / "pylock.x86_64.toml")
    [report] = consistency.check_locks(spec, {("gpu", "linux/arm64"): same})
    assert report.failing == ()
