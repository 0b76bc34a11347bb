"""The install branch of every script, run for real in a throwaway container from the forky base image
(scripts/make-base-image.sh) where the package is absent, and the script's stdout asserted exactly.

A warm machine hides an install step: `apt_install` checks dpkg first, so on a host that has the package
the branch never runs. A fresh machine once read apt-get's "Get:1 ..." as the registry address.

Each test starts its own container (`--network host`: apt reaches the archive, a server the script
starts listens on the host's loopback; the host's CA bundle is mounted read-only for TLS, never baked
in). The session shares one apt list directory and one .deb cache between the containers, so the archive
is downloaded once per session and each script's own `apt-get update` only revalidates it.
Cost (2 cores, warm apt cache): docs/BENCHMARKS.md, "fresh machine (issue 18)".
"""

from __future__ import annotations

import re
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from megacpp_env.pipmirror import free_port
from tests.fixtures.docker import skip_or_fail

pytestmark = [pytest.mark.docker, pytest.mark.network]

REPO = Path(__file__).resolve().parent.parent
DOCKER = "/usr/bin/docker"
BASE = "megacpp-base/debian-forky:amd64"
CA = "/etc/ssl/certs/ca-certificates.crt"
SOCKET = "/var/run/docker.sock"
# Mounted beside, not over, the container's own bundle: installing ca-certificates rewrites that one.
HOST_CA = "/run/megacpp-host-ca.crt"


def _docker(*args: str, timeout: int = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout, check=False)


@dataclass(frozen=True)
class Fresh:
    """A running container from the forky base: the repository's scripts at /src/scripts (read-only)."""

    name: str

    def sh(
        self, script: str, env: dict[str, str] | None = None, timeout: int = 600
    ) -> subprocess.CompletedProcess[str]:
        flags = [f"--env={k}={v}" for k, v in (env or {}).items()]
        return _docker("exec", *flags, self.name, "bash", "-c", script, timeout=timeout)

    def installed(self, package: str) -> bool:
        probe = self.sh(f"dpkg-query -W -f='${{Status}}' {package} 2>/dev/null")
        return probe.stdout.strip() == "install ok installed"


@pytest.fixture(scope="session")
def apt_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One apt list directory and one .deb cache for every container of the session."""
    if not Path(DOCKER).exists() or _docker("info").returncode != 0:
        skip_or_fail("no Docker daemon (run scripts/docker-up.sh)")
    if _docker("image", "inspect", BASE).returncode != 0:
        skip_or_fail(f"{BASE} missing (run scripts/make-base-image.sh amd64)")
    root = tmp_path_factory.mktemp("apt-cache")
    (root / "lists" / "partial").mkdir(parents=True)
    (root / "archives" / "partial").mkdir(parents=True)
    return root


def _start(apt_cache: Path, *extra: str) -> Fresh:
    name = f"megacpp-fresh-{uuid.uuid4().hex[:12]}"
    mounts = [
        f"--volume={REPO}:/src:ro",
        f"--volume={apt_cache / 'lists'}:/var/lib/apt/lists",
        f"--volume={apt_cache / 'archives'}:/var/cache/apt/archives",
        *extra,
    ]
    if Path(CA).is_file():
        mounts.append(f"--volume={CA}:{HOST_CA}:ro")
    started = _docker("run", "--detach", "--rm", f"--name={name}", "--network=host", *mounts, BASE,
                      "sleep", "infinity")  # fmt: skip
    assert started.returncode == 0, started.stderr
    return Fresh(name)


@pytest.fixture
def fresh(apt_cache: Path) -> Iterator[Fresh]:
    """A fresh forky container."""
    box = _start(apt_cache)
    try:
        yield box
    finally:
        _docker("rm", "--force", box.name)


@pytest.fixture
def fresh_with_dockerd(apt_cache: Path) -> Iterator[Fresh]:
    """A fresh forky container that reaches the host's dockerd through its socket (once docker.io is in)."""
    box = _start(apt_cache, f"--volume={SOCKET}:{SOCKET}")
    try:
        yield box
    finally:
        _docker("rm", "--force", box.name)


@pytest.fixture
def fresh_with_binfmt(apt_cache: Path) -> Iterator[Fresh]:
    """A fresh forky container that may mount binfmt_misc (CAP_SYS_ADMIN, unconfined) (the kernel's one table: the host's entries)."""
    box = _start(
        apt_cache, "--cap-add=SYS_ADMIN", "--security-opt=apparmor=unconfined", "--security-opt=seccomp=unconfined"
    )
    try:
        yield box
    finally:
        _docker("rm", "--force", box.name)


def _ran_install(proc: subprocess.CompletedProcess[str], *packages: str) -> None:
    assert f"installing: {' '.join(packages)}" in proc.stderr, proc.stderr[-2000:]
    assert re.search(r"^(Get|Hit|Ign):\d", proc.stderr, re.MULTILINE), "apt's own output belongs on stderr"


def test_registry_up_installs_docker_registry_and_prints_only_the_address(fresh: Fresh) -> None:
    assert not fresh.installed("docker-registry")
    env = {"MEGACPP_REGISTRY_PORT": str(free_port())}
    proc = fresh.sh("bash /src/scripts/registry-up.sh", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _ran_install(proc, "docker-registry")
    assert fresh.installed("docker-registry")
    assert proc.stdout == f"127.0.0.1:{env['MEGACPP_REGISTRY_PORT']}\n"
    again = fresh.sh("bash /src/scripts/registry-up.sh", env=env)  # the registry is up: no install, same line
    assert (again.returncode, again.stdout) == (0, proc.stdout), again.stderr
    assert "already answers" in again.stderr


def test_docker_up_and_make_base_image_install_and_print_only_their_result(fresh_with_dockerd: Fresh) -> None:
    """docker-up.sh installs docker.io (its CLI then answers through the host's socket: no daemon runs
    here). make-base-image.sh, asked for a mirror nobody serves (so the host's image does not match its
    recipe), installs debootstrap and then fails in debootstrap, whose log must not reach stdout; with
    the archive the host's image was made from, it finds that image up to date and prints its tag."""
    box = fresh_with_dockerd
    assert not box.installed("docker.io") and not box.installed("debootstrap")
    up = box.sh("bash /src/scripts/docker-up.sh")
    assert up.returncode == 0, up.stderr[-2000:]
    _ran_install(up, "docker.io")
    assert box.installed("docker.io")
    assert "dockerd already answering" in up.stderr
    assert up.stdout == ""
    nobody = box.sh("bash /src/scripts/make-base-image.sh amd64", env={"DEBIAN_MIRROR": "http://127.0.0.1:9/debian"})
    _ran_install(nobody, "debootstrap")
    assert box.installed("debootstrap")
    assert (nobody.returncode, nobody.stdout) == (1, ""), nobody.stderr[-2000:]
    assert "debootstrap forky/amd64 from http://127.0.0.1:9/debian" in nobody.stderr
    cached = box.sh("bash /src/scripts/make-base-image.sh amd64")
    assert (cached.returncode, cached.stdout) == (0, f"{BASE}\n"), cached.stderr[-2000:]
    assert "is up to date" in cached.stderr


def test_bootstrap_installs_python_and_apt_packages_and_prints_nothing(fresh: Fresh) -> None:
    """bootstrap.sh on a machine with no python3: apt installs it and the rest, then the tool's venv is
    made and filled from PyPI (pip trusts the host's CA bundle). Its stdout stays empty."""
    packages = ("git", "ca-certificates", "debootstrap", "nix-bin", "python3", "python3-venv")
    assert not any(fresh.installed(p) for p in packages)
    copy = fresh.sh("mkdir /work && tar -C /src --exclude=./.venv --exclude=./.megacpp --exclude=./.git "
                    "--exclude=__pycache__ -cf - . | tar -C /work -xf -")  # fmt: skip
    assert copy.returncode == 0, copy.stderr
    env = {"PIP_CERT": HOST_CA, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "MEGACPP_WHEELHOUSE": "/tmp/wheelhouse"}
    proc = fresh.sh("bash /work/scripts/bootstrap.sh", env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    _ran_install(proc, *packages)
    _ran_install(proc, "shellcheck")
    assert all(fresh.installed(p) for p in (*packages, "shellcheck"))
    assert proc.stdout == ""
    assert fresh.sh("/work/.venv/bin/megacpp-env --version").returncode == 0


@pytest.mark.arm64
def test_binfmt_up_installs_qemu_and_prints_nothing(fresh_with_binfmt: Fresh) -> None:
    """binfmt-up.sh installs qemu-user-static (on forky: its one provider, qemu-user-binfmt) and
    binfmt-support, mounts binfmt_misc and finds the host's qemu-aarch64 entry enabled. Runs only where
    the host already has that entry (the arm64 lane's binfmt-up.sh): binfmt_misc is one table for the
    whole kernel, and a registration made here would outlive the container."""
    if not Path("/proc/sys/fs/binfmt_misc/qemu-aarch64").is_file():
        skip_or_fail("the host has no qemu-aarch64 binfmt entry (run scripts/binfmt-up.sh)")
    box = fresh_with_binfmt
    assert not box.installed("binfmt-support")
    proc = box.sh("bash /src/scripts/binfmt-up.sh")
    assert proc.returncode == 0, proc.stderr[-2000:]
    _ran_install(proc, "qemu-user-static", "binfmt-support")
    assert proc.stdout == ""
    assert "qemu-aarch64: interpreter" in proc.stderr
    again = box.sh("bash /src/scripts/binfmt-up.sh")  # installed (a provider counts): no second install
    assert (again.returncode, again.stdout) == (0, ""), again.stderr[-2000:]
    assert "installing:" not in again.stderr
