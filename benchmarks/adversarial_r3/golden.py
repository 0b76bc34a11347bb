"""Adversarial cases of issue 19 items 2 and 3: goldens that name what runs, and secrets they store.

    python -m benchmarks.adversarial_r3.golden

Works only under a temporary directory (``run(tmp)``); each command runs as a subprocess of
``python -m megacpp_env`` with a timeout (a timeout is a hang). Counts:

- commands: the verbs run (as in every round-3 module);
- escapes: a planted program ran (an edited ``host.inspected_python``, capture ``creator`` /
  ``base_prefix`` / a remote's ``ext::`` URL, an ``import`` line of a ``.pth`` entry that reached
  the re-made venv, an edited interpreter fact), as git's module counts a URL's command running;
- leaked / planted: a planted secret (command line of ``run --golden``, a golden's uncommitted diff,
  an untracked ``key = value`` file, an unowned ``.pth`` line) found in any byte under the golden
  directory or the run record;
- false_oks: ``reproduce`` exited 0 on an edited capture; a benign golden (a patch and an
  untracked file that only look like secrets) did not reproduce identically;
- partials: a refused ``reproduce`` left its ``--venv`` or ``--checkouts`` directory behind;
- tracebacks: exit 3 or a Python traceback on stderr. wedges: none of these cases can wedge a
  next run; kept at 0 for the protocol.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120
KEYS = ("commands", "tracebacks", "hangs", "leaked", "planted", "escapes", "false_oks", "partials", "wedges")


class Lab:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.counts = dict.fromkeys(KEYS, 0)
        self.env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        self.env.update(MEGACPP_ENV_CACHE_DIR=str(tmp / "cache"), PYTHONPATH=str(ROOT),
                        GIT_CONFIG_NOSYSTEM="1", HOME=str(tmp / "home"))  # fmt: skip
        (tmp / "home").mkdir(exist_ok=True)
        self.serial = 0
        self.leaks: list[str] = []  # where each leaked secret was found (printed on stderr by __main__)

    def cli(self, *argv: str, cwd: Path | None = None) -> tuple[int, str, str]:
        self.counts["commands"] += 1
        try:
            p = subprocess.run([sys.executable, "-m", "megacpp_env", *argv], capture_output=True, text=True,
                               timeout=TIMEOUT, env=self.env, cwd=cwd or self.tmp, check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            self.counts["hangs"] += 1
            return 124, "", ""
        if p.returncode == 3 or "Traceback (most recent call last)" in p.stderr:
            self.counts["tracebacks"] += 1
        return p.returncode, p.stdout, p.stderr

    def git(self, *argv: str, cwd: Path) -> None:
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always",
                        *argv], cwd=cwd, env=self.env, check=True, capture_output=True, timeout=TIMEOUT)  # fmt: skip

    def fresh(self, label: str) -> Path:
        self.serial += 1
        path = self.tmp / f"{self.serial:03d}-{label}"
        path.mkdir()
        return path

    def venv(self, where: Path, *, tiny: bool = True) -> Path:
        """A venv holding one tiny distribution (an empty one trips an unrelated collector bug on main),
        or nothing (``tiny=False``: reproduce has no index to install it from)."""
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=TIMEOUT)
        if not tiny:
            return where / "bin" / "python"
        site = next((where / "lib").glob("python*/site-packages"))
        info = site / "tiny-1.0.dist-info"
        info.mkdir()
        (site / "tiny.py").write_text("X = 1\n")
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n")
        (info / "INSTALLER").write_text("pip\n")
        (info / "RECORD").write_text("tiny.py,,\ntiny-1.0.dist-info/METADATA,,\ntiny-1.0.dist-info/INSTALLER,,\n"
                                     "tiny-1.0.dist-info/RECORD,,\n")  # fmt: skip
        return where / "bin" / "python"

    def checkout(self, where: Path, changes: dict[str, str]) -> Path:
        origin = where / "origin"
        origin.mkdir(parents=True)
        (origin / "cfg.py").write_text("X = 1\n")
        (origin / "conf").mkdir()
        (origin / "conf" / "app.ini").write_text("[db]\nhost = h\n")
        self.git("init", "-q", "-b", "main", cwd=origin)
        self.git("add", "-A", cwd=origin)
        self.git("commit", "-qm", "init", cwd=origin)
        clone = where / "src" / "proj"
        self.git("clone", "-q", str(origin), str(clone), cwd=where)
        for rel, text in changes.items():
            (clone / rel).parent.mkdir(parents=True, exist_ok=True)
            (clone / rel).write_text(text)
        return clone

    def golden(self, where: Path, python: Path, paths: Sequence[Path] = ()) -> Path:
        gold = where / "golden"
        extra = ["--paths", *map(str, paths)] if paths else []
        code, _, err = self.cli("snapshot", "--spec", str(where / "none.yaml"), "--python", str(python), *extra,
                                "--golden", "bench", "--golden-dir", str(gold))  # fmt: skip
        if code != 0:
            raise RuntimeError(f"golden not stored: {err}")
        return gold

    def plant(self, secret: str, stored: Path) -> None:
        self.counts["planted"] += 1
        data = b"".join(p.read_bytes() for p in stored.rglob("*") if p.is_file()) if stored.is_dir() else b""
        if secret.encode() in data:
            self.counts["leaked"] += 1
            self.leaks.append(str(stored))


def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=2, sort_keys=True))


def _evil(where: Path, name: str = "python3") -> tuple[Path, Path]:
    marker = where / "PWNED"
    evil = where / "evil" / "bin" / name
    evil.parent.mkdir(parents=True, exist_ok=True)
    evil.write_text(f'#!/bin/sh\ntouch {marker}\nexec {sys.executable} "$@"\n')
    evil.chmod(0o755)
    return evil, marker


# ---- item 2: what runs --------------------------------------------------------------------------


def _precheck_cases(lab: Lab) -> None:
    for verb in ("run", "bisect-check"):
        for where_field in ("host.inspected_python", "facts.python.interpreter.executable", "host.tool_python"):
            where = lab.fresh("names-python")
            python = lab.venv(where / "venv")
            src = lab.checkout(where, {"cfg.py": "X = 2\n"})
            gold = lab.golden(where, python, [src])
            evil, marker = _evil(where)

            def change(d: dict[str, Any], f: str = where_field, e: Path = evil) -> None:
                *parents, last = f.split(".")
                node = d
                for p in parents:
                    node = node[p]
                node[last] = str(e)

            _edit(gold / "bench.json", change)
            common = ["--spec", str(where / "none.yaml"), "--golden-dir", str(gold)]
            if verb == "run":
                lab.cli("run", *common, "--golden", "bench", "--", sys.executable, "-c", "pass")
            else:
                lab.cli("bisect-check", "bench", *common, "--worktree", str(src))
            lab.counts["escapes"] += marker.exists()


def _sitecustomize(d: dict[str, Any], evil: Path) -> None:
    """A .pth line naming a directory whose sitecustomize.py leaves the marker at every start."""
    (evil.parent / "sitecustomize.py").write_text(f"open({str(evil.parent.parent.parent / 'PWNED')!r}, 'w')\n")
    site = "{venv}/lib/python" + "{}.{}".format(*sys.version_info[:2]) + "/site-packages"
    d["path_entries"].append({"site": site, "file": "zz_paths.pth", "lines": [str(evil.parent)]})


CAPTURE_EDITS: dict[str, Callable[[dict[str, Any], Path], None]] = {
    "pth-sitecustomize": _sitecustomize,
    "creator-traversal": lambda d, e: d["python"].__setitem__("creator", "../../../evil/bin/python3"),
    "creator-other-program": lambda d, e: d["python"].__setitem__("creator", "sh"),
    "base_prefix": lambda d, e: d["python"].__setitem__("base_prefix", str(e.parent.parent)),
    "remote-ext": lambda d, e: next(iter(d["checkouts"].values()))["remotes"].__setitem__(
        "origin", f"ext::sh -c touch% {e.parent.parent.parent / 'PWNED'}"
    ),
    "remote-upload-pack": lambda d, e: next(iter(d["checkouts"].values()))["remotes"].__setitem__(
        "origin", f"--upload-pack=touch {e.parent.parent.parent / 'PWNED'}"
    ),
    "pth-import": lambda d, e: d["path_entries"].append(
        {
            "site": "{venv}/lib/python3.11/site-packages",
            "file": "evil.pth",
            "lines": [f"import os; open({str(e.parent.parent.parent / 'PWNED')!r}, 'w')"],
        }
    ),
    "executable": lambda d, e: d["python"].__setitem__("executable", str(e)),
    "head": lambda d, e: next(iter(d["checkouts"].values())).__setitem__("head", "1" * 40),
}


def _capture_cases(lab: Lab) -> None:
    for label, change in CAPTURE_EDITS.items():
        where = lab.fresh(f"capture-{label}")
        python = lab.venv(where / "venv")
        src = lab.checkout(where, {"cfg.py": "X = 2\n"})
        gold = lab.golden(where, python, [src])
        minor = "python{}.{}".format(*sys.version_info[:2])
        evil, marker = _evil(where, minor)
        _edit(gold / "bench.capture.json", lambda d, c=change, e=evil: c(d, e))
        out = where / "again"
        code, _, _ = lab.cli("reproduce", "bench", "--golden-dir", str(gold), "--venv", str(out / "venv"),
                             "--checkouts", str(out / "src"))  # fmt: skip
        if (out / "venv" / "bin" / "python").exists() and label.startswith("pth-"):
            subprocess.run([str(out / "venv" / "bin" / "python"), "-c", "pass"], timeout=TIMEOUT, check=False)
        lab.counts["escapes"] += marker.exists()
        lab.counts["false_oks"] += code == 0
        lab.counts["partials"] += code != 0 and out.exists() and any(out.iterdir())


# ---- item 3: secrets ---------------------------------------------------------------------------


def _secret(n: int) -> str:
    return f"Zq8pW3xR7vN{n:03d}mK5t"


def _argv_cases(lab: Lab) -> None:
    where = lab.fresh("argv")
    python = lab.venv(where / "venv")
    gold = lab.golden(where, python)
    cases = [
        lambda s: [f"--api-key={s}"], lambda s: ["--password", s], lambda s: [f"https://u:{s}@h.invalid/x"],
        lambda s: ["-H", f"Authorization: Bearer {s}"], lambda s: [f"--token={s}"], lambda s: ["--hf-token", s],
        lambda s: [f"--header=Cookie: sid={s}"], lambda s: ["-H", f"X-Api-Key: {s}"], lambda s: ["--secret", s],
        lambda s: [f"postgresql://bob:{s}@db.invalid/x"], lambda s: ["--db-passwd", s],
    ]  # fmt: skip
    for n, case in enumerate(cases):
        secret = _secret(100 + n)
        record = where / "records" / f"runs-{n}.jsonl"
        record.parent.mkdir(exist_ok=True)
        lab.cli("run", "--spec", str(where / "none.yaml"), "--golden", "bench", "--golden-dir", str(gold),
                "--record", str(record), "--json", "--", sys.executable, "-c", "pass", *case(secret))  # fmt: skip
        lab.plant(secret, where)  # the golden directory and the run records; nothing else there holds it


DIFFS = [
    ("cfg.py", 'X = 1\nHF = "hf_{s}abcd"\n'),
    ("cfg.py", 'X = 1\nHEADERS = {{"Authorization": "Bearer {s}"}}\n'),
    ("conf/app.ini", "[db]\nhost = h\npassword = {s}\n"),
    ("conf/app.ini", "[db]\nhost = h\naws_secret_access_key = {s}\n"),
    ("cfg.py", 'X = 1\nDSN = "postgresql://bob:{s}@db/x"\n'),
    ("cfg.py", 'X = 1\nAPI_KEY = "sk-{s}abcdefgh"\n'),
]
UNTRACKED = [
    ("settings.ini", "[db]\npassword = {s}\n"),
    ("aws.cfg", "[default]\naws_secret_access_key = {s}\n"),
    ("request.http", "GET / HTTP/1.1\nAuthorization: Bearer {s}\n"),
    ("db.yaml", "db:\n  password: {s}\n"),
    ("conf.json", '{{"api_key": "{s}1"}}\n'),
    ("run.sh", "export DB_PASSWORD={s}\n"),
    ("client.toml", 'client_secret = "{s}"\n'),
    ("notes.md", "clone with https://bob:{s}@git.invalid/x\n"),
]
PTH = ["/opt/ghp_{s}abcdefgh/lib", "https://bob:{s}@h.invalid/simple", "/x/hf_{s}"]


def _tree_cases(lab: Lab) -> None:
    n = 200
    for kind, cases in (("diff", DIFFS), ("untracked", UNTRACKED)):
        for rel, template in cases:
            n += 1
            secret = _secret(n)
            where = lab.fresh(f"{kind}-secret")
            python = lab.venv(where / "venv")
            src = lab.checkout(where, {rel: template.format(s=secret)})
            lab.plant(secret, lab.golden(where, python, [src]))
    for target in ("/home/u/ghp_{s}abcdefgh", "https://bob:{s}@h.invalid/x"):  # an untracked symlink's target
        n += 1
        secret = _secret(n)
        where = lab.fresh("symlink-secret")
        python = lab.venv(where / "venv")
        src = lab.checkout(where, {})
        (src / "link").symlink_to(target.format(s=secret))
        lab.plant(secret, lab.golden(where, python, [src]))
    for template in PTH:
        n += 1
        secret = _secret(n)
        where = lab.fresh("pth-secret")
        python = lab.venv(where / "venv")
        site = next((where / "venv" / "lib").glob("python*/site-packages"))
        (site / "local_paths.pth").write_text(f"{where}\n{template.format(s=secret)}\n")
        lab.plant(secret, lab.golden(where, python))


BENIGN_PATCH = 'import os\nX = 2\npassword = os.environ["DB_PASSWORD"]\npad_token = "<pad>"\ntokenizer = "gpt2"\n'
BENIGN_UNTRACKED = "db:\n  password: ${DB_PASSWORD}\ntokenizer: gpt2\nmax_tokens: 100\n"


def _benign(lab: Lab) -> None:
    where = lab.fresh("benign")
    python = lab.venv(where / "venv", tiny=False)
    src = lab.checkout(where, {"cfg.py": BENIGN_PATCH, "conf/local.yaml": BENIGN_UNTRACKED})
    gold = lab.golden(where, python, [src])
    out = where / "again"
    code, stdout, _ = lab.cli("reproduce", "bench", "--golden-dir", str(gold), "--venv", str(out / "venv"),
                              "--checkouts", str(out / "src"), "--json")  # fmt: skip
    same = (out / "src" / "proj" / "cfg.py").is_file() and (out / "src" / "proj" / "cfg.py").read_text() == BENIGN_PATCH
    try:
        identical = json.loads(stdout).get("identical") is True
    except ValueError:
        identical = False
    lab.counts["false_oks"] += not (code == 0 and identical and same)


def run(tmp: Path) -> dict[str, int]:
    lab = Lab(Path(tmp))
    for part in (_precheck_cases, _capture_cases, _argv_cases, _tree_cases, _benign):
        part(lab)
    return lab.counts


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="adv-golden-") as tmp:
        result = run(Path(tmp))
    print(json.dumps(result, sort_keys=True))
    shutil.rmtree(tmp, ignore_errors=True)
