"""Build records: written beside a venv (not in site-packages), read back typed; a malformed one is
a one-line error naming the file and the key."""

from __future__ import annotations

import json

import pytest

from megacpp_env.worktree.buildrecord import (
    BuildRecord,
    BuildRecordError,
    env_for,
    portable_env,
    read_build_records,
    records_dir,
    write_build_record,
)

RECORD = BuildRecord(
    dist="megacpp-smoke-ext", version="0.1.0", checkout="/src/smoke", commit="a" * 40, diff_hash="d" * 64,
    untracked_hash="u" * 64, build_env={"CFLAGS": "-ffile-prefix-map={checkout}=.", "X_FORCE_BUILD": "TRUE"},
    wheel="megacpp_smoke_ext-0.1.0-cp311-cp311-linux_x86_64.whl", wheel_sha256="f" * 64, builder="megacpp-env 0.1.0",
)  # fmt: skip


def test_round_trip_outside_site_packages(tmp_path):
    path = write_build_record(tmp_path, RECORD)
    assert path == tmp_path / "megacpp-env" / "builds" / "megacpp-smoke-ext.json"
    assert read_build_records(tmp_path) == {"megacpp-smoke-ext": RECORD}
    assert read_build_records(tmp_path / "none") == {}


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("dist", "Not Normal", "dist: expected a normalized distribution name, got 'Not Normal'"),
        ("build_env", {"A": 1}, "build_env.A: expected a string, got an integer"),
        ("surprise", 1, "unknown key(s): surprise"),
        ("schema_version", 2, "schema: not a megacpp-env/build-record version 1 document"),
    ],
)
def test_malformed_records_name_file_and_key(tmp_path, key, value, message):
    path = write_build_record(tmp_path, RECORD)
    data = json.loads(path.read_text())
    data[key] = value
    path.write_text(json.dumps(data))
    with pytest.raises(BuildRecordError) as err:
        read_build_records(tmp_path)
    assert str(err.value).startswith(f"{records_dir(tmp_path) / 'megacpp-smoke-ext.json'}: ")
    assert message in str(err.value)


def test_build_env_paths_travel_as_a_token():
    portable = portable_env({"CFLAGS": "-ffile-prefix-map=/a/smoke=.", "N": "1"}, "/a/smoke")
    assert portable == {"CFLAGS": "-ffile-prefix-map={checkout}=.", "N": "1"}
    assert env_for(portable, "/b/smoke") == {"CFLAGS": "-ffile-prefix-map=/b/smoke=.", "N": "1"}
