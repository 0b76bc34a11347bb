from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.checkout import checkout_source, inspect_checkout, verify_checkout
from megacpp_env.errors import RefusedError, SpecError, VerificationError
from megacpp_env.fsutil import sha256_bytes
from megacpp_env.overlay import apply_overlay, new_overlay, restore_overlay, verify_overlay
from megacpp_env.worktree.manifest import JOURNAL_NAME, Manifest, OverlayFile, dump_manifest, load_manifest
from megacpp_env.worktree.status import overlay_status
from tests.conftest import REPO_ROOT
from tests.fixtures.git_repos import git_status, one_line_error, write_files

PATCHED = {
    "pkg/core.py": b"def f():\n    return 42\n",
    "pkg/extra/new_mod.py": b"X = 1\n",
    "data/blob.bin": bytes(range(255, -1, -1)) * 4,
    "tools/new.sh": b"#!/bin/sh\necho new\n",
}


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


@pytest.fixture
def overlay_setup(upstream, tmp_path: Path):  # type: ignore[no-untyped-def]
    """An overlay captured from a patched checkout, and a fresh pristine checkout to apply it to."""
    work = tmp_path / "work"
    checkout_source(upstream.source(), work)
    write_files(work, PATCHED)
    (work / "tools/new.sh").chmod(0o755)
    (work / "README.md").unlink()
    odir = tmp_path / "overlays" / "demo"
    new_overlay(odir, work, name="demo", source="demo")
    target = tmp_path / "target"
    checkout_source(upstream.source(), target)
    return odir, target, upstream


def test_new_captures_changed_untracked_and_deleted(overlay_setup) -> None:  # type: ignore[no-untyped-def]
    odir, _target, upstream = overlay_setup
    m = load_manifest(odir)
    assert m.commit == upstream.commit and m.source == "demo"
    by_path = {f.path: f for f in m.files}
    assert sorted(by_path) == ["README.md", "data/blob.bin", "pkg/core.py", "pkg/extra/new_mod.py", "tools/new.sh"]
    assert by_path["README.md"].action == "delete" and by_path["README.md"].sha256 is None
    assert by_path["pkg/core.py"].base_sha256 == sha256_bytes(upstream.files["pkg/core.py"])
    assert by_path["pkg/core.py"].sha256 == sha256_bytes(PATCHED["pkg/core.py"])
    assert by_path["pkg/extra/new_mod.py"].action == "add" and by_path["pkg/extra/new_mod.py"].base_sha256 is None
    assert by_path["tools/new.sh"].mode == "100755"
    assert (odir / "files/pkg/core.py").read_bytes() == PATCHED["pkg/core.py"]
    assert not (odir / "files/README.md").exists()


def test_manifest_round_trip_and_determinism(overlay_setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    odir, _t, _u = overlay_setup
    text = (odir / "manifest.toml").read_text()
    m = load_manifest(odir)
    assert dump_manifest(m) == text
    assert tomllib.loads(text)["schema_version"] == 1
    before = (odir / "manifest.toml").stat().st_mtime_ns
    new_overlay(odir, tmp_path / "work", name="demo", source="demo", force=True)
    assert (odir / "manifest.toml").stat().st_mtime_ns == before  # unchanged content is not rewritten


def test_new_refuses_existing_without_force(overlay_setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    odir, _t, _u = overlay_setup
    with pytest.raises(RefusedError, match="pass --force"):
        new_overlay(odir, tmp_path / "work", name="demo", source="demo")


def test_toml_emitter_escapes() -> None:
    control = "".join(chr(c) for c in range(0x20)) + "\x7f"  # DEL: what json.dumps escaping left raw
    m = Manifest(
        name='we"ird\\',
        source=f"s{control}",
        commit="a" * 40,
        files=(OverlayFile(path="a b/ü.txt", action="add", sha256="b" * 64),),
    )
    data = tomllib.loads(dump_manifest(m))
    assert data["name"] == 'we"ird\\' and data["source"] == f"s{control}"
    assert data["files"][0]["path"] == "a b/ü.txt"


@pytest.mark.parametrize("bad", ["../x", "/etc/passwd", ".git/config", "a/./b", "a//b", "a\\b", "a/../b"])
def test_unsafe_paths_are_rejected(tmp_path: Path, bad: str) -> None:
    text = dump_manifest(Manifest(name="n", source="s", commit="a" * 40)).replace("files = []", "")
    text += f'\n[[files]]\npath = "{bad.replace(chr(92), chr(92) * 2)}"\naction = "add"\nsha256 = "{"b" * 64}"\n'
    (tmp_path / "manifest.toml").write_text(text)
    with pytest.raises(SpecError, match="unsafe overlay path"):
        load_manifest(tmp_path)


def test_apply_verify_and_idempotent(overlay_setup) -> None:  # type: ignore[no-untyped-def]
    odir, target, upstream = overlay_setup
    assert overlay_status(odir, target).state == "clean"
    st = apply_overlay(odir, target)
    assert st.state == "applied" and st.ok
    assert (target / "pkg/core.py").read_bytes() == PATCHED["pkg/core.py"]
    assert (target / "pkg/extra/new_mod.py").read_bytes() == PATCHED["pkg/extra/new_mod.py"]
    assert not (target / "README.md").exists()
    assert os.access(target / "tools/new.sh", os.X_OK)
    assert verify_overlay(odir, target).ok
    assert apply_overlay(odir, target).state == "applied"  # again: no-op
    # verify-checkout accepts exactly the recorded overlay state
    assert verify_checkout(target, upstream.source(), overlay_dir=odir).ok
    assert inspect_checkout(target).to_dict()["overlay"]["name"] == "demo"


def test_base_hash_mismatch_leaves_every_file_untouched(overlay_setup) -> None:  # type: ignore[no-untyped-def]
    odir, target, _u = overlay_setup
    write_files(target, {"data/blob.bin": b"local edit"})
    before = _tree(target)
    with pytest.raises(VerificationError, match=r"base hash mismatch, nothing was changed: data/blob.bin"):
        apply_overlay(odir, target)
    assert _tree(target) == before
    assert not git.git_path(target, JOURNAL_NAME).exists()


def test_new_file_already_present_is_a_mismatch(overlay_setup) -> None:  # type: ignore[no-untyped-def]
    odir, target, _u = overlay_setup
    write_files(target, {"pkg/extra/new_mod.py": "mine\n"})
    with pytest.raises(VerificationError, match=r"pkg/extra/new_mod.py: expected \(absent: a new file\)"):
        apply_overlay(odir, target)
    assert (target / "pkg/core.py").read_bytes() != PATCHED["pkg/core.py"]


def test_wrong_commit_is_refused(overlay_setup, upstream) -> None:  # type: ignore[no-untyped-def]
    odir, target, _u = overlay_setup
    git.run_git(["fetch", "--quiet", upstream.url, upstream.tip], target, config={"protocol.file.allow": "always"})
    git.checkout_detached(target, upstream.tip)
    before = _tree(target)
    with pytest.raises(VerificationError, match=f"overlay demo was made for demo at {upstream.commit}"):
        apply_overlay(odir, target)
    assert _tree(target) == before
    assert overlay_status(odir, target).state == "wrong-commit"


def test_checkout_without_git_is_refused(overlay_setup) -> None:  # type: ignore[no-untyped-def]
    odir, target, _u = overlay_setup
    import shutil

    shutil.rmtree(target / ".git")
    with pytest.raises(RefusedError, match=r"has no \.git"):
        apply_overlay(odir, target)
    assert overlay_status(odir, target).state == "unverifiable"


def test_damaged_overlay_is_refused(overlay_setup) -> None:  # type: ignore[no-untyped-def]
    odir, target, _u = overlay_setup
    (odir / "files/pkg/core.py").write_bytes(b"tampered\n")
    before = _tree(target)
    with pytest.raises(VerificationError, match="is damaged"):
        apply_overlay(odir, target)
    assert _tree(target) == before


# Fault injection from the test side: the child wraps os.replace and os.unlink so that the N-th
# file operation inside the checkout (not under .git, where the journal lives) completes and the
# process then SIGKILLs itself -- a crash between two files of an apply.
KILLER = """
import os, signal, sys
from megacpp_env.overlay import apply_overlay

overlay_dir, checkout, limit = sys.argv[1], os.path.realpath(sys.argv[2]), int(sys.argv[3])
done = 0

def counting(real, dest_arg):
    def op(*args, **kwargs):
        global done
        result = real(*args, **kwargs)
        rel = os.path.relpath(os.path.realpath(args[dest_arg]), checkout)
        if not rel.startswith("..") and rel.split(os.sep)[0] != ".git":
            done += 1
            if done == limit:
                os.kill(os.getpid(), signal.SIGKILL)
        return result
    return op

os.replace = counting(os.replace, 1)
os.unlink = counting(os.unlink, 0)
apply_overlay(overlay_dir, checkout)
"""


def _apply_in_subprocess(odir: Path, target: Path, kill_after: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-c", KILLER, str(odir), str(target), str(kill_after)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("kill_after", [1, 2, 4])
def test_sigkill_midway_is_reported_and_restore_repairs(overlay_setup, kill_after: int) -> None:  # type: ignore[no-untyped-def]
    odir, target, upstream = overlay_setup
    pristine = _tree(target)
    proc = _apply_in_subprocess(odir, target, kill_after=kill_after)
    assert proc.returncode == -9, proc.stderr
    st = overlay_status(odir, target)
    assert st.state == "interrupted"
    assert [f.state for f in st.files].count("applied") == kill_after
    with pytest.raises(RefusedError, match="interrupted"):
        apply_overlay(odir, target)
    assert not verify_checkout(target, upstream.source(), overlay_dir=odir).ok
    restored = restore_overlay(odir, target)
    assert restored.state == "clean"
    assert _tree(target) == pristine  # byte-identical upstream files, new files and dirs gone
    assert not (target / "pkg/extra").exists()
    assert git_status(target) == ()
    assert verify_checkout(target, upstream.source(), overlay_dir=odir).ok
    assert apply_overlay(odir, target).state == "applied"


def test_restore_after_apply_is_byte_identical(overlay_setup) -> None:  # type: ignore[no-untyped-def]
    odir, target, upstream = overlay_setup
    pristine = _tree(target)
    apply_overlay(odir, target)
    st = restore_overlay(odir, target)
    assert st.state == "clean" and st.journal is None
    assert _tree(target) == pristine
    assert not (target / "pkg/extra").exists()  # the directory apply created is gone too
    assert _tree(target)["data/blob.bin"] == upstream.files["data/blob.bin"]
    assert os.access(target / "scripts/run.sh", os.X_OK)
    assert inspect_checkout(target).to_dict()["overlay"] is None


def test_restore_refuses_foreign_edits_unless_forced(overlay_setup) -> None:  # type: ignore[no-untyped-def]
    odir, target, upstream = overlay_setup
    apply_overlay(odir, target)
    write_files(target, {"pkg/core.py": "someone else\n"})
    assert overlay_status(odir, target).state == "drifted"
    with pytest.raises(RefusedError, match=r"pkg/core\.py match neither"):
        restore_overlay(odir, target)
    restore_overlay(odir, target, force=True)
    assert (target / "pkg/core.py").read_bytes() == upstream.files["pkg/core.py"]


def test_stray_temp_file_is_reported_and_removed(overlay_setup) -> None:  # type: ignore[no-untyped-def]
    odir, target, _u = overlay_setup
    (target / "pkg/.core.py.abc123.tmp").write_bytes(b"half")
    assert overlay_status(odir, target).stray_temp_files == ("pkg/.core.py.abc123.tmp",)
    restore_overlay(odir, target)
    assert not (target / "pkg/.core.py.abc123.tmp").exists()


def test_empty_overlay_verifies_at_its_commit(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "t"
    checkout_source(upstream.source(), target)
    odir = tmp_path / "empty"
    m = new_overlay(odir, target, name="empty", source="demo")
    assert m.files == ()
    assert "files = []" in (odir / "manifest.toml").read_text()
    assert verify_overlay(odir, target).state == "clean"
    assert apply_overlay(odir, target).state == "applied"
    assert verify_overlay(odir, target).ok


def test_shipped_vllm_manifest_is_valid_and_empty() -> None:
    m = load_manifest(REPO_ROOT / "overlays" / "vllm")
    assert m.source == "vllm" and m.files == ()
    assert m.commit == "98dff2a81d747d1dba01a47f939f48c3526d4206"
    assert "overlay new vllm --from" in (REPO_ROOT / "overlays" / "vllm" / "README.md").read_text()


# ---- the shipped smoke overlay, end to end through the CLI ------------------------------------------


def test_cli_smoke_overlay_end_to_end(smoke_spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from megacpp_env.cli import main

    spec = ["--spec", str(smoke_spec)]
    dest = smoke_spec.parent / "src" / "megacpp-smoke-ext"
    assert main(["checkout", "megacpp_smoke_ext", "--dest", str(dest), *spec]) == 0
    pristine = _tree(dest)
    capsys.readouterr()
    assert main(["overlay", "status", "smoke-ext", "--to", str(dest), "--json", *spec]) == 0
    assert json.loads(capsys.readouterr().out)["state"] == "clean"
    assert main(["overlay", "verify", "smoke-ext", "--to", str(dest), *spec]) == 1
    assert "overlay smoke-ext is not applied" in capsys.readouterr().err
    assert main(["overlay", "apply", "smoke-ext", "--to", str(dest), *spec]) == 0
    assert main(["overlay", "verify", "smoke-ext", "--to", str(dest), "--json", *spec]) == 0
    report = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert report["ok"] is True and [f["state"] for f in report["files"]] == ["applied", "applied"]
    assert 'OVERLAY_MARKER = "overlay:smoke-ext"' in (dest / "megacpp_smoke_ext/__init__.py").read_text()
    assert main(["verify-checkout", str(dest), *spec]) == 0
    assert main(["overlay", "restore", "smoke-ext", "--to", str(dest), *spec]) == 0
    assert _tree(dest) == pristine
    assert main(["overlay", "verify", "vllm", "--to", str(dest), *spec]) == 1  # vllm's overlay: wrong source


def test_cli_overlay_new_refuses_checkout_off_the_pin(smoke_spec: Path, upstream, capsys) -> None:  # type: ignore[no-untyped-def]
    from megacpp_env.cli import main

    dest = smoke_spec.parent / "demo"
    checkout_source(upstream.source(), dest)
    assert main(["overlay", "new", "smoke-ext", "--from", str(dest), "--spec", str(smoke_spec), "--force"]) == 1
    assert "but the spec pins megacpp_smoke_ext at" in capsys.readouterr().err


def test_cli_overlay_new_with_explicit_overlays_dir(upstream, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from megacpp_env.cli import main

    dest = tmp_path / "demo"
    checkout_source(upstream.source(), dest)
    write_files(dest, {"pkg/core.py": "x = 1\n"})
    odir = tmp_path / "ov"
    args = ["overlay", "new", "mine", "--from", str(dest), "--source", "demo", "--overlays", str(odir)]
    assert main([*args, "--spec", str(tmp_path / "missing.yaml")]) == 0
    assert "captured 1 file(s) of demo" in capsys.readouterr().out
    assert load_manifest(odir / "mine").files[0].path == "pkg/core.py"


def test_shipped_smoke_overlay_matches_the_pin() -> None:
    from megacpp_env.spec import load_spec

    spec = load_spec(REPO_ROOT / "stack.yaml")
    m = load_manifest(REPO_ROOT / "overlays" / "smoke-ext")
    assert m.source == "megacpp_smoke_ext" and spec.sources[m.source].overlay == "smoke-ext"
    assert m.commit == spec.sources[m.source].commit
    assert {f.action for f in m.files} == {"modify", "add"}
    assert dump_manifest(m) == (REPO_ROOT / "overlays" / "smoke-ext" / "manifest.toml").read_text()
    vllm = load_manifest(REPO_ROOT / "overlays" / "vllm")
    assert vllm.commit == spec.sources["vllm"].commit


def test_apply_to_a_hand_made_clone_records_a_minimal_provenance(overlay_setup, upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    odir, _target, _u = overlay_setup
    clone = tmp_path / "clone"
    git.run_git(["clone", "--quiet", upstream.url, str(clone)], config={"protocol.file.allow": "always"})
    git.checkout_detached(clone, upstream.commit)
    assert not verify_checkout(clone, upstream.source()).ok  # submodules: true, not initialised yet
    git.submodule_update(clone, allow_file_protocol=True)
    apply_overlay(odir, clone)
    v = verify_checkout(clone, upstream.source(), overlay_dir=odir)
    assert v.ok, v.problems
    prov = v.state.provenance
    assert prov is not None and prov.source == "demo" and prov.commit == upstream.commit and prov.url == upstream.url
    assert git_status(clone) != ()  # the overlay's files; the record itself stays excluded
    assert ".megacpp-checkout.json" not in "".join(git_status(clone))


# ---- local changes outside the overlay ----------------------------------------------------------


def test_apply_refuses_local_changes_outside_the_overlay(overlay_setup) -> None:  # type: ignore[no-untyped-def]
    odir, target, _u = overlay_setup
    write_files(target, {"pkg/__init__.py": "VERSION = 'mine'\n", "notes.txt": "scratch\n"})
    before = _tree(target)
    with pytest.raises(RefusedError) as exc:
        apply_overlay(odir, target)
    assert f"{target} has local changes outside overlay demo: notes.txt, pkg/__init__.py; refusing" in str(exc.value)
    assert f"git -C {target} status" in str(exc.value)
    assert _tree(target) == before
    assert not git.git_path(target, JOURNAL_NAME).exists()
    assert inspect_checkout(target).provenance.overlay is None  # type: ignore[union-attr]


def test_reapply_refuses_a_foreign_edit_made_after_apply(overlay_setup) -> None:  # type: ignore[no-untyped-def]
    odir, target, upstream = overlay_setup
    apply_overlay(odir, target)
    assert verify_checkout(target, upstream.source(), overlay_dir=odir).ok
    write_files(target, {"pkg/__init__.py": "VERSION = 'mine'\n"})
    v = verify_checkout(target, upstream.source(), overlay_dir=odir)
    assert not v.ok and "local changes no overlay manifest accounts for: pkg/__init__.py" in v.problems[0]
    with pytest.raises(RefusedError, match=r"outside overlay demo: pkg/__init__\.py"):
        apply_overlay(odir, target)  # re-recording would make the foreign edit look like the overlay


def test_apply_records_the_overlay_paths(overlay_setup) -> None:  # type: ignore[no-untyped-def]
    odir, target, _u = overlay_setup
    apply_overlay(odir, target)
    rec = inspect_checkout(target).to_dict()["overlay"]
    assert rec["paths"] == ["README.md", "data/blob.bin", "pkg/core.py", "pkg/extra/new_mod.py", "tools/new.sh"]
    assert inspect_checkout(target).changed == tuple(rec["paths"])


def test_cli_apply_with_a_foreign_edit_is_refused(smoke_spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from megacpp_env.cli import main

    spec = ["--spec", str(smoke_spec)]
    dest = smoke_spec.parent / "x"
    assert main(["checkout", "megacpp_smoke_ext", "--dest", str(dest), *spec]) == 0
    with open(dest / "setup.py", "a") as fh:
        fh.write("# local edit\n")
    capsys.readouterr()
    assert main(["overlay", "apply", "smoke-ext", "--to", str(dest), *spec]) == 1
    err = one_line_error(capsys)
    assert "has local changes outside overlay smoke-ext: setup.py; refusing to apply over them" in err
    assert main(["verify-checkout", str(dest), "--expect", "megacpp_smoke_ext", *spec]) == 1
    assert "local changes no overlay manifest accounts for: setup.py" in capsys.readouterr().out


# ---- arguments: names, paths, defaults ------------------------------------------------------------


@pytest.mark.parametrize("name", ["../../escaped", "../../../tmp/rv/evil", "a/b", ".hidden", "_x", "x\n", "..", "a\\b"])
def test_cli_overlay_name_must_be_one_directory_name(
    smoke_spec: Path, upstream, tmp_path: Path, capsys, name: str
) -> None:  # type: ignore[no-untyped-def]
    from megacpp_env.cli import main

    ck = tmp_path / "ck"
    checkout_source(upstream.source(), ck)
    write_files(ck, {"pkg/core.py": "x = 1\n"})
    before = sorted(p for p in tmp_path.rglob("*") if ".git" not in p.parts)
    args = ["overlay", "new", name, "--from", str(ck), "--source", "demo", "--spec", str(smoke_spec)]
    assert main(args) == 1
    assert f"overlay name {name!r} is not valid: expected one directory name matching" in one_line_error(capsys)
    assert sorted(p for p in tmp_path.rglob("*") if ".git" not in p.parts) == before
    assert main(["overlay", "status", name, "--to", str(ck), "--spec", str(smoke_spec)]) == 1
    assert "is not valid" in one_line_error(capsys)


def test_cli_overlay_new_from_a_missing_dir_is_aone_line_error(smoke_spec: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from megacpp_env.cli import main

    missing = tmp_path / "nonexistent"
    args = ["overlay", "new", "x", "--from", str(missing), "--source", "megacpp_smoke_ext", "--spec", str(smoke_spec)]
    assert main(args) == 1
    assert one_line_error(capsys) == f"megacpp-env overlay: error: --from {missing}: no such directory\n"
    assert main(["overlay", "apply", "smoke-ext", "--to", str(missing), "--spec", str(smoke_spec)]) == 1
    assert one_line_error(capsys) == f"megacpp-env overlay: error: --to {missing}: no such directory\n"


def test_cli_overlay_new_from_a_plain_dir_says_it_is_not_a_checkout(smoke_spec: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from megacpp_env.cli import main

    plain = tmp_path / "somedir"
    plain.mkdir()
    (plain / "f.py").write_text("x\n")
    args = ["overlay", "new", "x", "--from", str(plain), "--source", "megacpp_smoke_ext", "--spec", str(smoke_spec)]
    assert main(args) == 1
    err = one_line_error(capsys)
    assert f"{plain} is not a git checkout (no .git at its top)" in err and "None" not in err
    assert not (smoke_spec.parent / "overlays" / "x").exists()


def test_cli_overlay_to_defaults_to_the_spec_checkout(smoke_spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from megacpp_env.cli import main

    spec = ["--spec", str(smoke_spec)]
    dest = smoke_spec.parent / ".megacpp" / "src" / "megacpp-smoke-ext"
    assert main(["overlay", "status", "smoke-ext", *spec]) == 1
    assert one_line_error(capsys) == (
        f"megacpp-env overlay: error: {dest} (the default checkout of megacpp_smoke_ext) does not exist: "
        "make it with `megacpp-env checkout megacpp_smoke_ext`, or pass --to CHECKOUT\n"
    )
    assert main(["checkout", "megacpp_smoke_ext", *spec]) == 0
    capsys.readouterr()
    assert main(["overlay", "apply", "smoke-ext", "--json", *spec]) == 0
    assert json.loads(capsys.readouterr().out)["checkout"] == str(dest)
    assert main(["overlay", "verify", "smoke-ext", *spec]) == 0
    assert main(["overlay", "status", "smoke-ext", *spec]) == 0
    assert main(["overlay", "restore", "smoke-ext", *spec]) == 0
    assert git_status(dest) == ()


def test_cli_overlay_without_spec_needs_to(overlay_setup, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from megacpp_env.cli import main

    odir, target, _u = overlay_setup
    base = ["overlay", "status", "demo", "--overlays", str(odir.parent), "--spec", str(tmp_path / "none.yaml")]
    assert main(base) == 1
    assert one_line_error(capsys) == (
        f"megacpp-env overlay: error: pass --to CHECKOUT: there is no spec at {tmp_path / 'none.yaml'} "
        "to find the default checkout of demo\n"
    )
    assert main([*base, "--to", str(target)]) == 0


# A SIGKILL between writing the provenance record's temp file and renaming it (issue 12, class 8):
# the temp file used to count as an untracked change, so `apply` refused and `restore` kept it.
RECORD_KILLER = """
import os, signal, sys
from megacpp_env.overlay import apply_overlay
real = os.replace
def replace(src, dst, *args, **kwargs):
    if str(dst).endswith(".megacpp-checkout.json"):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(src, dst, *args, **kwargs)
os.replace = replace
apply_overlay(sys.argv[1], sys.argv[2])
"""


def test_sigkill_during_the_record_write_does_not_wedge_the_checkout(overlay_setup) -> None:  # type: ignore[no-untyped-def]
    odir, target, upstream = overlay_setup
    pristine = _tree(target)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", RECORD_KILLER, str(odir), str(target)], env=env, capture_output=True, check=False
    )
    assert proc.returncode == -9
    assert list(target.glob(".*.tmp"))  # the killed write's temp file is there ...
    assert apply_overlay(odir, target).state == "applied"  # ... and does not wedge anything
    assert not list(target.glob(".*.tmp"))
    assert verify_checkout(target, upstream.source(), overlay_dir=odir).ok
    assert restore_overlay(odir, target).state == "clean"
    assert _tree(target) == pristine
