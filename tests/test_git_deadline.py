"""Every git call has a deadline and leaves no process behind (issue 31, defect 5).

A FIFO where git opens a file (``.git/HEAD``, ``index``, ``config`` ...) would block git for good, and
with it ``verify-checkout`` and the reuse of a checkout: the files every git command opens are refused at
once; anything else git may block on (a FIFO ``.gitignore``, a ref, a remote that never answers) is
stopped at the deadline (``$MEGACPP_ENV_GIT_TIMEOUT``), its whole process group killed and reaped. Real
repositories, the real CLI in a subprocess, a real TCP server that never answers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from megacpp_env import git
from megacpp_env.checkout import checkout_source
from megacpp_env.errors import MegacppEnvError
from megacpp_env.spec.model import Source
from tests.fixtures.git_repos import make_repo
from tests.fixtures.spec import REPO_ROOT


def _processes_in(path: Path) -> list[str]:
    """Live processes (not zombies) whose working directory is inside ``path``, or whose command line names it."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and int(pid) != os.getpid() and (cwd.startswith(str(path)) or str(path) in cmdline):
            found.append(f"{pid} {cmdline}")
    return found


def _verify(path: Path, env: dict[str, str] | None = None, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "megacpp_env", "verify-checkout", str(path)], cwd=REPO_ROOT, capture_output=True,
        text=True, check=False, timeout=timeout, env={**os.environ, **(env or {})},
    )  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    make_repo(path, {"a.txt": "a\n", "sub/b.txt": "b\n"})
    return path


@pytest.mark.parametrize(
    "name",
    [".git/HEAD", ".git/index", ".git/config", ".git/packed-refs", ".git/info/exclude", ".git/config.worktree",
     ".git/objects/info/alternates", ".git"],
)  # fmt: skip
def test_a_fifo_where_every_git_command_opens_a_file_is_refused_at_once(repo: Path, tmp_path: Path, name: str) -> None:
    target = repo / name
    if target.is_dir():
        import shutil

        shutil.rmtree(target)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
    os.mkfifo(target)
    started = time.monotonic()
    done = _verify(repo)
    assert time.monotonic() - started < 30
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert "is a FIFO" in done.stderr or "not a git" in done.stderr or "no .git" in done.stdout + done.stderr
    assert _processes_in(tmp_path) == []


def test_a_fifo_in_a_submodules_git_dir_is_refused_too(tmp_path: Path) -> None:
    inner = tmp_path / "inner"
    make_repo(inner, {"x.txt": "x\n"})
    outer = tmp_path / "outer"
    make_repo(outer, {"README": "r\n"}, submodules={"lib/inner": inner.as_uri()})
    head = outer / ".git" / "modules" / "lib" / "inner" / "HEAD"
    head.unlink()
    os.mkfifo(head)
    done = _verify(outer)
    assert done.returncode == 1 and "is a FIFO" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert _processes_in(tmp_path) == []


@pytest.mark.parametrize("name", [".gitignore", "sub/.gitignore", ".gitattributes", ".git/refs/heads/main"])
def test_anything_else_git_blocks_on_is_stopped_at_the_deadline(repo: Path, tmp_path: Path, name: str) -> None:
    target = repo / name
    if name.startswith(".git/refs"):
        git.run_git(["checkout", "--quiet", "-B", "main"], repo)
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    started = time.monotonic()
    done = _verify(repo, {"MEGACPP_ENV_GIT_TIMEOUT": "2"})
    assert time.monotonic() - started < 60
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    # The worktree judge asks git to read ignore files (ls-files) but never attributes: a FIFO
    # .gitattributes is only a new entry of a special kind (never opened), so the answer comes at once.
    assert "did not finish in 2s" in done.stderr or name == ".gitattributes", done.stderr
    assert _processes_in(tmp_path) == []


def test_the_reuse_of_a_checkout_is_refused_not_hung(tmp_path: Path) -> None:
    upstream = tmp_path / "up"
    sha = make_repo(upstream, {"a.txt": "a\n"})
    source = Source(name="demo", repo=upstream.as_uri(), commit=sha)
    dest = tmp_path / "dest"
    checkout_source(source, dest)
    (dest / ".git" / "index").unlink()
    os.mkfifo(dest / ".git" / "index")
    result: list[BaseException] = []

    def reuse() -> None:
        try:
            checkout_source(source, dest)
        except MegacppEnvError as exc:
            result.append(exc)

    t = threading.Thread(target=reuse, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "checkout reuse hung"
    assert result and "is a FIFO" in str(result[0])


@pytest.fixture
def silent_server():
    """A TCP server that accepts connections and never answers (a remote that hangs)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield server.getsockname()[1]
    stop.set()
    t.join(5)
    for conn in held:
        conn.close()
    server.close()


@pytest.mark.parametrize("scheme", ["git", "http"])
def test_a_fetch_from_a_remote_that_never_answers_is_stopped_and_reaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, silent_server: int, scheme: str
) -> None:
    """http runs a helper (git-remote-http) beside git: the whole group is killed, nothing is left."""
    monkeypatch.setenv("MEGACPP_ENV_GIT_TIMEOUT", "2")
    work = tmp_path / "work"
    git.init(work)
    url = f"{scheme}://127.0.0.1:{silent_server}/never.git"
    started = time.monotonic()
    with pytest.raises(MegacppEnvError, match="did not finish in 2s"):
        git.fetch_commit(work, url, "a" * 40)
    assert time.monotonic() - started < 30
    time.sleep(0.2)
    assert _processes_in(tmp_path) == [] and not [p for p in _processes_in(Path("/")) if str(silent_server) in p]


# Starts argv[1:] with the signals' default dispositions, as a terminal's foreground program has them: a
# test run started in the background (`cmd &` ignores SIGINT) or under nohup (SIGHUP) passes its ignored
# signals on, and a program keeps a signal it inherits ignored (as it should: nohup means it).
DEFAULT_SIGNALS = (
    "import os, signal, sys\n"
    "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP): signal.signal(s, signal.SIG_DFL)\n"
    "os.execv(sys.argv[1], sys.argv[1:])"
)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_an_interrupted_call_leaves_no_git_behind(repo: Path, tmp_path: Path, signum: int, code: int) -> None:
    """^C (SIGINT to the program), SIGTERM or SIGHUP while git blocks: exit 128 + the signal's number, and
    git, in a group of its own that the terminal's ^C does not reach, is killed too (SIGTERM's default
    action killed the program alone and left git blocked until its deadline)."""
    (repo / ".gitignore").unlink(missing_ok=True)
    os.mkfifo(repo / ".gitignore")
    argv = [sys.executable, "-c", DEFAULT_SIGNALS, sys.executable, "-m", "megacpp_env", "verify-checkout", str(repo)]
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any("ls-files" in p for p in _processes_in(tmp_path)):
        time.sleep(0.1)
    assert any("ls-files" in p for p in _processes_in(tmp_path)), "git never blocked on the FIFO"
    proc.send_signal(signum)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith("megacpp-env: ")
    time.sleep(0.2)
    assert _processes_in(tmp_path) == []


def test_a_bad_deadline_is_one_error(repo: Path) -> None:
    done = _verify(repo, {"MEGACPP_ENV_GIT_TIMEOUT": "soon"})
    assert done.returncode == 1 and "MEGACPP_ENV_GIT_TIMEOUT='soon'" in done.stderr and "Traceback" not in done.stderr
