"""The source mirror: real repositories (a superproject with submodules, the pinned upstream bundles),
checkouts from the mirror with the pinned URLs unreachable, idempotence and per-source isolation."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.checkout import checkout_source, verify_checkout
from megacpp_env.commands import checkout as checkout_cmd
from megacpp_env.commands import mirror_sources as mirror_cmd
from megacpp_env.errors import RefusedError, ToolError
from megacpp_env.spec.model import Source
from megacpp_env.srcbuild.mirror import (
    PIN_REF,
    MirrorRequest,
    Pin,
    insteadof_config,
    mirror_sources,
    parse_rewrite,
    repo_key,
    resolve_submodule_url,
    source_dir,
)
from tests.fixtures.git_repos import commit_all, make_repo, write_files
from tests.fixtures.srcbuild import REPO_ROOT, SHARED_BUNDLES, SMOKE_URL


def tree_state(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``root``: sha256 and mtime (a rewrite with the same bytes still shows)."""
    return {
        p.relative_to(root).as_posix(): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def request(src: Source) -> MirrorRequest:
    return MirrorRequest(source=src.name, pins=(Pin(url=src.repo, commit=src.commit, submodules=src.submodules),))


def make_unreachable(*paths: Path) -> None:
    for path in paths:
        path.rename(path.with_name(path.name + ".gone"))


def test_mirror_with_submodule_serves_a_checkout_when_upstream_is_gone(upstream, tmp_path: Path) -> None:
    src = upstream.source()
    root = tmp_path / "mirror"
    (made,) = mirror_sources(root, [request(src)])
    assert made.action == "created"
    assert made.repos == {upstream.url: [upstream.commit], upstream.sub_path.as_uri(): [upstream.sub_commit]}
    index = json.loads((source_dir(root, "demo") / "index.json").read_text())
    assert index["repos"][upstream.url]["path"] == f"git/{repo_key(upstream.url)}.git"
    make_unreachable(upstream.path, upstream.sub_path)
    dest = tmp_path / "co"
    with pytest.raises(ToolError):
        checkout_source(src, tmp_path / "direct")  # the pinned URL really is gone
    result = checkout_source(src, dest, git_config=insteadof_config(root, "demo"))
    assert result.state.head == upstream.commit
    assert [(s.path, s.actual) for s in result.state.submodules] == [("third_party/lib", upstream.sub_commit)]
    assert git.remote_urls(dest) == {"origin": upstream.url}  # the recorded origin is the pinned URL
    assert verify_checkout(dest, src).ok
    assert not (Path.home() / ".gitconfig").is_file() or "insteadOf" not in (Path.home() / ".gitconfig").read_text()


def test_relative_submodule_url_resolves_like_git(tmp_path: Path) -> None:
    sub = tmp_path / "up-sub"
    sub_commit = make_repo(sub, {"lib.txt": "relative\n"})
    main = tmp_path / "up-main"
    commit = make_repo(main, {"a.txt": "a\n"}, submodules={"lib": "../up-sub"})
    assert git.git_text(["config", "-f", ".gitmodules", "submodule.lib.url"], main) == "../up-sub"
    src = Source(name="rel", repo=main.as_uri(), commit=commit, submodules=True)
    root = tmp_path / "mirror"
    (made,) = mirror_sources(root, [request(src)])
    assert made.repos[sub.as_uri()] == [sub_commit]
    make_unreachable(main, sub)
    dest = tmp_path / "co"
    state = checkout_source(src, dest, git_config=insteadof_config(root, "rel")).state
    assert (dest / "lib" / "lib.txt").read_text() == "relative\n" and state.submodules[0].matches


@pytest.mark.parametrize(
    ("base", "url", "expected"),
    [
        ("https://h.example/org/proj.git", "../lib.git", "https://h.example/org/lib.git"),
        ("https://h.example/org/proj.git", "./sub", "https://h.example/org/proj.git/sub"),
        ("https://h.example/org/proj.git/", "../../other/lib", "https://h.example/other/lib"),
        ("git@h.example:org/proj.git", "../lib.git", "git@h.example:org/lib.git"),
        ("https://h.example/org/proj.git", "https://x.example/abs.git", "https://x.example/abs.git"),
    ],
)
def test_resolve_submodule_url(base: str, url: str, expected: str) -> None:
    assert resolve_submodule_url(base, url) == expected


def test_mirror_is_idempotent_and_leaves_bytes_alone(upstream, tmp_path: Path) -> None:
    root = tmp_path / "mirror"
    mirror_sources(root, [request(upstream.source())])
    before = tree_state(source_dir(root, "demo"))
    (again,) = mirror_sources(root, [request(upstream.source())])
    assert again.action == "unchanged"
    assert tree_state(source_dir(root, "demo")) == before
    repo = source_dir(root, "demo") / "git" / f"{repo_key(upstream.url)}.git"
    assert git.git_text(["for-each-ref", "--format=%(refname)"], repo).splitlines() == [f"{PIN_REF}{upstream.commit}"]
    assert git.git_text(["config", "uploadpack.allowAnySHA1InWant"], repo) == "true"


def test_bumping_one_pin_touches_only_that_source(upstream, tmp_path: Path) -> None:
    other_path = tmp_path / "other"
    other_commit = make_repo(other_path, {"x.txt": "x\n"})
    other = Source(name="other", repo=other_path.as_uri(), commit=other_commit)
    root = tmp_path / "mirror"
    mirror_sources(root, [request(upstream.source()), request(other)])
    other_before = tree_state(source_dir(root, "other"))
    bumped = Source(name="demo", repo=upstream.url, commit=upstream.tip, submodules=True)
    (demo, kept) = mirror_sources(root, [request(bumped), request(other)])
    assert (demo.action, kept.action) == ("updated", "unchanged")
    assert demo.repos[upstream.url] == sorted([upstream.commit, upstream.tip])
    assert tree_state(source_dir(root, "other")) == other_before
    assert not [p.name for p in (root / "sources").iterdir() if p.name.startswith(".")]  # no partial/old dirs left
    top = json.loads((root / "index.json").read_text())
    assert top["sources"]["demo"]["commit"] == upstream.tip and set(top["sources"]) == {"demo", "other"}


def test_unknown_commit_fails_and_leaves_no_partial_directory(upstream, tmp_path: Path) -> None:
    src = Source(name="demo", repo=upstream.url, commit="1" * 40)
    root = tmp_path / "mirror"
    with pytest.raises(ToolError, match=f"commit {'1' * 40} is not reachable"):
        mirror_sources(root, [request(src)])
    assert not (root / "sources" / "demo").exists()
    assert [p.name for p in (root / "sources").iterdir()] == []


def test_mirror_from_the_pinned_upstream_bundle(shared_sources: Path, tmp_path: Path) -> None:
    """causal-conv1d at its real pin, from ../shared/sources, through `--from URL=BUNDLE` (git insteadOf)."""
    spec_src = load_stack_source("causal_conv1d")
    bundle = shared_sources / SHARED_BUNDLES[spec_src.repo]
    rewrite = dict([parse_rewrite(f"{spec_src.repo}={bundle}")])
    root = tmp_path / "mirror"
    (made,) = mirror_sources(root, [request(spec_src)], rewrites=rewrite)
    assert made.repos == {spec_src.repo: [spec_src.commit]}
    repo = source_dir(root, "causal_conv1d") / "git" / f"{repo_key(spec_src.repo)}.git"
    assert git.git_text(["for-each-ref", "--format=%(refname)"], repo).splitlines() == [f"{PIN_REF}{spec_src.commit}"]
    assert git.git_text(["rev-list", "--count", spec_src.commit], repo) != "1"  # its history came along
    dest = tmp_path / "co"
    checkout_source(spec_src, dest, git_config=insteadof_config(root, "causal_conv1d"))
    assert "CAUSAL_CONV1D_FORCE_BUILD" in (dest / "setup.py").read_text()
    assert verify_checkout(dest, spec_src).ok


def load_stack_source(name: str) -> Source:
    from megacpp_env.spec import load_spec

    return load_spec(REPO_ROOT / "stack.yaml").sources[name]


def test_parse_rewrite_errors(tmp_path: Path) -> None:
    with pytest.raises(RefusedError, match="expected URL=PATH"):
        parse_rewrite("no-equals")
    with pytest.raises(RefusedError, match="does not exist"):
        parse_rewrite(f"https://h.example/x.git={tmp_path / 'missing.bundle'}")


def test_missing_source_in_mirror_names_the_remedy(tmp_path: Path) -> None:
    with pytest.raises(RefusedError, match=r"no mirror of source demo in .* \(make it: `megacpp-env mirror-sources"):
        insteadof_config(tmp_path, "demo")


# ---- the verbs ---------------------------------------------------------------------------------------


@pytest.fixture
def unreachable_smoke_spec(smoke_source, tmp_path: Path) -> Path:
    """stack.yaml with the smoke source's URL on a host that does not resolve (only a mirror can serve it)."""
    text = (REPO_ROOT / "stack.yaml").read_text().replace(SMOKE_URL, UNREACHABLE)
    spec = tmp_path / "proj" / "stack.yaml"
    spec.parent.mkdir()
    spec.write_text(text)
    shutil.copytree(REPO_ROOT / "overlays", spec.parent / "overlays")
    return spec


UNREACHABLE = "https://git.invalid/megacpp/megacpp-smoke-ext.git"


def test_cli_mirror_sources_then_checkout_from_the_mirror(unreachable_smoke_spec: Path, smoke_source, capsys) -> None:
    root = unreachable_smoke_spec.parent / ".megacpp" / "source-mirror"
    args = argparse.Namespace(spec=str(unreachable_smoke_spec), targets=["smoke"], to=None, json=True,
                              rewrites=[f"{UNREACHABLE}={smoke_source.git_root / 'megacpp-smoke-ext.git'}"])  # fmt: skip
    assert mirror_cmd.run(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["mirror"] == str(root) and report["sources"][0]["action"] == "created"
    dest = unreachable_smoke_spec.parent / "co"
    co = argparse.Namespace(spec=str(unreachable_smoke_spec), name="megacpp-smoke-ext", dest=dest, mirror=root, json=False)
    assert checkout_cmd.run(co) == 0
    assert capsys.readouterr().out.startswith(f"created: {dest}: megacpp_smoke_ext at ")
    assert git.remote_urls(dest) == {"origin": UNREACHABLE}
    co_direct = argparse.Namespace(spec=str(unreachable_smoke_spec), name="megacpp_smoke_ext",
                                   dest=unreachable_smoke_spec.parent / "direct", mirror=None, json=False)  # fmt: skip
    with pytest.raises(ToolError):
        checkout_cmd.run(co_direct)


def test_git_config_of_the_user_is_never_written(upstream, tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    root = tmp_path / "mirror"
    mirror_sources(root, [request(upstream.source())])
    checkout_source(upstream.source(), tmp_path / "co", git_config=insteadof_config(root, "demo"))
    assert list(home.rglob("*")) == []
    assert "insteadof" not in git.git_text(["config", "--list", "--show-origin"], tmp_path / "co").lower()


def test_mirror_grows_with_a_new_commit_on_the_same_url(upstream, tmp_path: Path) -> None:
    root = tmp_path / "mirror"
    mirror_sources(root, [request(upstream.source())])
    write_files(upstream.path, {"new.txt": "new\n"})
    newer = commit_all(upstream.path, "newer")
    (made,) = mirror_sources(root, [MirrorRequest(source="demo", pins=(Pin(url=upstream.url, commit=newer),))])
    assert made.action == "updated" and made.repos[upstream.url] == sorted([upstream.commit, newer])
    assert os.listdir(root / "sources") == ["demo"]


def test_an_index_pointing_outside_the_mirror_is_refused(upstream, tmp_path: Path) -> None:
    from megacpp_env.srcbuild.mirror import MirrorFormatError

    root = tmp_path / "mirror"
    mirror_sources(root, [request(upstream.source())])
    index = source_dir(root, "demo") / "index.json"
    doc = json.loads(index.read_text())
    doc["repos"][upstream.url]["path"] = "../../../etc"
    index.write_text(json.dumps(doc))
    with pytest.raises(MirrorFormatError, match=r"index.json: repos\..*\.path: expected git/<key>.git inside"):
        insteadof_config(root, "demo")


def test_mirror_from_the_shallow_megatron_repository(shared_sources: Path, tmp_path: Path) -> None:
    """Megatron-LM ships as a shallow (depth 1) bare repository: mirrored and checked out all the same."""
    import tarfile

    with tarfile.open(shared_sources / "megatron.git.tar") as tar:
        tar.extractall(tmp_path / "upstream", filter="data")
    (bare,) = (tmp_path / "upstream").glob("*.git")
    src = load_stack_source("megatron_lm")
    root = tmp_path / "mirror"
    (made,) = mirror_sources(root, [request(src)], rewrites=dict([parse_rewrite(f"{src.repo}={bare}")]))
    assert made.repos == {src.repo: [src.commit]}
    dest = tmp_path / "co"
    state = checkout_source(src, dest, git_config=insteadof_config(root, src.name)).state
    assert state.head == src.commit and verify_checkout(dest, src).ok
    assert (dest / "megatron" / "core" / "package_info.py").is_file()
