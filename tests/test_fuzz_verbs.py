"""Every verb that reads a file, on mutated inputs (issue 12, classes 1 and 7): ``lock diff``,
``lock check``, ``gate``, ``diff``, ``overlay status``, ``verify-checkout`` and ``mirror``. Each run
must end in a one-line error or success -- never exit 3 -- and write nothing outside the paths the
verb is meant to write (``mirror --to``). Inputs are a real lock of real wheels served over file://,
a real snapshot document, the shipped overlay manifest and a provenance record, mutated byte-wise
and value-wise by hypothesis."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megacpp_env import layout
from megacpp_env.cli import main
from megacpp_env.fsutil import sha256_file
from megacpp_env.lock.pylock import Artifact, Lock, LockedPackage, render_pylock
from megacpp_env.snapshot.document import Snapshot
from tests.fixtures.snapshot import make_wheel

REPO_ROOT = Path(__file__).resolve().parents[1]
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@pytest.fixture
def world(tmp_path):
    """A committed repository copy whose smoke lock points at a local wheel, a snapshot, a checkout."""
    repo = tmp_path / "repo"
    repo.mkdir()
    shutil.copy(REPO_ROOT / "stack.yaml", repo / "stack.yaml")
    shutil.copytree(REPO_ROOT / "overlays", repo / "overlays")
    (tmp_path / "srv").mkdir()
    whl = make_wheel(tmp_path / "srv", "x", "1.0", {"x.py": "X = 1\n"})
    art = Artifact(kind="wheel", url=whl.as_uri(), sha256=sha256_file(whl))
    lock = layout.lock_path(repo, "smoke", "linux/amd64")
    lock.parent.mkdir()
    lock.write_text(render_pylock(Lock(packages=(LockedPackage(name="x", version="1.0", artifacts=(art,)),))))
    for cmd in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "b"]):
        subprocess.run(["git", *cmd], cwd=repo, check=True, capture_output=True)
    snap = tmp_path / "snap.json"
    snap.write_text(Snapshot(facts={"python": {"distributions": {"x": {"version": "1.0"}}}, "env": {}}).to_json())
    checkout = tmp_path / "checkout"
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    (checkout / ".megacpp-checkout.json").write_text(
        json.dumps({"schema_version": 1, "source": "megacpp_smoke_ext", "url": "file:///x", "commit": "a" * 40})
    )
    return tmp_path, repo, lock, snap, checkout


def _files(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for p in root.rglob("*"):
        if ".git" in p.parts or p.is_dir():
            continue
        st = p.lstat()
        out[str(p)] = (st.st_size, st.st_mtime_ns)
    return out


def _run(*argv: str) -> int:
    return main(list(argv))


def _verbs(repo: Path, lock: Path, snap: Path, checkout: Path, mirror: Path) -> list[list[str]]:
    spec = ["--spec", str(repo / "stack.yaml")]
    return [
        ["lock", "diff", str(lock), str(lock), *spec],
        ["lock", "check", "smoke", "--platform", "linux/amd64", *spec],
        ["gate", "--base", "HEAD", *spec],
        ["diff", str(snap), str(snap)],
        ["overlay", "status", "smoke-ext", "--to", str(checkout), *spec],
        ["verify-checkout", str(checkout)],
        ["mirror", "smoke", "--platform", "linux/amd64", "--to", str(mirror), *spec],
    ]


def _assert_contained(world, mutate_files, capsys) -> None:
    tmp, repo, lock, snap, checkout = world
    mirror = tmp / "mirror"
    originals = {p: p.read_bytes() for p in mutate_files}
    before = _files(tmp)
    try:
        for argv in _verbs(repo, lock, snap, checkout, mirror):
            rc = _run(*argv)
            err = capsys.readouterr().err
            assert rc != 3, (argv, err)
            assert "Traceback" not in err, (argv, err)
        changed = {p for p, stamp in _files(tmp).items() if before.get(p) != stamp}
        outside = {p for p in changed if not p.startswith(str(mirror))}
        assert outside <= {str(p) for p in mutate_files}, outside
    finally:
        for p, data in originals.items():
            p.write_bytes(data)
        shutil.rmtree(mirror, ignore_errors=True)


def _byte_mutation(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    out = bytearray(data)
    for where, cut, insert in edits:
        pos = where % max(len(out), 1)
        out[pos : pos + cut] = insert
    return bytes(out)


byte_edits = st.lists(
    st.tuples(
        st.integers(0, 1 << 16),
        st.integers(0, 8),
        st.binary(max_size=8)
        | st.sampled_from(
            [b"\n", b'"', b"[", b"]", b"{", b"\xff", b"\xef\xbb\xbf", b"\\", b"=", b"[[", b"\x00", b"\xe2\x80\xae"]
        ),
    ),
    min_size=1,
    max_size=6,
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=8,
)


@SETTINGS
@given(edits=byte_edits)
def test_byte_mutations_of_a_lock(world, capsys, edits):
    lock = world[2]
    lock.write_bytes(_byte_mutation(lock.read_bytes(), edits))
    _assert_contained(world, [lock], capsys)


@SETTINGS
@given(edits=byte_edits, which=st.sampled_from(["snap", "manifest", "provenance"]))
def test_byte_mutations_of_snapshots_manifests_and_records(world, capsys, edits, which):
    _tmp, repo, _lock, snap, checkout = world
    target = {
        "snap": snap,
        "manifest": repo / "overlays" / "smoke-ext" / "manifest.toml",
        "provenance": checkout / ".megacpp-checkout.json",
    }[which]
    target.write_bytes(_byte_mutation(target.read_bytes(), edits))
    _assert_contained(world, [target], capsys)


@SETTINGS
@given(
    path=st.lists(
        st.sampled_from(["facts", "host", "timing", "python", "distributions", "x", "env"]), min_size=1, max_size=4
    ),
    value=json_values,
)
def test_wrong_types_in_a_snapshot(world, capsys, path, value):
    snap = world[3]
    doc = json.loads(snap.read_text())
    node = doc
    for key in path[:-1]:
        node = node.setdefault(key, {}) if isinstance(node, dict) else {}
    if isinstance(node, dict):
        node[path[-1]] = value
    snap.write_text(json.dumps(doc))
    _assert_contained(world, [snap], capsys)


@SETTINGS
@given(
    key=st.sampled_from(["name", "version", "marker", "index", "url", "sha256", "size", "wheels", "packages"]),
    value=st.sampled_from(["5", "[1]", '"x\\ny"', "{a = 1}", '"big"', "true", "-1", '"../../x"', "[[[[]]]]"]),
)
def test_wrong_types_in_a_lock(world, capsys, key, value):
    lock = world[2]
    text = lock.read_text()
    lines = [f"{key} = {value}" if ln.startswith(f"{key} = ") else ln for ln in text.splitlines()]
    if key in ("url", "sha256", "size"):
        lines = [ln.replace(f'{key} = "', f'{key} = {value}, _x = "', 1) if "wheels" in ln else ln for ln in lines]
    lock.write_text("\n".join(lines) + "\n")
    _assert_contained(world, [lock], capsys)
