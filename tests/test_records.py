"""The typed readers at every file boundary: each names the file and the key path of what is wrong,
raises its format's user error (exit 1, one line on stderr, never a traceback), and ``to_dict`` is
derived from the fields."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from megacpp_env.cli import main
from megacpp_env.errors import FormatError, SpecError, VerificationError
from megacpp_env.lock.acks import AckFileError, load_acks
from megacpp_env.lock.pylock import LockFormatError, read_pylock, read_pylock_text
from megacpp_env.records import HIDDEN, Record, Table, as_dict, renamed
from megacpp_env.snapshot.document import Snapshot, SnapshotFormatError, load_snapshot
from megacpp_env.worktree.manifest import ManifestError, load_manifest, read_journal
from megacpp_env.worktree.provenance import PROVENANCE_NAME, ProvenanceError, read_provenance

SHA = "0" * 64
LOCK = f"""\
lock-version = "1.0"
created-by = "test"

[[packages]]
name = "demo"
version = "1.0"
wheels = [{{ url = "https://example.invalid/demo-1.0-py3-none-any.whl", hashes = {{ sha256 = "{SHA}" }} }}]

[[packages]]
name = "other"
version = "2.0"
wheels = [{{ url = "https://example.invalid/other-2.0-py3-none-any.whl", hashes = "{SHA}" }}]
"""


def test_table_reports_the_key_path_of_a_wrong_type() -> None:
    doc = Table.root({"a": [{"b": {"c": 1}}]}, "f.toml")
    inner = doc.tables("a")[0].table("b")
    with pytest.raises(FormatError) as exc:
        inner.text("c")
    assert str(exc.value) == "f.toml: a[0].b.c: expected a string, got an integer"
    with pytest.raises(FormatError, match=r"^f\.toml: a\[0\]\.b\.d: missing \(expected a boolean\)$"):
        inner.flag("d")
    with pytest.raises(FormatError, match=r"^f\.toml: a\[0\]\.b: unknown key\(s\): c \(known: x\)$"):
        inner.only(("x",))
    assert Table.root({"n": True}, "f").flag("n") is True
    with pytest.raises(FormatError, match="expected an integer, got a boolean"):
        Table.root({"n": True}, "f").number("n")


def test_as_dict_derives_from_fields() -> None:
    @dataclass(frozen=True, kw_only=True, slots=True)
    class Inner:
        x: int

    @dataclass(frozen=True, kw_only=True, slots=True)
    class Rec:
        name: str
        items: tuple[Inner, ...] = ()
        inputs_hash: str = field(default="", metadata=renamed("inputs-hash"))
        secret: str = field(default="s", metadata=HIDDEN)

    assert as_dict(Rec(name="n", items=(Inner(x=1),), inputs_hash="h")) == {
        "name": "n",
        "items": [{"x": 1}],
        "inputs-hash": "h",
    }


def test_a_record_subclass_has_as_dict_for_to_dict_and_stays_slotted() -> None:
    @dataclass(frozen=True, kw_only=True, slots=True)
    class Rec(Record):
        name: str
        items: tuple[str, ...] = ()
        secret: str = field(default="s", metadata=HIDDEN)

    rec = Rec(name="n", items=("a",))
    assert rec.to_dict() == as_dict(rec) == {"name": "n", "items": ["a"]}
    assert not hasattr(rec, "__dict__")  # the base adds no instance dict to a slots record


def test_lock_reader_names_the_package_wheel_and_key(tmp_path: Path) -> None:
    with pytest.raises(LockFormatError) as exc:
        read_pylock_text(LOCK, path="locks/x.toml")
    assert str(exc.value) == (
        "locks/x.toml: packages[1].wheels[0].hashes: not a valid PEP 751 lock: Unexpected type str (expected Mapping)"
    )
    assert isinstance(exc.value, SpecError) and "\n" not in str(exc.value)
    good = read_pylock_text(LOCK.replace(f'hashes = "{SHA}"', f'hashes = {{ sha256 = "{SHA}" }}'))
    assert [p.name for p in good.packages] == ["demo", "other"] and good.meta is None


def test_lock_meta_table_is_typed(tmp_path: Path) -> None:
    path = tmp_path / "pylock.toml"
    path.write_text(LOCK.split('[[packages]]\nname = "other"', maxsplit=1)[0] + "[tool.megacpp-env]\ninputs-hash = 3\n")
    with pytest.raises(LockFormatError, match=r"pylock\.toml: tool\.megacpp-env\.inputs-hash: expected a string"):
        read_pylock(path)


def test_a_bad_lock_is_one_line_and_exit_1_on_the_cli(tmp_path: Path, capsys) -> None:
    bad, good = tmp_path / "bad.toml", tmp_path / "good.toml"
    bad.write_text(LOCK)
    good.write_text(LOCK.replace(f'hashes = "{SHA}"', f'hashes = {{ sha256 = "{SHA}" }}'))
    assert main(["lock", "diff", str(bad), str(good)]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"megacpp-env lock: error: {bad}: packages[1].wheels[0].hashes: not a valid PEP 751 lock: "
        "Unexpected type str (expected Mapping)\n"
    )


def test_manifest_reader_names_the_file_entry(tmp_path: Path) -> None:
    (tmp_path / "manifest.toml").write_text(
        f'name = "n"\nsource = "s"\ncommit = "{"a" * 40}"\n\n[[files]]\npath = "x"\naction = "modify"\n'
        f'base_sha256 = "{SHA}"\nsha256 = 7\n'
    )
    with pytest.raises(ManifestError) as exc:
        load_manifest(tmp_path)
    assert str(exc.value) == f"{tmp_path / 'manifest.toml'}: files[0].sha256: expected a string, got an integer"


def test_journal_reader_refuses_an_unknown_state(tmp_path: Path, upstream) -> None:
    from megacpp_env import git
    from megacpp_env.checkout import checkout_source

    dest = tmp_path / "demo"
    checkout_source(upstream.source(), dest)
    path = git.git_path(dest, "megacpp-overlay.json")
    path.write_text(json.dumps({"name": "n", "commit": "c", "state": "half"}))
    with pytest.raises(ManifestError, match=r"megacpp-overlay\.json: state: state must be one of applying, applied"):
        read_journal(dest)


def test_provenance_reader_names_the_key(tmp_path: Path) -> None:
    (tmp_path / PROVENANCE_NAME).write_text(json.dumps({"source": "s", "overlay": {"name": "x", "paths": "a"}}))
    with pytest.raises(ProvenanceError) as exc:
        read_provenance(tmp_path)
    assert str(exc.value) == f"{tmp_path / PROVENANCE_NAME}: overlay.paths: expected an array of strings, got a string"
    (tmp_path / PROVENANCE_NAME).write_text("{not json")
    with pytest.raises(ProvenanceError, match="not valid JSON"):
        read_provenance(tmp_path)
    assert read_provenance(tmp_path / "nothing") is None


def test_snapshot_reader_is_a_verification_error_with_a_key(tmp_path: Path) -> None:
    doc = Snapshot(facts={"system": {}}).to_dict()
    path = tmp_path / "s.json"
    path.write_text(json.dumps({**doc, "host": []}))
    with pytest.raises(SnapshotFormatError) as exc:
        load_snapshot(path)
    assert str(exc.value) == f"{path}: host: expected a table, got an array"
    assert isinstance(exc.value, VerificationError)


def test_ack_reader_names_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "ACKNOWLEDGED.toml"
    path.write_text('[[ack]]\npackage = "torch"\nchange = "upgraded"\nreason = "r"\nversion = 2\n')
    with pytest.raises(AckFileError, match=r"ACKNOWLEDGED\.toml: ack\[0\]\.version: expected a string, got an integer"):
        load_acks(path)
    path.write_text('[[ack]]\npackage = "torch"\nchange = "upgraded"\nreason = "r"\ntypo = "x"\n')
    with pytest.raises(AckFileError, match=r"ack\[0\]: unknown key\(s\): typo"):
        load_acks(path)
