"""The published JSON Schema of the snapshot document (megacpp_env/schemas/snapshot.schema.json):
shipped, printed by ``snapshot --schema``, in step with the registry and the document version, and
met by real snapshots (tests/fixtures/snapshot_schema.py validates every one the suite takes)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from megacpp_env.cli import main
from megacpp_env.snapshot import registry, schemagen
from megacpp_env.snapshot.collect import take_snapshot
from megacpp_env.snapshot.collectors.gpu_facts import split
from megacpp_env.snapshot.document import SCHEMA, SCHEMA_VERSION, Snapshot, json_schema
from tests.conftest import REPO_ROOT
from tests.fixtures.git_repos import make_repo
from tests.fixtures.snapshot_schema import assert_valid_snapshot, schema_errors

SCHEMA_PATH = REPO_ROOT / "megacpp_env" / "schemas" / "snapshot.schema.json"
GPU_DATA = Path(__file__).parent / "data" / "gpu"


def schema() -> dict:
    return json.loads(json_schema())


def test_the_shipped_schema_is_printed_by_snapshot_schema(capsys):
    assert main(["snapshot", "--schema"]) == 0
    assert capsys.readouterr().out == SCHEMA_PATH.read_text(encoding="utf-8") == json_schema()


def test_schema_describes_this_versions_document():
    s = schema()
    assert s["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert s["properties"]["schema"]["const"] == SCHEMA
    assert s["properties"]["schema_version"]["const"] == SCHEMA_VERSION
    assert s["$id"].endswith(f"/snapshot-{SCHEMA_VERSION}.schema.json")


def test_the_published_schema_is_generated_from_the_registrations():
    """megacpp_env/schemas/snapshot.schema.json is schemagen's, byte for byte (scripts/snapshot_docs.py
    writes it): no area is described by hand in it."""
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schemagen.render(), (
        "the snapshot schema is stale: run python scripts/snapshot_docs.py"
    )


def test_schema_areas_are_the_registrys():
    props = schema()["properties"]
    hashed = {c.area for c in registry.COLLECTORS if c.hashed}
    required = {c.area for c in registry.COLLECTORS if c.hashed and c.older != "note"}
    assert set(props["facts"]["properties"]) == hashed and set(props["facts"]["required"]) == required
    unhashed = {c.area for c in registry.COLLECTORS if not c.hashed}
    live_parts = {"gpu", "system", "scheduler"}  # hashed areas whose collector returns Parts
    assert set(props["live"]["properties"]) == unhashed | live_parts | {"cache"}  # cache: what the caches discarded
    assert {c.area for c in registry.COLLECTORS if "live" in schemagen.fragment(c.area)} == unhashed | live_parts


def test_every_fragment_is_a_registered_areas():
    """snapshot/schema/ holds the document and one fragment per registered area, nothing else."""
    names = {p.stem for p in schemagen.FRAGMENTS.glob("*.json")}
    assert names == {schemagen.DOCUMENT, *registry.areas()}


def test_a_fragment_that_disagrees_with_its_registration_is_refused(tmp_path):
    import shutil

    shutil.copytree(schemagen.FRAGMENTS, tmp_path / "schema")
    gpu = json.loads((tmp_path / "schema" / "gpu.json").read_text())
    del gpu["facts"]  # gpu is hashed: its facts must be described
    (tmp_path / "schema" / "gpu.json").write_text(json.dumps(gpu))
    with pytest.raises(ValueError, match="'gpu': its fragment's facts must be there exactly when it is hashed"):
        schemagen.build(tmp_path / "schema")
    (tmp_path / "schema" / "gpu.json").unlink()
    with pytest.raises(ValueError, match="snapshot area 'gpu' has no schema fragment"):
        schemagen.build(tmp_path / "schema")


def test_every_field_is_described():
    """docs/SNAPSHOT.md is generated from these descriptions: none may be missing."""
    missing = []

    def walk(node: object, where: str) -> None:
        if isinstance(node, dict):
            for key, sub in (node.get("properties") or {}).items():
                if "description" not in sub and "$ref" not in sub:
                    missing.append(f"{where}.{key}")
                walk(sub, f"{where}.{key}")
            for key in ("items", "additionalProperties"):
                walk(node.get(key), f"{where}[]")
            for sub in node.get("anyOf") or ():
                walk(sub, where)
            for key, sub in (node.get("$defs") or {}).items():
                walk(sub, f"$defs.{key}")

    walk(schema(), "")
    assert missing == []


def test_a_real_snapshot_validates(snap_options, tmp_path, monkeypatch, _snapshots_match_the_schema):
    """With a training repository, a --paths checkout, a scheduler and a failed collector: every
    shape the document can take here. The autouse fixture validated it; this test checks it did."""
    import os

    make_repo(tmp_path / "train", {"train.py": "x = 1\n"})
    make_repo(tmp_path / "src", {"lib.py": "y = 2\n"})
    (tmp_path / "train" / "train.py").write_text("x = 2\n")
    environ = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    environ |= {"SLURM_JOB_ID": "1", "SLURM_CPUS_PER_TASK": "4"}
    from megacpp_env.snapshot.collectors import torch_facts

    def broken(*_args: object, **_kw: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(torch_facts, "collect", broken)  # a collector that fails: {"error": ...}
    snap = take_snapshot(snap_options(environ=environ, repo=tmp_path / "train", paths=(tmp_path / "src",)))
    assert snap.facts["torch"] == {"error": "OSError: disk on fire"}
    assert snap.live["repo"]["dirty"] and snap.facts["checkouts"]
    assert [d["digest"] for d in _snapshots_match_the_schema] == [snap.digest]


def test_gpu_machine_shapes_validate(snap_options):
    """No GPU here: the facts of the NVML-shaped readings (tests/data/gpu) in a real document."""
    doc = json.loads(take_snapshot(snap_options()).to_json())
    for name in ("nvml-hgx-h100x8.json", "nvml-a100-sxm4.json"):
        facts, live = split(json.loads((GPU_DATA / name).read_text()))
        gpu_doc = copy.deepcopy(doc)
        gpu_doc["facts"]["gpu"], gpu_doc["live"]["gpu"] = facts, live
        gpu_doc["digest"] = Snapshot(facts=gpu_doc["facts"]).digest
        assert_valid_snapshot(gpu_doc)


def _mutations(doc: dict) -> dict[str, dict]:
    out = {}
    for name, path, value in (
        ("unknown area", ("facts", "wifi"), {}),
        ("unknown top-level key", ("extra",), 1),
        ("version 1", ("schema_version",), 1),
        ("a live reading in the facts", ("facts", "system", "numa_memory_mib"), {"0": 1}),
        ("power as text", ("facts", "gpu", "devices"), [{"index": 0, "name": "x", "power_limit_w": "700 W"}]),
        ("a raw GPU UUID", ("facts", "gpu", "devices"), [{"index": 0, "name": "x", "uuid_hash": "GPU-5f1d3a9c"}]),
        ("bad digest", ("digest",), "md5:abc"),
        ("repo without git flag", ("live", "repo"), {"path": "/x"}),
    ):
        mutated = copy.deepcopy(doc)
        *parents, last = path
        node = mutated
        for key in parents:
            node = node[key]
        node[last] = value
        out[name] = mutated
    return out


def test_the_schema_refuses_what_is_not_a_snapshot(snap_options):
    doc = json.loads(take_snapshot(snap_options()).to_json())
    for name, mutated in _mutations(doc).items():
        assert schema_errors(mutated), name


def test_the_cli_document_validates(tmp_path):
    """A snapshot written by the command in a subprocess (what users and other tools read)."""
    out = tmp_path / "snap.json"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MEGACPP_ENV_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-m", "megacpp_env", "snapshot", "-o", str(out)],
        cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert_valid_snapshot(json.loads(out.read_text()))


@pytest.mark.parametrize("version", [0, 3, "2", True])
def test_other_versions_are_refused_with_the_remedy(tmp_path, snap_options, version):
    from megacpp_env.snapshot.document import SnapshotFormatError, load_snapshot

    doc = json.loads(take_snapshot(snap_options()).to_json())
    doc["schema_version"] = version
    (tmp_path / "s.json").write_text(json.dumps(doc))
    with pytest.raises(SnapshotFormatError, match=r"reads 1, 2 \(take the snapshot again with this megacpp-env"):
        load_snapshot(tmp_path / "s.json")
