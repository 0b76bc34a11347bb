from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.checkout import checkout_source, inspect_checkout, verify_checkout
from megacpp_env.errors import RefusedError, ToolError
from megacpp_env.worktree.provenance import PROVENANCE_NAME, OverlayRecord, record_overlay
from tests.conftest import REPO_ROOT
from tests.fixtures.git_repos import commit_all, git_status, one_line_error, run_smoke_script, write_files


def test_checkout_by_sha_with_submodule(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dest = tmp_path / "src" / "demo"
    result = checkout_source(upstream.source(), dest)
    assert result.action == "created"
    st = result.state
    assert st.has_git and st.head == upstream.commit and st.matches_pin and not st.dirty
    assert [(s.path, s.actual) for s in st.submodules] == [("third_party/lib", upstream.sub_commit)]
    assert (dest / "pkg/core.py").read_bytes() == upstream.files["pkg/core.py"]
    assert (dest / "third_party/lib/lib.txt").read_text() == "library v1\n"
    assert (dest / "scripts/run.sh").stat().st_mode & 0o111
    assert not git.has_commit(dest, upstream.tip)  # fetched by SHA, shallow
    assert not list(dest.parent.glob(".demo.partial-*"))


def test_provenance_record(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dest = tmp_path / "demo"
    src = upstream.source()
    checkout_source(src, dest)
    record = json.loads((dest / PROVENANCE_NAME).read_text())
    assert record["commit"] == upstream.commit
    assert record["url"] == upstream.url
    assert record["source"] == "demo"
    assert record["ref"] == "main"
    assert record["submodules"] == {"third_party/lib": upstream.sub_commit}
    assert record["tool"].startswith("megacpp-env ")
    assert record["overlay"] is None
    assert git_status(dest) == ()  # the record is excluded via .git/info/exclude


def test_checkout_is_idempotent(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dest = tmp_path / "demo"
    checkout_source(upstream.source(), dest)
    before = (dest / PROVENANCE_NAME).stat().st_mtime_ns
    again = checkout_source(upstream.source(), dest)
    assert again.action == "unchanged"
    assert again.state.matches_pin
    assert (dest / PROVENANCE_NAME).stat().st_mtime_ns == before  # not rewritten


def test_checkout_into_empty_dir(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dest = tmp_path / "empty"
    dest.mkdir()
    assert checkout_source(upstream.source(), dest).action == "created"


def test_refuses_dirty_checkout(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dest = tmp_path / "demo"
    checkout_source(upstream.source(), dest)
    write_files(dest, {"pkg/core.py": "patched\n"})
    with pytest.raises(RefusedError) as exc:
        checkout_source(upstream.source(), dest)
    assert str(exc.value) == (
        f"{dest} is at the pin of demo but its content is not: local changes no overlay manifest accounts for: "
        f"pkg/core.py (see `git -C {dest} status`). Refusing to reuse or change it: move it away (or delete it) "
        f"and run `megacpp-env checkout demo --dest {dest}` again, or pass another --dest"
    )
    assert (dest / "pkg/core.py").read_text() == "patched\n"


def test_refuses_untracked_file(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dest = tmp_path / "demo"
    checkout_source(upstream.source(), dest)
    write_files(dest, {"extra.py": "x\n"})
    with pytest.raises(RefusedError, match=r"local changes no overlay manifest accounts for: extra\.py"):
        checkout_source(upstream.source(), dest)


def test_refuses_wrong_commit(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dest = tmp_path / "demo"
    checkout_source(upstream.source(), dest)
    write_files(dest, {"pkg/core.py": "other\n"})
    other = commit_all(dest, "local commit")
    with pytest.raises(RefusedError, match=f"checkout at {other}, not at the pin {upstream.commit}"):
        checkout_source(upstream.source(), dest)
    assert git.head_commit(dest) == other


def test_refuses_tree_without_git(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dest = tmp_path / "demo"
    dest.mkdir()
    (dest / "file.py").write_text("x\n")
    with pytest.raises(RefusedError, match="exists and is not a git checkout"):
        checkout_source(upstream.source(), dest)
    assert (dest / "file.py").read_text() == "x\n"


def test_unknown_commit_leaves_nothing(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = dataclasses.replace(upstream.source(), commit="2" * 40)
    with pytest.raises(ToolError):
        checkout_source(bad, tmp_path / "out" / "demo")
    assert list((tmp_path / "out").iterdir()) == []


def test_verify_clean_checkout(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dest = tmp_path / "demo"
    checkout_source(upstream.source(), dest)
    v = verify_checkout(dest, upstream.source())
    assert v.ok, v.problems
    # without a Source the pin comes from the provenance record
    assert verify_checkout(dest).ok


def test_verify_reports_dirty_wrong_commit_and_submodule(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dest = tmp_path / "demo"
    checkout_source(upstream.source(), dest)
    write_files(dest, {"README.md": "changed\n", "third_party/lib/lib.txt": "sub change\n"})
    sub = dest / "third_party/lib"
    commit_all(sub, "moved submodule")
    v = verify_checkout(dest, upstream.source())
    assert not v.ok
    text = "\n".join(v.problems)
    assert "local changes no overlay manifest accounts for: README.md" in text
    assert (
        f"submodule third_party/lib is at {git.head_commit(sub)}, its superproject pins {upstream.sub_commit}" in text
    )


def test_a_hand_written_record_vouches_for_nothing(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A provenance record that claims an overlay with the right hashes and paths used to make any
    edit pass (issue 12, class 4). Only an overlay's manifest can vouch for changed bytes."""
    dest = tmp_path / "demo"
    checkout_source(upstream.source(), dest)
    write_files(dest, {"README.md": "changed\n", "new.txt": "n\n"})
    st = inspect_checkout(dest)
    rec = {"name": "x", "diff_hash": st.diff_hash, "untracked_hash": st.untracked_hash, "paths": list(st.changed)}
    record_overlay(dest, OverlayRecord.from_dict(rec))
    v = verify_checkout(dest, upstream.source())
    assert not v.ok
    assert "local changes no overlay manifest accounts for: README.md, new.txt" in v.problems[0]


TRICKS = ["assume-unchanged", "skip-worktree", "info-exclude", "replace", "mode", "hand-written-record", "submodule"]


def _git(dest: Path, *args: str, data: bytes | None = None) -> str:
    import subprocess

    return subprocess.run(["git", *args], cwd=dest, input=data, capture_output=True, check=True).stdout.decode().strip()


def _plant(dest: Path, trick: str) -> None:
    """Change a pristine checkout's content in a way git, or a record, hides (issue 12, class 4)."""
    if trick in ("assume-unchanged", "skip-worktree"):
        with open(dest / "README.md", "a") as fh:
            fh.write("x\n")
        _git(dest, "update-index", f"--{trick}", "README.md")
        assert git_status(dest) == ()  # git itself no longer sees the change
    elif trick == "info-exclude":
        (dest / "evil.py").write_text("import os\n")
        with open(dest / ".git" / "info" / "exclude", "a") as fh:
            fh.write("evil.py\n")
    elif trick == "replace":  # HEAD stays the pin; the object it names now means other content
        blob = _git(dest, "hash-object", "-w", "--stdin", data=b"evil\n")
        tree = _git(dest, "mktree", data=f"100644 blob {blob}\tREADME.md\n".encode())
        _git(dest, "replace", "-f", _git(dest, "rev-parse", "HEAD^{tree}"), tree)
        _git(dest, "checkout", "-f", "-q", "HEAD", "--", ".")
        _git(dest, "clean", "-fdq", "-e", ".megacpp-checkout.json")
    elif trick == "mode":
        (dest / "README.md").chmod(0o755)
    elif trick == "hand-written-record":  # a record claiming an overlay with the right hashes and paths
        write_files(dest, {"README.md": "changed\n", "new.txt": "n\n"})
        st = inspect_checkout(dest)
        rec = {"name": "x", "diff_hash": st.diff_hash, "untracked_hash": st.untracked_hash, "paths": list(st.changed)}
        record_overlay(dest, OverlayRecord.from_dict(rec))
    elif trick == "submodule":  # a file inside a submodule at its pinned commit
        write_files(dest, {"third_party/lib/lib.txt": "patched library\n"})


@pytest.mark.parametrize("trick", TRICKS)
def test_verify_judges_content_not_git_flags(upstream, tmp_path: Path, trick: str) -> None:  # type: ignore[no-untyped-def]
    """Each trick made ``verify-checkout`` say ok for a modified tree (issue 12, class 4)."""
    dest = tmp_path / "demo"
    checkout_source(upstream.source(), dest)
    assert verify_checkout(dest, upstream.source()).ok
    _plant(dest, trick)
    v = verify_checkout(dest, upstream.source())
    assert not v.ok, trick
    assert any("local changes no overlay manifest accounts for" in p for p in v.problems), v.problems


@pytest.mark.parametrize("trick", TRICKS)
def test_checkout_reuse_judges_content_like_verify(upstream, tmp_path: Path, trick: str) -> None:  # type: ignore[no-untyped-def]
    """``checkout`` into an existing checkout reused it when git (or the provenance record) said it
    was clean; now it is judged as ``verify-checkout`` judges it, and refused untouched."""
    dest = tmp_path / "demo"
    checkout_source(upstream.source(), dest)
    _plant(dest, trick)
    before = _tree_bytes(dest)
    with pytest.raises(RefusedError) as exc:
        checkout_source(upstream.source(), dest)
    msg = str(exc.value)
    assert msg.startswith(f"{dest} is at the pin of demo but its content is not: local changes no overlay manifest")
    assert msg.endswith(
        f"Refusing to reuse or change it: move it away (or delete it) and run `megacpp-env checkout demo "
        f"--dest {dest}` again, or pass another --dest"
    )
    assert _tree_bytes(dest) == before


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink() and ".git" not in p.relative_to(root).parts
    }


def test_verify_without_git_is_unverifiable(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dest = tmp_path / "demo"
    checkout_source(upstream.source(), dest)
    shutil.rmtree(dest / ".git")
    v = verify_checkout(dest, upstream.source())
    assert not v.ok
    assert v.problems == (
        f"{dest} has no .git: it is unverifiable (a copied or exported tree cannot be tied to a commit). "
        f"Make a real checkout with `megacpp-env checkout demo --dest {dest}` (move the tree away first)",
    )
    d = v.state.to_dict()
    assert d["has_git"] is False and d["head"] is None


def test_inspect_to_dict_shape(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    dest = tmp_path / "demo"
    checkout_source(upstream.source(), dest)
    d = inspect_checkout(dest, upstream.source()).to_dict()
    for key in ("has_git", "head", "expected", "matches_pin", "dirty", "diff_hash", "untracked", "submodules"):
        assert key in d
    assert d["submodules"] == [
        {"path": "third_party/lib", "expected": upstream.sub_commit, "actual": upstream.sub_commit, "matches": True}
    ]
    json.dumps(d)


# ---- the smoke source: deterministic commit, served over git://, checked out through the CLI ------


def test_smoke_script_reproduces_the_pinned_sha(tmp_path: Path) -> None:
    """Editing sources/megacpp-smoke-ext/ without updating stack.yaml's pin fails here."""
    from megacpp_env.spec import load_spec

    pinned = load_spec(REPO_ROOT / "stack.yaml").sources["megacpp_smoke_ext"].commit
    first = run_smoke_script("--print-commit", git_root=tmp_path / "unused")
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == pinned, (
        "sources/megacpp-smoke-ext/ changed: update sources.megacpp_smoke_ext.commit in stack.yaml to "
        f"{first.stdout.strip()} (bash scripts/smoke-source.sh --print-commit) and re-capture overlays/smoke-ext"
    )
    assert not (tmp_path / "unused").exists()  # --print-commit has no side effects


def test_smoke_commit_depends_on_content_only(tmp_path: Path, smoke_source) -> None:  # type: ignore[no-untyped-def]
    copy = tmp_path / "src"
    shutil.copytree(REPO_ROOT / "sources" / "megacpp-smoke-ext", copy)
    (copy / "megacpp_smoke_ext" / "__pycache__").mkdir()
    (copy / "megacpp_smoke_ext" / "__pycache__" / "x.pyc").write_bytes(b"junk")  # build outputs ignored
    (copy / "setup.py").chmod(0o755)  # file modes are fixed
    same = run_smoke_script("--print-commit", git_root=tmp_path / "g", MEGACPP_SMOKE_SRC=str(copy))
    assert same.stdout.strip() == smoke_source.commit
    (copy / "megacpp_smoke_ext" / "greeting.py").write_text("changed\n")
    other = run_smoke_script("--print-commit", git_root=tmp_path / "g", MEGACPP_SMOKE_SRC=str(copy))
    assert other.returncode == 0 and other.stdout.strip() != smoke_source.commit


def test_smoke_serve_and_fetch_by_sha_over_git_protocol(smoke_source, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    root = tmp_path / "served"
    served = run_smoke_script("--serve", git_root=root, MEGACPP_GIT_PORT=port)
    try:
        assert served.returncode == 0, served.stderr
        again = run_smoke_script("--serve", git_root=root, MEGACPP_GIT_PORT=port)
        assert "already serving" in again.stderr
        src = dataclasses.replace(smoke_source.source(), repo=f"git://127.0.0.1:{port}/megacpp-smoke-ext.git")
        result = checkout_source(src, tmp_path / "co")
        assert result.state.matches_pin and result.state.provenance and result.state.provenance.shallow
    finally:
        run_smoke_script("--stop", git_root=root, MEGACPP_GIT_PORT=port)
    assert not (root / "git-daemon.pid").exists()


def test_cli_checkout_and_verify(smoke_spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from megacpp_env.cli import main

    assert main(["checkout", "megacpp-smoke-ext", "--spec", str(smoke_spec), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    dest = smoke_spec.parent / ".megacpp" / "src" / "megacpp-smoke-ext"
    assert report["action"] == "created" and report["path"] == str(dest) and report["matches_pin"] is True
    assert main(["checkout", "megacpp_smoke_ext", "--spec", str(smoke_spec)]) == 0
    assert capsys.readouterr().out.startswith(f"unchanged: {dest}: megacpp_smoke_ext at ")
    assert main(["verify-checkout", str(dest), "--spec", str(smoke_spec)]) == 0
    assert main(["verify-checkout", str(dest), "--expect", "megacpp_smoke_ext", "--spec", str(smoke_spec)]) == 0
    assert main(["verify-checkout", str(dest), "--expect", "vllm", "--spec", str(smoke_spec)]) == 1
    capsys.readouterr()
    shutil.rmtree(dest / ".git")
    assert main(["verify-checkout", str(dest), "--spec", str(smoke_spec)]) == 1
    out = capsys.readouterr().out
    assert "has no .git: it is unverifiable" in out
    assert "megacpp-env checkout megacpp_smoke_ext --dest" in out
    assert main(["checkout", "megacpp_smoke_ext", "--spec", str(smoke_spec)]) == 1
    assert "is not a git checkout; refusing" in capsys.readouterr().err


def test_cli_checkout_to_an_unwritable_dest_is_aone_line_error(smoke_spec: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from megacpp_env.cli import main

    assert main(["checkout", "megacpp_smoke_ext", "--dest", "/proc/x", "--spec", str(smoke_spec)]) == 1
    assert "cannot create a checkout at /proc/x: " in one_line_error(capsys)
    blocker = smoke_spec.parent / "file"
    blocker.write_text("x")
    assert main(["checkout", "megacpp_smoke_ext", "--dest", str(blocker / "sub"), "--spec", str(smoke_spec)]) == 1
    assert f"cannot create a checkout at {blocker / 'sub'}: " in one_line_error(capsys)


def test_cli_verify_missing_path_says_it_does_not_exist(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from megacpp_env.cli import main

    missing = tmp_path / "nonexistent"
    assert main(["verify-checkout", str(missing), "--spec", str(tmp_path / "no.yaml")]) == 1
    assert (
        one_line_error(capsys)
        == f"megacpp-env verify-checkout: error: {missing} does not exist: there is no checkout to verify\n"
    )


def test_unverifiable_message_for_a_missing_path(tmp_path: Path) -> None:
    v = verify_checkout(tmp_path / "gone")
    assert v.problems == (
        f"{tmp_path / 'gone'} does not exist (make a checkout with `megacpp-env checkout NAME --dest {tmp_path / 'gone'}`)",
    )


def test_cli_unknown_source_is_a_usage_error(smoke_spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from megacpp_env.cli import main

    assert main(["checkout", "nope", "--spec", str(smoke_spec)]) == 2
    assert "unknown source 'nope'" in capsys.readouterr().err


def test_cli_checkout_reuses_an_overlaid_checkout_only_as_its_manifest_says(
    smoke_spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The overlay's manifest (not the provenance record) vouches for the applied files: the checkout
    is reused; one byte more anywhere, or a record alone, and it is refused untouched."""
    from megacpp_env.cli import main

    spec = ["--spec", str(smoke_spec)]
    dest = smoke_spec.parent / "src" / "megacpp-smoke-ext"
    assert main(["checkout", "megacpp_smoke_ext", "--dest", str(dest), *spec]) == 0
    assert main(["overlay", "apply", "smoke-ext", "--to", str(dest), *spec]) == 0
    capsys.readouterr()
    assert main(["checkout", "megacpp_smoke_ext", "--dest", str(dest), *spec]) == 0
    assert capsys.readouterr().out.startswith(f"unchanged: {dest}: megacpp_smoke_ext at ")
    init = dest / "megacpp_smoke_ext" / "__init__.py"
    init.write_text(init.read_text() + "# one more line\n")
    assert main(["checkout", "megacpp_smoke_ext", "--dest", str(dest), *spec]) == 1
    err = one_line_error(capsys)
    assert f"{dest} is at the pin of megacpp_smoke_ext but its content is not: " in err
    assert "megacpp_smoke_ext/__init__.py" in err and "move it away (or delete it)" in err
    assert init.read_text().endswith("# one more line\n")
