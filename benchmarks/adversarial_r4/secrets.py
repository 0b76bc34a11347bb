"""Issue 31, round 4, secrets by what they sit next to (defect 9): command lines `run --golden --record`
stores, allowlisted build variables and git remotes a snapshot records.

    python -m benchmarks.adversarial_r4.secrets      prints the counts as JSON

Each carrier of tests/fixtures/secrets.py (44 password carriers: curl -u, mysql -p, sshpass -p, docker
login -p, --pw, aws configure set, JSON arguments, --token -VALUE, openssl -passin, smbclient -U ...; 7
token carriers: --key, wandb login, poetry config ...) gets a fresh random secret and runs once as typed
and once inside `bash -c`; then one real snapshot with defines in CFLAGS, CXXFLAGS, CMAKE_ARGS and
NVCC_FLAGS after other flags, and a checkout whose remotes have a generated scp or ssh user. Bad counts:
leaked (of planted), tracebacks, hangs.
"""

from __future__ import annotations

import json
import random
import shlex
import string
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.adversarial_r4._common import Counts, cli, git, make_repo  # noqa: E402
from tests.fixtures.secrets import PASSWORD_CARRIERS, TOKEN_CARRIERS, fill  # noqa: E402

RNG = random.Random(31)
PASSWORD_CHARS = string.ascii_letters + string.digits + "!#$%&()*+,-./:;=?@[]^_{|}~"


def _password() -> str:
    return "Sx" + "".join(RNG.choice(PASSWORD_CHARS) for _ in range(RNG.randint(8, 20)))


def _token() -> str:
    kind = RNG.choice(["base62", "hex", "dckr_pat_", "sk_live_"])
    if kind == "hex":
        return RNG.randbytes(20).hex()
    body = (
        RNG.choice("ABCDEFGH")
        + RNG.choice("abcdefgh")
        + RNG.choice("23456789")
        + "".join(RNG.choice(string.ascii_letters + string.digits) for _ in range(30))
    )
    return body if kind == "base62" else kind + body


def command_lines(tmp: Path) -> Counts:
    counts = Counts()
    golden = tmp / "golden"
    rc, _out, err = cli(counts, ["-q", "snapshot", "--golden", "g", "--golden-dir", str(golden), "--spec",
                                 str(tmp / "none.yaml")])  # fmt: skip
    assert rc == 0, err
    record = golden / "g.runs.jsonl"
    cases = [(t, _password()) for t in PASSWORD_CARRIERS.values()] + [(t, _token()) for t in TOKEN_CARRIERS.values()]
    for template, secret in cases:
        for nested in (False, True):
            argv = fill(template, secret)
            if nested:
                argv = ["bash", "-c", shlex.join(argv)]
            counts["planted"] += 1
            before = record.read_text() if record.exists() else ""
            rc, out, err = cli(counts, ["run", "--golden", "g", "--golden-dir", str(golden), "--json", "--spec",
                                        str(tmp / "none.yaml"), "--", sys.executable, "-c", "pass", *argv])  # fmt: skip
            stored = (record.read_text() if record.exists() else "")[len(before) :]
            if rc != 0 or not stored:
                counts["wedges"] += 1  # the run was not recorded: nothing judged
                print(f"not recorded: {err[-200:]}", file=sys.stderr)
            if secret in stored or secret in out or secret in err:
                counts["leaked"] += 1
                print(f"leaked: {argv}", file=sys.stderr)
    return counts


DEFINES = ["MY_PASSWORD", "LICENSE_KEY", "DB_PW", "API_TOKEN", "AUTH_SECRET", "SERVICE_CREDENTIALS", "PGPASS"]
SHAPES = ["-D{N}={S}", '-D{N}="{S}"', "-D{N}='{S}'", "-D{N}={S}"]
FLAGS = ["-O2", "-g", "-DNDEBUG", "-fPIC", "-Wall", "-DX=1", "-std=c++17", "--threads 4", "-I/usr/include"]


def snapshot(tmp: Path) -> Counts:
    counts = Counts()
    secrets: list[str] = []
    env: dict[str, str] = {}
    for var in ("CFLAGS", "CXXFLAGS", "CMAKE_ARGS", "NVCC_FLAGS", "LDFLAGS"):
        parts = []
        for _ in range(3):
            secret = _password().replace("'", "").replace('"', "")
            secrets.append(secret)
            shape = RNG.choice(SHAPES)
            parts += [*RNG.sample(FLAGS, 2), shape.format(N=RNG.choice(DEFINES), S=secret)]
        env[var] = " ".join(parts)
    repo = tmp / "checkout"
    make_repo(repo, {"a.txt": "a\n"})
    for i in range(6):
        user = "".join(RNG.choice(string.ascii_lowercase) for _ in range(24)) if i % 2 else _token()
        secrets.append(user)
        url = f"{user}@github.com:org/r{i}.git" if i < 3 else f"ssh://{user}@git.example/r{i}.git"
        git(["remote", "add", f"r{i}", url], repo)
    counts["planted"] += len(secrets)
    out_file = tmp / "snap.json"
    rc, out, err = cli(counts, ["snapshot", "-o", str(out_file), "--paths", str(repo), "--spec",
                                str(tmp / "none.yaml")], env=env)  # fmt: skip
    text = (out_file.read_text() if out_file.exists() else "") + out + err
    if rc != 0:
        counts["wedges"] += 1
    assert "org/r0.git" in text and "CMAKE_ARGS" in text, "the remotes and the variables were not recorded"
    counts["leaked"] += sum(secret in text for secret in secrets)
    return counts


def run(tmp: Path) -> dict[str, int]:
    total = Counts()
    for case in (command_lines, snapshot):
        where = tmp / case.__name__
        where.mkdir()
        for key, value in case(where).items():
            total[key] += value
    return total


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="adv-r4-secrets-") as scratch:
        print(json.dumps(run(Path(scratch)), sort_keys=True))
