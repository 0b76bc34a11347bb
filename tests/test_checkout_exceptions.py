"""Declared exceptions to verification (``unobtainable:`` in stack.yaml): a submodule whose pinned commit
cannot be had, and a file whose blob a mirror lacks, are left out and reported, never stood in for.
Real repositories: the "gone" submodule's repository is deleted after the pin is made; the "partial"
submodule is served from a bare copy that holds every object of its pin but one blob."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.checkout import checkout_source, verify_checkout
from megacpp_env.errors import MegacppEnvError
from megacpp_env.spec.model import Source
from megacpp_env.srcbuild.plan import SourcePlan
from tests.fixtures.git_repos import FILE_OK, commit_all, make_repo

IMAGE = "media/big.png"
DECLARED = {
    "lib/gone": "its repository is gone (test)",
    f"lib/partial/{IMAGE}": "its blob is missing from the mirror (test)",
}


@dataclass(frozen=True)
class Upstream:
    url: str
    commit: str
    blob: str  # the blob the partial mirror lacks


@pytest.fixture
def upstream(tmp_path: Path) -> Upstream:
    partial = tmp_path / "partial-src"
    make_repo(partial, {"include/a.h": "int a;\n", IMAGE: b"\x89PNG" + bytes(range(200))})
    commit = git.head_commit(partial)
    assert commit
    blob = git.git_text(["rev-parse", f"HEAD:{IMAGE}"], partial)
    mirror = tmp_path / "partial-mirror.git"  # every object of the pin but the image's blob
    git.run_git(["init", "--quiet", "--bare", str(mirror)])
    objects = git.git_text(["rev-list", "--objects", commit], partial).splitlines()
    wanted = "".join(line.split()[0] + "\n" for line in objects if line.split()[0] != blob)
    pack = git.run_git(["pack-objects", "--stdout"], partial, input_bytes=wanted.encode()).stdout
    git.run_git(["index-pack", "--stdin"], mirror, input_bytes=pack)
    git.run_git(["update-ref", "refs/heads/main", commit], mirror)
    for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
        git.run_git(["config", key, "true"], mirror)
    gone = tmp_path / "gone"
    make_repo(gone, {"x.txt": "x\n"})
    main = tmp_path / "main"
    make_repo(main, {"README": "demo\n"}, submodules={"lib/partial": partial.as_uri(), "lib/gone": gone.as_uri()})
    git.run_git(["config", "-f", ".gitmodules", "submodule.lib/partial.url", mirror.as_uri()], main)
    sha = commit_all(main, "lib/partial is served by the mirror that lacks one blob")
    shutil.rmtree(gone)
    shutil.rmtree(partial)
    assert sha
    return Upstream(url=main.as_uri(), commit=sha, blob=blob)


def _source(up: Upstream, declared: dict[str, str]) -> Source:
    return Source(name="demo", repo=up.url, commit=up.commit, submodules=True, unobtainable=declared)


def test_declared_paths_are_left_out_and_reported(upstream: Upstream, tmp_path: Path) -> None:
    dest = tmp_path / "src"
    checkout_source(_source(upstream, DECLARED), dest)
    assert (dest / "lib/partial/include/a.h").read_text() == "int a;\n"
    assert not (dest / "lib/partial" / IMAGE).exists()
    assert not (dest / "lib/gone/.git").exists()
    result = verify_checkout(dest, _source(upstream, DECLARED))
    assert result.ok, result.problems
    assert len(result.exceptions) == 2
    assert any(e.startswith("lib/gone: submodule pinned at") and DECLARED["lib/gone"] in e for e in result.exceptions)
    assert any(e.startswith(f"lib/partial/{IMAGE}: file left out") for e in result.exceptions)
    assert result.to_dict()["exceptions"] == list(result.exceptions)


def test_an_undeclared_missing_object_fails_the_checkout(upstream: Upstream, tmp_path: Path) -> None:
    with pytest.raises(MegacppEnvError):
        checkout_source(_source(upstream, {"lib/gone": DECLARED["lib/gone"]}), tmp_path / "src")
    assert not (tmp_path / "src").exists()  # nothing half-made is left at the destination


def test_a_stand_in_is_a_problem_not_an_exception(upstream: Upstream, tmp_path: Path) -> None:
    dest = tmp_path / "src"
    checkout_source(_source(upstream, DECLARED), dest)
    (dest / "lib/partial" / IMAGE).parent.mkdir(parents=True, exist_ok=True)
    (dest / "lib/partial" / IMAGE).write_bytes(b"not the pinned image")
    result = verify_checkout(dest, _source(upstream, DECLARED))
    assert not result.ok
    assert any(f"lib/partial/{IMAGE}" in p for p in result.problems)
    assert len(result.exceptions) == 1  # only the submodule is still excused


def test_without_the_declaration_the_same_tree_is_not_as_pinned(upstream: Upstream, tmp_path: Path) -> None:
    dest = tmp_path / "src"
    checkout_source(_source(upstream, DECLARED), dest)
    result = verify_checkout(dest, _source(upstream, {}))
    assert not result.ok and not result.exceptions
    text = " ".join(result.problems)
    assert "lib/gone is not initialised" in text and f"lib/partial/{IMAGE}" in text


def test_plan_carries_the_declarations(upstream: Upstream) -> None:
    plan = SourcePlan(target="t", name="demo", dist="demo", repo=upstream.url, commit=upstream.commit,
                      unobtainable=DECLARED)  # fmt: skip
    assert SourcePlan.from_dict(plan.to_dict()).unobtainable == DECLARED
    plain = SourcePlan(target="t", name="demo", dist="demo", repo=upstream.url, commit=upstream.commit)
    assert "unobtainable" not in plain.to_dict()  # plans of sources without exceptions are unchanged


def test_spec_rejects_a_path_that_leaves_the_checkout(tmp_path: Path) -> None:
    from megacpp_env.spec import load_spec

    text = (
        "schema_version: 1\nproject: p\ntoolchains:\n  host: {gcc: '13', python: '3.12', uv: '0.13.9'}\n"
        "sources:\n  demo:\n    repo: https://example.invalid/demo.git\n    commit: '" + "a" * 40 + "'\n"
        "    unobtainable: {'../etc/passwd': why}\n"
        "targets:\n  t:\n    description: d\n    platforms: [linux/amd64]\n    base_image: none/none:none\n"
        "    toolchain: host\n    sources: [demo]\n"
    )
    (tmp_path / "stack.yaml").write_text(text)
    with pytest.raises(MegacppEnvError, match=r"sources\.demo\.unobtainable"):
        load_spec(tmp_path / "stack.yaml")
    (tmp_path / "stack.yaml").write_text(text.replace("'../etc/passwd'", "3rdparty/spdlog"))
    assert load_spec(tmp_path / "stack.yaml").sources["demo"].unobtainable == {"3rdparty/spdlog": "why"}


def _two_submodules(tmp_path: Path) -> tuple[str, str, Path]:
    """(url, commit) of a superproject with submodules ``lib/kept`` and ``lib/declared``, and the path of
    ``lib/declared``'s repository (a test deletes it to make it unobtainable)."""
    kept, declared = tmp_path / "kept", tmp_path / "declared"
    make_repo(kept, {"k.txt": "k\n"})
    make_repo(declared, {"include/spdlog.h": "// spdlog\n"})
    main = tmp_path / "super"
    sha = make_repo(main, {"README": "x\n"}, submodules={"lib/kept": kept.as_uri(), "lib/declared": declared.as_uri()})
    return main.as_uri(), sha, declared


WHY = {"lib/declared": "cannot be had here (test)"}


def test_a_declared_submodule_that_can_be_had_is_taken(tmp_path: Path) -> None:
    """`unobtainable` says what may be missing here, not what a build must leave out: where the pin can be
    had (a build machine that reaches it; FlashInfer's spdlog, which its all-reduce fusion and MoE routing
    JIT modules include at run time), the checkout has it, verified as any submodule."""
    url, sha, _ = _two_submodules(tmp_path)
    src = Source(name="demo", repo=url, commit=sha, submodules=True, unobtainable=WHY)
    dest = tmp_path / "src"
    checkout_source(src, dest, git_config=FILE_OK)
    assert (dest / "lib/declared/include/spdlog.h").read_text() == "// spdlog\n"
    result = verify_checkout(dest, src)
    assert result.ok and result.exceptions == ()


def test_the_mirror_takes_a_declared_submodule_where_it_can_and_leaves_it_out_where_it_cannot(tmp_path: Path) -> None:
    from megacpp_env.errors import ToolError
    from megacpp_env.sourceplans import mirror_request
    from megacpp_env.srcbuild.mirror import mirror_only_config, mirror_sources

    url, sha, declared = _two_submodules(tmp_path)
    src = Source(name="demo", repo=url, commit=sha, submodules=True, unobtainable=WHY)
    spec = None  # no fetches: mirror_request consults no other source
    req = mirror_request(spec, src)  # type: ignore[arg-type]
    said: list[str] = []
    (made,) = mirror_sources(tmp_path / "m1", [req], rewrites=FILE_OK, progress=said.append)
    assert declared.as_uri() in made.repos  # reachable: mirrored
    dest = tmp_path / "from-m1"
    checkout_source(src, dest, git_config={**FILE_OK, **mirror_only_config(tmp_path / "m1", "demo")})
    assert (dest / "lib/declared/include/spdlog.h").is_file() and verify_checkout(dest, src).exceptions == ()
    shutil.rmtree(declared)
    (made,) = mirror_sources(tmp_path / "m2", [req], rewrites=FILE_OK, progress=said.append)
    assert declared.as_uri() not in made.repos
    assert any(line.startswith(f"left out (declared unobtainable): {declared.as_uri()} @ ") for line in said)
    dest = tmp_path / "from-m2"
    checkout_source(src, dest, git_config={**FILE_OK, **mirror_only_config(tmp_path / "m2", "demo")})
    assert not (dest / "lib/declared/.git").exists() and (dest / "lib/kept/k.txt").is_file()
    result = verify_checkout(dest, src)
    assert result.ok and [e.split(":")[0] for e in result.exceptions] == ["lib/declared"]
    plain = replace(src, unobtainable={})
    with pytest.raises(ToolError):  # undeclared, the same missing repository fails the mirror
        mirror_sources(tmp_path / "m3", [mirror_request(spec, plain)], rewrites=FILE_OK)  # type: ignore[arg-type]


# ---- a remote superproject must not pull a local repository in (issue 31, defect 6) ------------------


@pytest.fixture
def git_daemon(tmp_path: Path):
    """A real git daemon on loopback serving ``tmp_path/served`` (a remote superproject)."""
    import socket
    import subprocess
    import time

    base = tmp_path / "served"
    base.mkdir()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        ["git", "daemon", "--export-all", f"--base-path={base}", "--listen=127.0.0.1", f"--port={port}",
         "--reuseaddr", str(base)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    yield base, f"git://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


SECRET = "the private repository's content\n"


def _remote_superproject(tmp_path: Path, served: Path, base_url: str, url_of: str) -> tuple[str, str]:
    """A superproject served over git:// whose .gitmodules names a repository of this machine."""
    private = tmp_path / "private-repo"
    make_repo(private, {"secret.txt": SECRET})
    url = {"file": private.as_uri(), "path": str(private), "FILE": "FILE://" + str(private),
           "localhost": f"file://localhost{private}"}[url_of]  # fmt: skip
    work = tmp_path / "super-work"
    make_repo(work, {"README": "r\n"}, submodules={"lib/private": private.as_uri(), "lib/gone": private.as_uri()})
    git.run_git(["config", "-f", ".gitmodules", "submodule.lib/private.url", url], work)
    changed = git.git_text(["status", "--porcelain"], work)
    sha = commit_all(work, "a submodule at a local path") if changed else git.head_commit(work)
    assert sha
    git.run_git(["clone", "--quiet", "--bare", str(work), str(served / "super.git")], tmp_path)
    return f"{base_url}/super.git", sha


@pytest.mark.parametrize("url_of", ["file", "path", "FILE", "localhost"])
@pytest.mark.parametrize("declared", [{"lib/gone": "its repository is gone (test)"}, {}])
def test_a_remote_superproject_cannot_name_a_local_repository(tmp_path, git_daemon, url_of, declared) -> None:
    """The unobtainable path (its own fetch of each submodule) and the plain one (git submodule update)
    follow the one rule a source mirror follows: local URLs only under a local superproject."""
    served, base_url = git_daemon
    url, sha = _remote_superproject(tmp_path, served, base_url, url_of)
    source = Source(name="demo", repo=url, commit=sha, submodules=True, unobtainable=declared)
    dest = tmp_path / "src"
    with pytest.raises(MegacppEnvError, match="local"):
        checkout_source(source, dest)
    assert not dest.exists() and not list(tmp_path.glob(".src.partial-*"))  # nothing half-made is left either


def test_the_same_rule_holds_when_a_checkout_is_reused(tmp_path, git_daemon) -> None:
    served, base_url = git_daemon
    url, sha = _remote_superproject(tmp_path, served, base_url, "file")
    dest = tmp_path / "src"
    declared = {"lib/gone": "gone (test)", "lib/private": "left out at first (test)"}
    checkout_source(Source(name="demo", repo=url, commit=sha, submodules=True, unobtainable=declared), dest)
    with pytest.raises(MegacppEnvError, match="local"):
        checkout_source(
            Source(name="demo", repo=url, commit=sha, submodules=True, unobtainable={"lib/gone": "gone"}), dest
        )
    assert not (dest / "lib/private/secret.txt").exists()


def test_a_local_superproject_may_still_name_local_submodules(upstream, tmp_path: Path) -> None:
    dest = tmp_path / "src"
    checkout_source(_source(upstream, DECLARED), dest)  # file:// superproject, file:// submodules
    assert verify_checkout(dest, _source(upstream, DECLARED)).ok


# ---- stand-ins in a submodule directory that is not initialised (issue 31, defect 7) -----------------

STAND_INS = {
    "a file": lambda d: (d / "x.txt").write_text("stand-in\n"),
    "a bogus .git file": lambda d: ((d / ".git").write_text("gitdir: /nonexistent\n"), (d / "x.txt").write_text("s")),
    "an empty .git directory": lambda d: ((d / ".git").mkdir(), (d / "x.txt").write_text("s")),
    "a nested directory": lambda d: ((d / "a/b").mkdir(parents=True), (d / "a/b/c.h").write_text("int c;\n")),
    "a hidden file": lambda d: (d / ".hidden").write_text("s"),
    "a symlink out": lambda d: (d / "link").symlink_to("/etc"),
}


@pytest.mark.parametrize("how", sorted(STAND_INS))
def test_a_stand_in_in_a_declared_submodule_directory_is_a_problem(upstream: Upstream, tmp_path: Path, how) -> None:
    dest = tmp_path / "src"
    checkout_source(_source(upstream, DECLARED), dest)
    STAND_INS[how](dest / "lib/gone")
    result = verify_checkout(dest, _source(upstream, DECLARED))
    assert not result.ok and any("lib/gone" in p and "stand-in" in p for p in result.problems), result.problems


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_something_else_in_place_of_a_declared_submodule_is_a_problem(upstream: Upstream, tmp_path, kind) -> None:
    dest = tmp_path / "src"
    checkout_source(_source(upstream, DECLARED), dest)
    (dest / "lib/gone").rmdir()
    if kind == "file":
        (dest / "lib/gone").write_text("stand-in\n")
    else:
        (dest / "lib/gone").symlink_to(tmp_path)
    result = verify_checkout(dest, _source(upstream, DECLARED))
    assert not result.ok and any("lib/gone" in p and "stands in" in p for p in result.problems), result.problems


def test_a_stand_in_counts_without_a_declaration_when_submodules_are_off(tmp_path: Path) -> None:
    """``submodules: false``: the submodule directory stays empty, and files put there are a local change."""
    inner = tmp_path / "inner"
    make_repo(inner, {"x.c": "int x;\n"})
    outer = tmp_path / "outer"
    sha = make_repo(outer, {"README": "r\n"}, submodules={"vendor/inner": inner.as_uri()})
    source = Source(name="demo", repo=outer.as_uri(), commit=sha, submodules=False)
    dest = tmp_path / "src"
    checkout_source(source, dest)
    assert verify_checkout(dest, source).ok
    (dest / "vendor/inner/x.c").write_text("int x = evil();\n")
    result = verify_checkout(dest, source)
    assert not result.ok and any("vendor/inner" in p for p in result.problems), result.problems
    with pytest.raises(MegacppEnvError, match="vendor/inner"):
        checkout_source(source, dest)  # the reuse judges it the same way


def test_build_source_verifies_with_the_same_judge(upstream: Upstream, tmp_path: Path) -> None:
    from megacpp_env.errors import VerificationError
    from megacpp_env.srcbuild import build as srcbuild

    dest = tmp_path / "src"
    checkout_source(_source(upstream, DECLARED), dest)
    (dest / "lib/gone/x.txt").write_text("stand-in\n")
    plan = SourcePlan(target="t", name="demo", dist="demo", repo=upstream.url, commit=upstream.commit,
                      submodules=True, unobtainable=DECLARED)  # fmt: skip
    with pytest.raises(VerificationError, match="lib/gone"):
        srcbuild._verify(plan, dest)


# ---- a declared directory: verify-checkout and facts extract agree (issue 31, defect 10) -------------


def test_a_declared_directory_covers_the_files_it_holds(upstream: Upstream, tmp_path: Path) -> None:
    """`facts extract` accepts a sparse checkout that leaves out a declared directory's files (a prefix
    match); `verify-checkout` accepts the same tree, and still judges a stand-in put there."""
    dest = tmp_path / "src"
    declared = {**DECLARED, "lib/partial/media": "its blobs are missing from the mirror (test)"}
    checkout_source(_source(upstream, declared), dest)
    assert not (dest / "lib/partial" / IMAGE).exists()
    result = verify_checkout(dest, _source(upstream, declared))
    assert result.ok, result.problems
    assert (
        "lib/partial/media: 1 file(s) left out (declared unobtainable: its blobs are missing from the mirror (test))"
        in result.exceptions
    )
    (dest / "lib/partial" / IMAGE).parent.mkdir(parents=True, exist_ok=True)
    (dest / "lib/partial" / IMAGE).write_bytes(b"a stand-in")
    assert not verify_checkout(dest, _source(upstream, declared)).ok


def test_facts_extract_and_verify_checkout_agree_on_a_declared_directory(tmp_path: Path) -> None:
    from megacpp_env.facts.extract import ExtractRequest, _declared

    inner = tmp_path / "inner"
    make_repo(inner, {"docs/a.png": b"\x89PNG a", "docs/b.png": b"\x89PNG b", "src/x.c": "int x;\n"})
    sha = git.head_commit(inner)
    source = Source(name="demo", repo=inner.as_uri(), commit=sha, unobtainable={"docs": "too big (test)"})
    dest = tmp_path / "src"
    checkout_source(source, dest)
    for name in ("a.png", "b.png"):
        (dest / "docs" / name).unlink()
    verified = verify_checkout(dest, source)
    req = ExtractRequest(source="demo", origin=dest, commit=sha, unobtainable=("docs",))
    assert _declared(req, ("docs/a.png", "docs/b.png")) == ("docs/a.png", "docs/b.png")  # facts: accepted
    assert verified.ok, verified.problems  # verify-checkout: accepted too
    undeclared = Source(name="demo", repo=inner.as_uri(), commit=sha, unobtainable={"doc": "a prefix of a name"})
    assert not verify_checkout(dest, undeclared).ok  # "doc" does not cover "docs/"
