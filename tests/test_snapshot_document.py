"""The snapshot document: digest over the hashed facts only, refusal of edited files."""

from __future__ import annotations

import json

import pytest

from megacpp_env.errors import VerificationError
from megacpp_env.snapshot.document import Snapshot, load_snapshot


def test_digest_ignores_key_order_host_and_timing():
    a = Snapshot(
        facts={"env": {"variables": {"A": "1", "B": "2"}}, "system": {"kernel": "6"}},
        host={"hostname": "one"},
        timing={"total": 1.0},
    )
    b = Snapshot(
        facts={"system": {"kernel": "6"}, "env": {"variables": {"B": "2", "A": "1"}}},
        host={"hostname": "two"},
        timing={"total": 9.0},
    )
    assert a.digest == b.digest
    assert a.digest.startswith("sha256:")
    assert Snapshot(facts={"system": {"kernel": "7"}}).digest != Snapshot(facts={"system": {"kernel": "6"}}).digest


def test_round_trip_and_edited_file_is_refused(tmp_path):
    snap = Snapshot(facts={"env": {"variables": {"A": "1"}}}, host={"hostname": "h"})
    path = tmp_path / "s.json"
    path.write_text(snap.to_json())
    assert load_snapshot(path) == snap
    data = json.loads(path.read_text())
    data["facts"]["env"]["variables"]["A"] = "2"
    path.write_text(json.dumps(data))
    with pytest.raises(VerificationError, match="does not match the facts"):
        load_snapshot(path)


def test_foreign_and_future_documents_are_refused(tmp_path):
    path = tmp_path / "s.json"
    path.write_text("{}")
    with pytest.raises(VerificationError, match="not a megacpp-env snapshot"):
        load_snapshot(path)
    data = Snapshot(facts={}).to_dict() | {"schema_version": 99}
    path.write_text(json.dumps(data))
    with pytest.raises(VerificationError, match="schema_version 99"):
        load_snapshot(path)
    with pytest.raises(VerificationError, match="no such snapshot file"):
        load_snapshot(tmp_path / "missing.json")


V1_FACTS = {
    "gpu": {
        "source": "nvml",
        "driver_version": "580.95.05",
        "cuda_driver_api": "13.0",
        "nvml_error": "",
        "devices": [
            {"index": 0, "name": "NVIDIA A100-SXM4-80GB", "compute_capability": "8.0", "sm_count": 54,
             "memory_total_mib": 81920, "uuid_hash": "sha256:0123456789abcdef"},
        ],
    },
    "system": {"os": {"id": "debian"}, "kernel": "6.1", "machine": "x86_64", "glibc": "glibc 2.36",
               "cpu_model": "AMD EPYC", "cpu_count": 2},
}  # fmt: skip


def _v1_document() -> dict:
    """A schema_version 1 document as megacpp-env wrote it before issue 14 (no ``live``), its digest
    computed here by version 1's rule, independently of the code under test."""
    import hashlib

    canonical = json.dumps({"schema_version": 1, "facts": V1_FACTS}, sort_keys=True, separators=(",", ":"))
    digest = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    return {"schema": "megacpp-env/snapshot", "schema_version": 1, "digest": digest, "facts": V1_FACTS,
            "host": {"hostname": "gpu01"}, "timing": {"total": 0.4}}  # fmt: skip


def test_version_1_documents_are_still_read(tmp_path):
    path = tmp_path / "golden-v1.json"
    path.write_text(json.dumps(_v1_document(), indent=2, sort_keys=True) + "\n")
    snap = load_snapshot(path)
    assert (snap.schema_version, snap.live, snap.digest) == (1, {}, _v1_document()["digest"])
    assert json.loads(snap.to_json()) == _v1_document()  # written back as it was: no live section
    with_live = _v1_document() | {"live": {}}
    path.write_text(json.dumps(with_live))
    with pytest.raises(VerificationError, match="a schema_version 1 snapshot has no live section"):
        load_snapshot(path)


def test_a_version_1_golden_against_a_version_2_snapshot_says_what_to_do():
    from megacpp_env.snapshot.diff import diff_snapshots

    old = Snapshot.from_dict(_v1_document())
    facts = json.loads(json.dumps(V1_FACTS))
    facts["gpu"]["devices"][0]["sm_count"] = 108  # version 2: the right table
    del facts["gpu"]["nvml_error"]
    new = Snapshot(facts=facts)
    report = diff_snapshots(old, new)
    assert report.drift and old.digest != Snapshot(facts=V1_FACTS).digest  # the version is in the digest
    notes = [f.message for f in report.findings if f.key == "host.schema_version"]
    assert notes == [
        "snapshot schema_version 1 -> 2: the facts version 2 added show as differences; take the older "
        "snapshot again with this megacpp-env (a golden: megacpp-env snapshot --golden NAME)"
    ]
    assert "gpu 0 (NVIDIA A100-SXM4-80GB): sm_count: 54 -> 108" in [f.message for f in report.findings]
