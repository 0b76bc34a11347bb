"""Issue 19, round 3: the source mirror and checkouts under hostile input. Real repositories: an
upstream whose ``.gitmodules`` names a command, a mirror with a flipped pack byte, a replaced blob
or a deleted pin ref, a mirror that lacks a blob, killed runs' leftovers, corrupt indexes."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.checkout import checkout_source
from megacpp_env.commands import checkout as checkout_cmd
from megacpp_env.errors import RefusedError
from megacpp_env.spec.model import Source
from megacpp_env.srcbuild.mirror import MirrorRequest, Pin, insteadof_config, mirror_sources
from tests.fixtures.git_repos import FILE_OK, IDENTITY, make_repo, write_files

# Every URL a hostile .gitmodules (or spec) may hold to run a command or reach past the mirror.
HOSTILE_URLS = [
    "--upload-pack=touch PWNED",  # the reproduction (CVE-2018-17456)
    "--upload-pack=touch${IFS}PWNED",
    "-oProxyCommand=touch PWNED:x",
    "ext::sh -c touch% PWNED",
    "ext::touch PWNED",
    "fd::3",
    "fd::0,1/x",
    "ssh://-oProxyCommand=touch PWNED/x",
    "git+ssh://-oProxyCommand=touch PWNED/x",
    "ssh://user@-oProxyCommand=touch PWNED/x",
    "u@-oProxyCommand=touch PWNED:x",
    "testhelper::x",
    "foo://host/x",
    "https://host/x\n[core]\n\tsshCommand = touch PWNED",
]


def hostile_upstream(tmp_path: Path, url: str) -> tuple[str, str]:
    """A repository whose .gitmodules gives submodule ``lib`` the URL ``url`` (file:// URL, commit)."""
    sub = tmp_path / "sub"
    sub_commit = make_repo(sub, {"x.txt": "x\n"})
    main = tmp_path / "up"
    make_repo(main, {"a.txt": "a\n"})
    gitmodules = f'[submodule "lib"]\n\tpath = lib\n\turl = {json.dumps(url)[1:-1]}\n'
    write_files(main, {".gitmodules": gitmodules})
    git.run_git(["update-index", "--add", "--cacheinfo", f"160000,{sub_commit},lib"], main, config=FILE_OK)
    git.run_git(["add", ".gitmodules"], main, config=FILE_OK)
    git.run_git(["commit", "--quiet", "-m", "hostile submodule"], main, env=IDENTITY, config=FILE_OK)
    commit = git.head_commit(main)
    assert commit and git.gitlinks(main) == {"lib": sub_commit}
    return main.as_uri(), commit


def planted(tmp_path: Path) -> list[Path]:
    return list(tmp_path.rglob("PWNED*"))


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_mirror_sources_refuses_a_hostile_submodule_url(tmp_path: Path, url: str, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    repo, commit = hostile_upstream(tmp_path, url)
    req = MirrorRequest(source="demo", pins=(Pin(url=repo, commit=commit, submodules=True),))
    with pytest.raises(RefusedError, match=r"\.gitmodules: submodule lib: url .* refusing to pass it to git"):
        mirror_sources(tmp_path / "mirror", [req])
    assert planted(tmp_path) == []
    assert not (tmp_path / "mirror" / "sources" / "demo").exists()


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_checkout_refuses_a_hostile_submodule_url(tmp_path: Path, url: str, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    repo, commit = hostile_upstream(tmp_path, url)
    src = Source(name="demo", repo=repo, commit=commit, submodules=True)
    with pytest.raises(RefusedError, match=r"\.gitmodules: submodule lib: url"):
        checkout_source(src, tmp_path / "co")
    assert planted(tmp_path) == []
    assert not (tmp_path / "co").exists()


@pytest.mark.parametrize("url", HOSTILE_URLS)
def test_a_hostile_pinned_url_never_reaches_git(tmp_path: Path, url: str, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    src = Source(name="demo", repo=url, commit="1" * 40)
    with pytest.raises(RefusedError, match="refusing to pass it to git"):
        checkout_source(src, tmp_path / "co")
    req = MirrorRequest(source="demo", pins=(Pin(url=url, commit="1" * 40),))
    with pytest.raises(RefusedError, match="refusing to pass it to git"):
        mirror_sources(tmp_path / "mirror", [req])
    assert planted(tmp_path) == []


def test_a_remote_superproject_may_not_name_a_local_submodule(tmp_path: Path) -> None:
    """A local path in the .gitmodules of a network upstream would copy a repository of this machine."""
    from megacpp_env.srcbuild.mirror import _submodule_pins

    repo, commit = hostile_upstream(tmp_path, str(tmp_path / "sub"))
    bare = tmp_path / "bare.git"
    git.run_git(["clone", "--quiet", "--bare", "--", repo, str(bare)], config=FILE_OK)
    with pytest.raises(RefusedError, match="is a local path, which only a local superproject may name"):
        _submodule_pins(bare, Pin(url="https://example.invalid/up.git", commit=commit, submodules=True))
    (pin,) = _submodule_pins(bare, Pin(url=repo, commit=commit, submodules=True))  # a local one may
    assert pin.url == str(tmp_path / "sub")


def test_every_git_call_runs_with_ext_and_fd_off(tmp_path: Path, monkeypatch) -> None:
    """The user's own config turning ``ext`` on is overridden: no transport helper ever runs a program."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text('[protocol]\n\tallow = always\n[protocol "ext"]\n\tallow = always\n')
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    work = tmp_path / "w"
    git.init(work)
    proc = git.run_git(["fetch", "ext::sh -c touch% PWNED", "main"], work, check=False, trusted=True)
    assert proc.returncode != 0 and b"transport 'ext' not allowed" in proc.stderr
    assert planted(tmp_path) == []


# ---- item 9: `checkout --mirror` never falls back to the network ------------------------------------


def test_checkout_with_a_mirror_that_lacks_the_pin_is_refused(upstream, tmp_path: Path, caplog) -> None:
    import logging

    caplog.set_level(logging.DEBUG, logger="megacpp_env.git")
    other = Source(name="demo", repo=upstream.sub_path.as_uri(), commit=upstream.sub_commit)
    root = tmp_path / "mirror"
    mirror_sources(root, [MirrorRequest(source="demo", pins=(Pin(url=other.repo, commit=other.commit),))])
    from megacpp_env.srcbuild.mirror import require_pins

    with pytest.raises(RefusedError, match=rf"source mirror {root} lacks {upstream.url} @ {upstream.commit}"):
        require_pins(root, "demo", [(upstream.url, upstream.commit)], remedy="megacpp-env mirror-sources T")
    # Even past that check, the mirror's config turns every network transport off.
    cfg = insteadof_config(root, "demo")
    assert cfg["protocol.https.allow"] == "never" and cfg["protocol.ssh.allow"] == "never"
    net = Source(name="demo", repo="https://127.0.0.1:9/none.git", commit=upstream.commit)
    with pytest.raises(Exception, match=r"not allowed|not reachable"):
        checkout_source(net, tmp_path / "co", git_config=cfg)
    assert not (tmp_path / "co").exists()


def test_cli_checkout_mirror_refuses_before_any_fetch(smoke_source, tmp_path: Path, caplog) -> None:
    import logging

    from tests.fixtures.srcbuild import REPO_ROOT

    caplog.set_level(logging.DEBUG, logger="megacpp_env.git")
    spec = tmp_path / "proj" / "stack.yaml"
    spec.parent.mkdir()
    spec.write_text((REPO_ROOT / "stack.yaml").read_text())
    shutil.copytree(REPO_ROOT / "overlays", spec.parent / "overlays")
    root = tmp_path / "mirror"
    lib = tmp_path / "lib"
    lib_commit = make_repo(lib, {"x": "x\n"})
    pins = (Pin(url=lib.as_uri(), commit=lib_commit),)
    mirror_sources(root, [MirrorRequest(source="megacpp_smoke_ext", pins=pins)])
    caplog.clear()
    co = argparse.Namespace(spec=str(spec), name="megacpp-smoke-ext", dest=tmp_path / "co", mirror=root, json=False)
    with pytest.raises(RefusedError, match=f"source mirror {root} lacks .* mirror-sources TARGET --to {root}"):
        checkout_cmd.run(co)
    assert not any("fetch" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / "co").exists()
    assert set(os.listdir(tmp_path / "proj")) == {"stack.yaml", "overlays"}
