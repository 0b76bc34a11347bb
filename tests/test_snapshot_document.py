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
