"""``overlay restore`` puts a checkout back exactly as its commit has it (issue 12, class 8): tracked
symlinks as symlinks (not regular files holding the target's name), and no empty directory that
the overlay created, with or without the journal that remembers them. Real repositories, real
checkouts, overlays captured by ``overlay new``."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.checkout import checkout_source, verify_checkout
from megacpp_env.overlay import apply_overlay, new_overlay, restore_overlay
from megacpp_env.spec.model import Source
from megacpp_env.worktree.manifest import journal_path, load_manifest
from megacpp_env.worktree.status import overlay_status
from tests.fixtures.git_repos import commit_all, make_repo, write_files

LINKS = {"docs/latest.md": "../README.md", "bin/tool": "../scripts/run.sh", "here": "./pkg//core.py"}


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Source, Path]:
    """A repository whose tree holds symlinks (one with a './' and '//' that a Path would normalise)."""
    up = tmp_path / "up"
    make_repo(up, {"README.md": "readme\n", "scripts/run.sh": "#!/bin/sh\n", "pkg/core.py": "x = 1\n"})
    for rel, target in LINKS.items():
        (up / rel).parent.mkdir(parents=True, exist_ok=True)
        (up / rel).symlink_to(target)
    sha = commit_all(up, "symlinks")
    assert git.file_mode(up, "docs/latest.md") == git.SYMLINK_MODE
    return Source(name="demo", repo=up.as_uri(), commit=sha, ref="main"), tmp_path


def _capture(source: Source, tmp_path: Path, edit) -> Path:  # type: ignore[no-untyped-def]
    work = tmp_path / "work"
    checkout_source(source, work)
    edit(work)
    odir = tmp_path / "overlays" / "demo"
    new_overlay(odir, work, name="demo", source="demo")
    return odir


def _assert_pristine(target: Path, source: Source, odir: Path) -> None:
    for rel, link in LINKS.items():
        assert (target / rel).is_symlink(), rel
        assert os.readlink(target / rel) == link
    assert overlay_status(odir, target).state == "clean"
    v = verify_checkout(target, source)
    assert v.ok, v.problems


def _replace_links_with_files(work: Path) -> None:
    for rel in LINKS:
        (work / rel).unlink()
    write_files(work, {"docs/latest.md": "a real page\n", "bin/tool": "#!/bin/sh\necho tool\n"})  # 'here' deleted


def test_restore_puts_tracked_symlinks_back_as_symlinks(linked) -> None:  # type: ignore[no-untyped-def]
    source, tmp_path = linked
    odir = _capture(source, tmp_path, _replace_links_with_files)
    actions = {f.path: f.action for f in load_manifest(odir).files}
    assert actions == {"bin/tool": "modify", "docs/latest.md": "modify", "here": "delete"}
    target = tmp_path / "target"
    checkout_source(source, target)
    assert overlay_status(odir, target).state == "clean"  # symlinks are the base, by kind and target
    st = apply_overlay(odir, target)
    assert st.state == "applied", st
    assert not (target / "docs/latest.md").is_symlink() and (target / "docs/latest.md").read_text() == "a real page\n"
    assert not (target / "here").exists() and not (target / "here").is_symlink()
    st = restore_overlay(odir, target)
    assert st.state == "clean"
    _assert_pristine(target, source, odir)


def test_a_file_holding_the_link_text_is_not_the_symlink(linked) -> None:  # type: ignore[no-untyped-def]
    """What restore used to leave (and call clean): a regular file whose bytes are the link's target."""
    source, tmp_path = linked
    odir = _capture(source, tmp_path, _replace_links_with_files)
    target = tmp_path / "target"
    checkout_source(source, target)
    (target / "docs/latest.md").unlink()
    (target / "docs/latest.md").write_text("../README.md")
    st = overlay_status(odir, target)
    assert {f.path: f.state for f in st.files}["docs/latest.md"] == "modified"
    assert restore_overlay(odir, target, force=True).state == "clean"
    _assert_pristine(target, source, odir)


def test_restore_after_a_killed_apply_restores_symlinks(linked) -> None:  # type: ignore[no-untyped-def]
    """An apply that died after replacing one link (journal says applying): restore repairs it."""
    source, tmp_path = linked
    odir = _capture(source, tmp_path, _replace_links_with_files)
    target = tmp_path / "target"
    checkout_source(source, target)
    apply_overlay(odir, target)
    journal = journal_path(target)
    journal.write_text(journal.read_text().replace('"applied"', '"applying"'))
    (target / "bin/tool").unlink()
    (target / "bin/tool").symlink_to("../scripts/run.sh")  # one file back at its base, the rest applied
    assert overlay_status(odir, target).state == "interrupted"
    assert restore_overlay(odir, target).state == "clean"
    _assert_pristine(target, source, odir)


def _add_nested(work: Path) -> None:
    write_files(work, {"new/deep/er/mod.py": "y = 2\n", "pkg/extra/deeper/x.py": "z = 3\n"})


@pytest.mark.parametrize("journal", ["kept", "lost"])
def test_restore_removes_the_directories_apply_created(linked, journal: str) -> None:  # type: ignore[no-untyped-def]
    source, tmp_path = linked
    odir = _capture(source, tmp_path, _add_nested)
    target = tmp_path / "target"
    checkout_source(source, target)
    before = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if ".git" not in p.parts)
    apply_overlay(odir, target)
    assert (target / "new/deep/er/mod.py").is_file()
    if journal == "lost":  # an apply by an older tool, or a journal deleted by hand: nothing remembers
        journal_path(target).unlink()
    restore_overlay(odir, target)
    after = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if ".git" not in p.parts)
    assert after == before
    assert not (target / "new").exists() and not (target / "pkg/extra").exists()
    _assert_pristine(target, source, odir)


def test_restore_keeps_a_submodule_directory_and_non_empty_ones(upstream, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """An uninitialised submodule is an empty directory that HEAD tracks; a directory holding a
    user's file is not empty: both stay."""
    work = tmp_path / "work"
    checkout_source(upstream.source(), work)
    write_files(work, {"pkg/sub/new.py": "n = 1\n"})
    odir = tmp_path / "ov"
    new_overlay(odir, work, name="demo", source="demo")
    target = tmp_path / "target"
    checkout_source(upstream.source(), target)
    shutil.rmtree(target / "third_party/lib")
    (target / "third_party/lib").mkdir()  # as a clone without --recurse-submodules leaves it
    apply_overlay(odir, target)
    write_files(target, {"pkg/sub/mine.txt": "keep me\n"})
    restore_overlay(odir, target)
    assert (target / "third_party/lib").is_dir()
    assert (target / "pkg/sub/mine.txt").read_text() == "keep me\n" and not (target / "pkg/sub/new.py").exists()
