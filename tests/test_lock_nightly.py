"""Deliver 8: ``lock gb10`` / ``lock cloud`` end to end on a TEST COPY of the repository's spec, with the
nightly index pointed at a local index laid out like the PyTorch nightly (tests/fixtures/nightly.py:
real wheels with local versions, pytorch-triton, torchvision) and everything else from PyPI (network).
It proves the command the team will run where the nightly is reachable; the shipped repository keeps
gb10/cloud reported as unlocked (the last test)."""

from __future__ import annotations

import shutil

import pytest

from megacpp_env import layout
from megacpp_env.cli import main
from megacpp_env.lock.pylock import read_pylock
from tests.fixtures.nightly import DAY, TRITON
from tests.fixtures.spec import REPO_ROOT

NIGHTLY_URL = "https://download.pytorch.org/whl/nightly/cu132"
BUILT_HERE = {"causal-conv1d", "mamba-ssm", "flashinfer-python", "flashinfer-jit-cache", "vllm", "megatron-core"}


@pytest.fixture
def test_copy(tmp_path, nightly_index, monkeypatch):
    for var in ("UV_DEFAULT_INDEX", "UV_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL"):
        monkeypatch.delenv(var, raising=False)
    repo = tmp_path / "repo"
    for name in ("facts", "overlays"):
        shutil.copytree(REPO_ROOT / name, repo / name)
    text = (REPO_ROOT / "stack.yaml").read_text()
    assert text.count(NIGHTLY_URL) == 1 and text.count("reachable_here: false     # this machine") == 1
    text = text.replace(NIGHTLY_URL, nightly_index.url).replace("reachable_here: false     #", "reachable_here: true      #")
    (repo / "stack.yaml").write_text(text)
    return repo


@pytest.mark.network
def test_lock_gb10_and_cloud_against_a_nightly_layout_index(test_copy, nightly_index, capsys):
    spec = str(test_copy / "stack.yaml")
    rc = main(["lock", "resolve", "gb10", "cloud", "--spec", spec])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "aligned gb10+cloud: consistent" in out
    for target, platform, arch in (("gb10", "linux/arm64", "aarch64"), ("cloud", "linux/amd64", "x86_64")):
        lock = read_pylock(layout.lock_path(test_copy, target, platform))
        pkgs = lock.by_name()
        torch, triton = pkgs["torch"], pkgs["pytorch-triton"]
        assert torch.version == f"2.13.0.dev{DAY}+cu132"  # the newest nightly day, with its local label
        assert triton.version == TRITON
        for p in (torch, triton):  # from the explicit index, the platform's own wheel, nothing else
            assert p.index == nightly_index.url
            assert [a.url.startswith(nightly_index.url + "/") and arch in a.filename for a in p.artifacts] == [True]
        assert "triton" not in pkgs  # overridden away: pytorch-triton provides it
        assert not BUILT_HERE & set(pkgs)  # source-built, never from an index
        assert "torchaudio" not in pkgs and "pynvvideocodec" not in pkgs
        assert (pkgs["tilelang"].version, pkgs["apache-tvm-ffi"].version) == ("0.1.8", "0.1.9")  # candidate A
        assert all(p.index == "https://pypi.org/simple" for n, p in pkgs.items() if n not in ("torch", "pytorch-triton"))
        assert lock.meta is not None and "overrides.txt" in lock.meta.uv_command
    assert main(["lock", "check", "gb10", "cloud", "--spec", spec]) == 0, capsys.readouterr().out


def test_the_shipped_repository_reports_gb10_and_cloud_unlocked(capsys):
    name = layout.lock_path(REPO_ROOT, "gb10", "linux/arm64").name
    assert not (REPO_ROOT / "locks" / name).exists()
    assert main(["lock", "check", "gb10", "cloud", "--spec", str(REPO_ROOT / "stack.yaml")]) == 1
    out = capsys.readouterr().out
    assert out.startswith(
        f"unlocked: gb10 linux/arm64: index pytorch-nightly-cu132 ({NIGHTLY_URL}) unreachable here; lock it where it "
        f"is reachable and commit locks/{name}\n"
    )
    assert main(["lock", "check", "--allow-unlocked", "--spec", str(REPO_ROOT / "stack.yaml")]) == 0
