"""Issue 31, round 4, git under hostile checkouts (defect 5): a FIFO where git opens a file, and remotes
that never answer, under `verify-checkout` and the reuse of a checkout (`checkout` again).

    python -m benchmarks.adversarial_r4.gitfifo      prints the counts as JSON

A FIFO at .git/HEAD, index, config, config.worktree, packed-refs, info/exclude, objects/info/alternates,
.git itself, a submodule's git dir HEAD (refused at once), and at .gitignore, sub/.gitignore,
.gitattributes and a branch ref (stopped at the deadline: MEGACPP_ENV_GIT_TIMEOUT=10 here, 120 s by
default); a git:// and an http:// remote that accept and never answer (MEGACPP_ENV_GIT_TIMEOUT=5).
Bad counts: hangs (no answer in 60 s), tracebacks, false_oks (exit 0), partials (a git process left
running after the command ended).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.adversarial_r4._common import Counts, cli, git, make_repo, mini_spec, processes_in  # noqa: E402

AT_ONCE = [".git/HEAD", ".git/index", ".git/config", ".git/config.worktree", ".git/packed-refs", ".git/info/exclude",
           ".git/objects/info/alternates", ".git", ".git/modules/lib/inner/HEAD"]  # fmt: skip
AT_DEADLINE = [".gitignore", "pkg/.gitignore", ".gitattributes", ".git/refs/heads/main"]


def _fifo_at(checkout: Path, rel: str) -> None:
    target = checkout / rel
    if rel.endswith("refs/heads/main"):
        git(["checkout", "-q", "-B", "main"], checkout)
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
    os.mkfifo(target)


def _judge(counts: Counts, argv: list[str], where: Path, env: dict[str, str]) -> None:
    rc, _out, _err = cli(counts, argv, env=env, timeout=60)
    if rc == 0:
        counts["false_oks"] += 1
    time.sleep(0.2)
    if processes_in(where):
        counts["partials"] += 1


def fifos(tmp: Path) -> Counts:
    counts = Counts()
    inner_sha = make_repo(tmp / "inner", {"x.c": "int x;\n"})
    del inner_sha
    sha = make_repo(tmp / "upstream", {"README": "r\n", "pkg/a.py": "A = 1\n"},
                    submodules={"lib/inner": (tmp / "inner").as_uri()})  # fmt: skip
    spec = mini_spec(tmp / "spec", f"  demo:\n    repo: {(tmp / 'upstream').as_uri()}\n    commit: '{sha}'\n"
                                   "    submodules: true\n")  # fmt: skip
    pristine = tmp / "pristine"
    rc, _out, err = cli(counts, ["checkout", "demo", "--dest", str(pristine), "--spec", str(spec)])
    assert rc == 0, err
    for i, rel in enumerate([*AT_ONCE, *AT_DEADLINE]):
        case = tmp / f"case-{i}"
        shutil.copytree(pristine, case, symlinks=True)
        _fifo_at(case, rel)
        env = {"MEGACPP_ENV_GIT_TIMEOUT": "10"} if rel in AT_DEADLINE else {}
        _judge(counts, ["verify-checkout", str(case), "--expect", "demo", "--spec", str(spec)], case, env)
        _judge(counts, ["checkout", "demo", "--dest", str(case), "--spec", str(spec)], case, env)
    return counts


def silent_remotes(tmp: Path) -> Counts:
    counts = Counts()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    port = server.getsockname()[1]
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
    try:
        for scheme in ("git", "http"):
            spec = mini_spec(tmp / f"spec-{scheme}", f"  demo:\n    repo: {scheme}://127.0.0.1:{port}/never.git\n"
                                                     f"    commit: '{'a' * 40}'\n")  # fmt: skip
            dest = tmp / f"dest-{scheme}"
            _judge(counts, ["checkout", "demo", "--dest", str(dest), "--spec", str(spec)], tmp,
                   {"MEGACPP_ENV_GIT_TIMEOUT": "5"})  # fmt: skip
            if [p for p in processes_in(Path("/")) if f"127.0.0.1:{port}" in p]:
                counts["partials"] += 1
    finally:
        stop.set()
        t.join(5)
        for conn in held:
            conn.close()
        server.close()
    return counts


def run(tmp: Path) -> dict[str, int]:
    total = Counts()
    for case in (fifos, silent_remotes):
        where = tmp / case.__name__
        where.mkdir()
        for key, value in case(where).items():
            total[key] += value
    return total


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="adv-r4-gitfifo-") as scratch:
        print(json.dumps(run(Path(scratch)), sort_keys=True))
