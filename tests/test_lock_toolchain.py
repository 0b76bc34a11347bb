"""CUDA from PyPI: the toolchain lock (``locks/pylock.<target>-cuda-<os>-<arch>.toml``) that `lock` writes
and checks next to the target's own lock. End to end with real uv against local indexes
(tests/fixtures/index.py), plus the committed lock of the real ``cuda_smoke`` target."""

from __future__ import annotations

import pytest
from packaging.pylock import is_valid_pylock_path

from megacpp_env import layout
from megacpp_env.cli import main
from megacpp_env.errors import SpecError
from megacpp_env.lock.pylock import read_pylock
from megacpp_env.lock.reqtxt import read_requirements
from megacpp_env.spec import load_spec
from tests.fixtures.docker import REPO_ROOT
from tests.fixtures.index import X86, make_wheel, pypi_wheels

SPEC = """\
schema_version: 1
project: cudalock
indexes:
  nightly:
    url: {nightly}
    explicit: true
    packages: [torch]
toolchains:
  tc:
    gcc: "15"
    python: "3.13"
    uv: "0.13.9"
    cuda:
      version: "13.2"
      pypi: [{pypi}]
sources: {{}}
targets:
  cs:
    description: CUDA from PyPI
    platforms: [linux/amd64]
    base_image: debian:forky
    toolchain: tc
    indexes: []
    requirements: [torch==2.13.0]
"""


@pytest.fixture(scope="module")
def cuda_index(local_indexes):
    """A default index with the CUDA toolkit wheels (13.2 and the 13.0 that torch pins) and a PyPI-like torch."""
    built = local_indexes.root / "built" / "cuda"
    wheels = [
        *pypi_wheels(built),
        make_wheel(built, "cuda-toolkit", "13.2.0", requires=("nvidia-cuda-nvcc==13.2.51",)),
        make_wheel(built, "cuda-toolkit", "13.2.1", requires=("nvidia-cuda-nvcc==13.2.78",)),
        make_wheel(built, "cuda-toolkit", "13.0.3", requires=("nvidia-cuda-nvcc==13.0.88",)),
        make_wheel(built, "nvidia-cuda-nvcc", "13.2.78", tag=X86),
        make_wheel(built, "nvidia-cuda-nvcc", "13.2.51", tag=X86),
        make_wheel(built, "nvidia-cuda-nvcc", "13.0.88", tag=X86),
        make_wheel(built, "torch", "2.13.0", tag=X86, requires=("cuda-toolkit==13.0.3", "numpy")),
    ]
    return local_indexes.serve("cuda-pypi", wheels), built


def _resolve_against(server, monkeypatch, tmp_path):
    """uv's default index is ``server``, its cache empty, and no other index is named in the environment."""
    monkeypatch.setenv("UV_DEFAULT_INDEX", server.url)
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    for var in ("UV_INDEX", "UV_EXTRA_INDEX_URL", "UV_INDEX_URL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def spec(cuda_index, local_indexes, monkeypatch, tmp_path):
    server, _ = cuda_index
    _resolve_against(server, monkeypatch, tmp_path)
    path = tmp_path / "repo" / "stack.yaml"
    path.parent.mkdir()
    path.write_text(SPEC.format(nightly=local_indexes.nightly.url, pypi='"cuda-toolkit==13.2.0"'))
    return path


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out + err


def test_lock_writes_the_toolchain_lock_beside_the_venv_lock(spec, cuda_index, capsys):
    rc, out = run(capsys, "lock", "resolve", "cs", "--spec", str(spec))
    assert rc == 0, out
    root, (server, built) = spec.parent, cuda_index
    cuda = read_pylock(layout.toolchain_lock_path(root, "cs", "cuda", "linux/amd64")).by_name()
    venv = read_pylock(layout.lock_path(root, "cs", "linux/amd64")).by_name()
    # the toolchain's CUDA and torch's own CUDA live in two locks, at their own versions
    assert (cuda["cuda-toolkit"].version, cuda["nvidia-cuda-nvcc"].version) == ("13.2.0", "13.2.51")
    assert (venv["cuda-toolkit"].version, venv["nvidia-cuda-nvcc"].version) == ("13.0.3", "13.0.88")
    assert "torch" not in cuda and venv["torch"].index == server.url.rstrip("/")  # not the nightly: indexes: []
    import hashlib

    wheel = built / "nvidia_cuda_nvcc-13.2.51-py3-none-manylinux_2_28_x86_64.whl"
    assert cuda["nvidia-cuda-nvcc"].artifacts[0].sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()
    export = layout.toolchain_export_path(root, "cs", "cuda", "linux/amd64")
    assert read_requirements(export).by_name()["nvidia-cuda-nvcc"].hashes == cuda["nvidia-cuda-nvcc"].hashes
    assert "--target PREFIX" in export.read_text() and "cuda toolchain" in export.read_text()
    assert "locks/pylock.cs-cuda-linux-amd64.toml" in out


def test_check_covers_the_toolchain_lock(spec, capsys):
    assert run(capsys, "lock", "resolve", "cs", "--spec", str(spec))[0] == 0
    rc, out = run(capsys, "lock", "check", "cs", "--spec", str(spec))
    assert rc == 0 and out.splitlines() == [
        "ok: cs linux/amd64: locks/pylock.cs-linux-amd64.toml",
        "ok: cs linux/amd64: locks/pylock.cs-cuda-linux-amd64.toml",
    ], out
    spec.write_text(spec.read_text().replace('"cuda-toolkit==13.2.0"', '"cuda-toolkit>=13.2,<13.3"'))
    rc, out = run(capsys, "lock", "check", "cs", "--spec", str(spec))
    assert rc == 1
    assert out.splitlines()[0].startswith("ok: cs linux/amd64: locks/pylock.cs-linux-amd64.toml")
    assert out.splitlines()[1] == (
        "stale: cs linux/amd64: locks/pylock.cs-cuda-linux-amd64.toml: requirements added: cuda-toolkit<13.3,>=13.2; "
        "requirements removed: cuda-toolkit==13.2.0 (run: megacpp-env lock resolve cs --platform linux/amd64)"
    )


def test_an_nvcc_of_another_release_is_refused(spec, capsys):
    spec.write_text(spec.read_text().replace('"cuda-toolkit==13.2.0"', '"cuda-toolkit==13.0.3"'))
    rc, out = run(capsys, "lock", "resolve", "cs", "--spec", str(spec))
    assert rc == 1
    assert (
        "error: cs linux/amd64 (cuda toolchain): nvidia-cuda-nvcc 13.0.88 is not CUDA 13.2: pin toolchain.cuda.pypi "
        "to the 13.2 release" in out
    )
    assert not (spec.parent / "locks").exists()  # nothing written


def test_mirror_carries_the_toolchain_wheels_too(spec, tmp_path, capsys):
    """`build --mirror DIR` installs the cuda stage from the same mirror as the venv: both locks are in it."""
    assert run(capsys, "lock", "resolve", "cs", "--spec", str(spec))[0] == 0
    rc, out = run(capsys, "mirror", "cs", "--to", str(tmp_path / "m"), "--spec", str(spec))
    assert rc == 0, out
    files = sorted(p.name for p in (tmp_path / "m" / "files").iterdir())
    assert "nvidia_cuda_nvcc-13.2.51-py3-none-manylinux_2_28_x86_64.whl" in files  # the toolchain lock's
    assert "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux_2_28_x86_64.whl" in files  # torch's, in the venv lock
    assert out.count("mirrored cs linux/amd64:") == 2


def test_gate_judges_the_toolchain_lock_like_any_lock(spec, capsys):
    import subprocess

    root = spec.parent
    assert run(capsys, "lock", "resolve", "cs", "--spec", str(spec))[0] == 0
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "locks"]):
        subprocess.run(["git", *ident, *args], cwd=root, check=True, capture_output=True)
    spec.write_text(spec.read_text().replace('"cuda-toolkit==13.2.0"', '"cuda-toolkit==13.2.1"'))
    assert run(capsys, "lock", "resolve", "cs", "--spec", str(spec))[0] == 0
    rc, out = run(capsys, "gate", "--base", "main", "--spec", str(spec))
    assert rc == 1, out
    assert "cs linux/amd64 (cuda toolchain): nvidia-cuda-nvcc upgraded (toolchain package): 13.2.51 -> 13.2.78" in out
    assert "cs linux/amd64:" not in out.replace("cs linux/amd64 (cuda toolchain)", "")  # the venv lock is as it was


def test_toolchain_lock_names_are_pep751_and_never_a_target_lock():
    path = layout.toolchain_lock_path(REPO_ROOT, "cuda_smoke", "cuda", "linux/amd64")
    assert path.name == "pylock.cuda_smoke-cuda-linux-amd64.toml" and is_valid_pylock_path(path)
    assert layout.parse_lock_name(path.name) is None
    assert layout.parse_toolchain_lock_name(path.name) == ("cuda_smoke", "cuda", "linux/amd64")
    assert layout.parse_toolchain_lock_name(layout.lock_name("cuda_smoke", "linux/amd64")) is None


def test_the_committed_cuda_smoke_lock_holds_nvcc_13_2_with_its_sha256():
    spec = load_spec(REPO_ROOT / "stack.yaml")
    assert spec.target("cuda_smoke").toolchain.cuda == "13.2"
    lock = read_pylock(layout.toolchain_lock_path(REPO_ROOT, "cuda_smoke", "cuda", "linux/amd64"))
    nvcc = lock.by_name()["nvidia-cuda-nvcc"]
    assert nvcc.version.startswith("13.2.")
    (wheel,) = nvcc.artifacts
    assert wheel.filename.startswith(f"nvidia_cuda_nvcc-{nvcc.version}-") and wheel.filename.endswith("_x86_64.whl")
    assert len(wheel.sha256) == 64 and int(wheel.sha256, 16)
    assert lock.meta is not None and (lock.meta.target, lock.meta.part) == ("cuda_smoke", "cuda")
    venv = read_pylock(layout.lock_path(REPO_ROOT, "cuda_smoke", "linux/amd64")).by_name()
    assert venv["torch"].version == "2.13.0" and venv["cuda-toolkit"].version.startswith("13.0.")


@pytest.mark.parametrize(
    ("cuda", "message"),
    [
        ('{version: "13.2"}', "missing required key 'pypi'"),
        ('{version: "12.9", pypi: ["cuda-toolkit==12.9.1"]}', "only the CUDA 13 wheel layout"),
        ('{version: "13.2", pypi: []}', "empty list"),
        ('{version: "13.2", pypi: ["x"], home: /opt}', "unknown key"),
    ],
)
def test_cuda_from_pypi_spec_errors(tmp_path, cuda, message):
    path = tmp_path / "stack.yaml"
    path.write_text(SPEC.format(nightly="https://example.invalid/simple", pypi='"x"').replace(
        'cuda:\n      version: "13.2"\n      pypi: ["x"]', f"cuda: {cuda}"))  # fmt: skip
    with pytest.raises(SpecError, match=message) as err:
        load_spec(path)
    assert "toolchains.tc.cuda" in str(err.value)


def test_align_re_resolves_the_venv_lock_not_the_toolchain_lock(local_indexes, monkeypatch, tmp_path, capsys):
    """A target with CUDA from PyPI has two locks per platform under one (target, platform) key: the venv
    lock and the toolchain lock. ``--align`` re-resolves the diverging venv lock (simdlib 1.1.0 has no
    x86_64 wheel) from the venv's inputs; the toolchain lock is not touched by the alignment."""
    from tests.fixtures.index import ARM

    built = tmp_path / "built"
    wheels = [
        *pypi_wheels(built),
        make_wheel(built, "cuda-toolkit", "13.2.0", requires=("nvidia-cuda-nvcc==13.2.51",)),
        make_wheel(built, "nvidia-cuda-nvcc", "13.2.51", tag=X86),
        make_wheel(built, "nvidia-cuda-nvcc", "13.2.51", tag=ARM),
    ]
    _resolve_against(local_indexes.serve("cuda-align", wheels), monkeypatch, tmp_path)
    spec = tmp_path / "repo" / "stack.yaml"
    spec.parent.mkdir()
    text = SPEC.format(nightly=local_indexes.nightly.url, pypi='"cuda-toolkit==13.2.0"')
    spec.write_text(
        text.replace("platforms: [linux/amd64]", "platforms: [linux/amd64, linux/arm64]").replace(
            "requirements: [torch==2.13.0]", "requirements: [attrs, simdlib]"
        )
    )
    rc, out = run(capsys, "lock", "resolve", "cs", "--align", "--spec", str(spec))
    assert rc == 0, out
    assert "aligned cs linux/arm64 to cs linux/amd64" in out, out
    root = spec.parent
    for platform in ("linux/amd64", "linux/arm64"):
        venv = read_pylock(layout.lock_path(root, "cs", platform)).by_name()
        cuda = read_pylock(layout.toolchain_lock_path(root, "cs", "cuda", platform)).by_name()
        assert venv["simdlib"].version == "1.0.0" and "cuda-toolkit" not in venv, (platform, sorted(venv))
        assert cuda["cuda-toolkit"].version == "13.2.0" and "simdlib" not in cuda, (platform, sorted(cuda))
    assert run(capsys, "lock", "check", "cs", "--spec", str(spec))[0] == 0
