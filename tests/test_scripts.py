"""Host infrastructure scripts: scripts/docker-up.sh, binfmt-up.sh, make-base-image.sh, lib.sh
(registry-up.sh runs in tests/test_registry.py)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.fixtures.docker import skip_or_fail

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "scripts"
SHELL_FILES = sorted(SCRIPTS.glob("*.sh"))
DOCKER = "/usr/bin/docker"
BASE = "megacpp-base/debian-forky"


def _sh(cmd: str, env: dict[str, str] | None = None, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    """Run a bash snippet in the repository root with lib.sh available."""
    return subprocess.run(
        ["bash", "-c", cmd], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _docker_up() -> bool:
    return Path(DOCKER).exists() and _sh(f"{DOCKER} info").returncode == 0


def _image(tag: str) -> str:
    """The tag, when the base image exists; else skip locally, fail under CI (``skip_or_fail``)."""
    if not _docker_up():
        skip_or_fail("dockerd not answering: run scripts/docker-up.sh")
    if _sh(f"{DOCKER} image inspect {tag}").returncode != 0:
        skip_or_fail(f"{tag} missing: run scripts/make-base-image.sh {tag.rsplit(':', 1)[1]}")
    return tag


def test_scripts_exist_and_are_executable() -> None:
    assert all(p.is_file() for p in SHELL_FILES)
    for name in ("docker-up.sh", "binfmt-up.sh", "make-base-image.sh", "registry-up.sh"):
        assert (SCRIPTS / name).stat().st_mode & 0o111, name


@pytest.mark.parametrize("path", SHELL_FILES, ids=lambda p: p.name)
def test_bash_syntax(path: Path) -> None:
    result = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (apt-get install shellcheck)")
def test_shellcheck_clean() -> None:
    result = subprocess.run(
        ["shellcheck", "-x", *[str(p.relative_to(REPO)) for p in SHELL_FILES]],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout


def _apt_etc(tmp_path: Path, sources: str, lists: str) -> Path:
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list.d" / "a.sources").write_text(sources)
    (etc / "sources.list").write_text(lists)
    return etc


def test_debian_mirror_from_deb822(tmp_path: Path) -> None:
    etc = _apt_etc(
        tmp_path,
        "Types: deb\nURIs: http://example.invalid/other\nSuites: x\n\n"
        "Types: deb\n# URIs: http://commented.invalid/debian\nURIs: https://mirror.invalid/debian/\nSuites: forky\n",
        "deb http://later.invalid/debian bookworm main\n",
    )
    result = _sh(f"MEGACPP_APT_ETC={etc} DEBIAN_MIRROR= bash -c '. scripts/lib.sh; debian_mirror'")
    assert result.stdout.strip() == "https://mirror.invalid/debian", result.stderr


def test_debian_mirror_from_one_line_list_and_override(tmp_path: Path) -> None:
    etc = _apt_etc(
        tmp_path,
        "Types: deb\nURIs: http://example.invalid/debian-security\n",
        "# deb http://commented.invalid/debian x main\n"
        "deb [signed-by=/k.gpg] http://one.invalid/debian bookworm main\n",
    )
    found = _sh(f"MEGACPP_APT_ETC={etc} DEBIAN_MIRROR= bash -c '. scripts/lib.sh; debian_mirror'")
    assert found.stdout.strip() == "http://one.invalid/debian", found.stderr
    forced = _sh(f"MEGACPP_APT_ETC={etc} DEBIAN_MIRROR=http://x.invalid/d/ bash -c '. scripts/lib.sh; debian_mirror'")
    assert forced.stdout.strip() == "http://x.invalid/d"


def test_debian_mirror_missing_fails(tmp_path: Path) -> None:
    etc = _apt_etc(tmp_path, "Types: deb\nURIs: http://example.invalid/ubuntu\n", "")
    result = _sh(f"MEGACPP_APT_ETC={etc} DEBIAN_MIRROR= bash -c '. scripts/lib.sh; debian_mirror'")
    assert result.returncode == 1 and result.stdout == ""


def test_make_base_image_rejects_bad_argument() -> None:
    result = _sh("scripts/make-base-image.sh riscv64")
    assert result.returncode == 2
    assert "usage:" in result.stderr


@pytest.mark.docker
def test_docker_up_is_idempotent() -> None:
    if not _docker_up():
        skip_or_fail("dockerd not answering: run scripts/docker-up.sh first")
    result = _sh("CI=true scripts/docker-up.sh </dev/null")
    assert result.returncode == 0, result.stderr
    assert "already answering" in result.stderr
    assert "server 20.10" in result.stderr
    assert result.stdout == ""  # no result: the version line is a log (stderr)


@pytest.mark.docker
def test_base_image_amd64_platform_and_apt_config() -> None:
    tag = _image(f"{BASE}:amd64")
    got = _sh(f"{DOCKER} image inspect -f '{{{{.Os}}}}/{{{{.Architecture}}}}' {tag}")
    assert got.stdout.strip() == "linux/amd64"
    result = _sh(
        f"{DOCKER} run --rm {tag} sh -c '. /etc/os-release; echo $VERSION_CODENAME; "
        "apt-config dump Acquire::Check-Valid-Until; ls /var/lib/apt/lists'"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "forky"
    assert 'Acquire::Check-Valid-Until "false";' in result.stdout
    assert "Packages" not in result.stdout  # apt lists were cleaned before import


@pytest.mark.docker
def test_make_base_image_uses_cache() -> None:
    _image(f"{BASE}:amd64")
    start = time.monotonic()
    result = _sh("CI=true scripts/make-base-image.sh amd64 </dev/null")
    assert result.returncode == 0, result.stderr
    assert "is up to date" in result.stderr
    assert result.stdout == f"{BASE}:amd64\n"  # stdout: the image tag, nothing else
    assert time.monotonic() - start < 30


@pytest.mark.docker
@pytest.mark.network
def test_base_image_apt_resolves_toolchain() -> None:
    tag = _image(f"{BASE}:amd64")
    result = _sh(
        f"{DOCKER} run --rm --network host {tag} sh -c 'apt-get -q update >/dev/null && "
        "apt-cache policy gcc-15 python3.13'",
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    candidates = [line for line in result.stdout.splitlines() if "Candidate:" in line]
    assert len(candidates) == 2 and all("(none)" not in c for c in candidates), result.stdout


@pytest.mark.docker
@pytest.mark.arm64
def test_base_image_arm64_runs_under_qemu() -> None:
    tag = _image(f"{BASE}:arm64")
    got = _sh(f"{DOCKER} image inspect -f '{{{{.Os}}}}/{{{{.Architecture}}}}' {tag}")
    assert got.stdout.strip() == "linux/arm64"
    # The interpreter is not in the image: the binfmt F flag makes the kernel use the host's.
    result = _sh(
        f"{DOCKER} run --rm --platform linux/arm64 {tag} sh -c 'test ! -e /usr/libexec/qemu-binfmt && uname -m'"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "aarch64"


def _free_port() -> int:
    from megacpp_env.pipmirror import free_port

    return free_port()


@pytest.mark.parametrize(
    ("script", "env_of", "result"),
    [
        ("registry-up.sh", lambda port, d: {"MEGACPP_REGISTRY_PORT": str(port), "MEGACPP_REGISTRY_DIR": str(d)},
         lambda port: f"127.0.0.1:{port}\n"),
        ("smoke-source.sh", lambda port, d: {"MEGACPP_GIT_PORT": str(port), "MEGACPP_GIT_ROOT": str(d)},
         lambda port: None),
    ],
    ids=["registry-up", "smoke-source"],
)  # fmt: skip
def test_a_script_that_leaves_a_daemon_returns_its_result_to_a_capturing_caller(tmp_path, script, env_of, result):
    """Read as `$(bash scripts/X.sh)` reads it (a pipe until EOF): the daemon the script starts must not
    hold that pipe open (it once inherited the result descriptor, and test.sh would have waited forever)."""
    import os
    import re

    if script == "registry-up.sh" and not Path("/usr/bin/docker-registry").exists():
        pytest.skip("docker-registry not installed (its install branch: tests/test_scripts_install.py)")
    port = _free_port()
    env = {**os.environ, **env_of(port, tmp_path / "state")}
    args = ["--serve"] if script == "smoke-source.sh" else []
    try:
        proc = subprocess.run(["bash", str(SCRIPTS / script), *args], env=env, capture_output=True, text=True,
                              timeout=90, check=False)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        want = result(port)
        if want is None:
            assert re.fullmatch(r"[0-9a-f]{40}\n", proc.stdout), proc.stdout
        else:
            assert proc.stdout == want
    finally:
        subprocess.run(["bash", str(SCRIPTS / script), "--stop"], env=env, capture_output=True, timeout=30, check=False)
