"""Issue 19, round 3, readers area: what the tool reads from disk, under hostile input.

    python -m benchmarks.adversarial_r3.readers

Classes, each with siblings of the issue's reproductions:
  fifos       a FIFO nobody writes named as an input (lock diff OLD/NEW, lock diff of a FIFO behind a
              symlink, facts extract with setup.py / pyproject.toml / a requirements file / the origin
              a FIFO, a facts/*.toml FIFO): no answer within the timeout is a hang
  extract     facts extract on a malformed, deeply nested or symlinked pyproject.toml, a missing,
              non-UTF-8 or looping -r include, a truncated or garbage sdist, a garbage --wheel:
              exit 3 is a traceback, exit 0 a false ok; ``-r ../../outside`` or a symlink out whose
              planted line shows up in the written facts is an escape
  nesting     a deeply nested facts/*.toml under facts check, facts show, check and lock check
  gate        ``gate --base C`` where C's lock holds 0xff, or is not TOML, or nests deeply
  envpolicy   build/runtime/per-source env naming a file a tool loads (OPENSSL_CONF, HOME, XDG_*,
              PIP_*, ZDOTDIR, GIT_ALTERNATE_OBJECT_DIRECTORIES ...): ``check`` exiting 0 is a false ok
Every command runs in a subprocess with a timeout. Touches only ``tmp``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.adversarial_r3.net import Counts, cli, spec_copy  # noqa: E402

SOURCE = "megacpp_smoke_ext"
SETUP = 'from setuptools import setup\nsetup(name="megacpp_smoke_ext", version="0.1.0", install_requires=["numpy"])\n'
PLANTED = "planted-outside-package"
DEEP_TOML = "schema_version = 1\nx = " + "[" * 3000 + "]" * 3000 + "\n"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "GIT_CONFIG_NOSYSTEM": "1"}  # fmt: skip


def _tree(base: Path, files: dict[str, str | bytes]) -> Path:
    base.mkdir(parents=True)
    for rel, data in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
    return base


def _extract(counts: Counts, repo: Path, origin: Path, *extra: str) -> tuple[int | None, str]:
    return cli(counts, ["facts", "extract", SOURCE, "--from", str(origin), "--unverified", "adversarial",
                        "--spec", str(repo / "stack.yaml"), *extra])  # fmt: skip


def fifos(tmp: Path) -> Counts:
    counts = Counts()
    base = tmp / "fifos"
    repo = spec_copy(base, "repo")
    fifo = base / "f.toml"
    os.mkfifo(fifo)
    (base / "link.toml").symlink_to(fifo)
    lock = ROOT / "locks" / "pylock.smoke-linux-amd64.toml"
    for argv in (["lock", "diff", str(lock), str(fifo)], ["lock", "diff", str(fifo), str(lock)],
                 ["lock", "diff", str(lock), str(base / "link.toml")]):  # fmt: skip
        rc, _ = cli(counts, argv)
        if rc == 0:
            counts["false_oks"] += 1
    for name in ("setup.py", "pyproject.toml", "requirements.txt", "version.txt", "PKG-INFO", "CMakeLists.txt"):
        origin = _tree(base / f"tree-{name}", {"setup.py": SETUP} if name != "setup.py" else {})
        os.mkfifo(origin / name)
        extra = ("--requirements", "requirements.txt") if name == "requirements.txt" else ()
        cli_rc, _ = _extract(counts, repo, origin, *extra)
        del cli_rc  # a FIFO may be skipped (not a project file) or refused; only a hang or a traceback is bad
    origin_fifo = base / "origin.tar.gz"
    os.mkfifo(origin_fifo)
    rc, _ = _extract(counts, repo, origin_fifo)
    if rc == 0:
        counts["false_oks"] += 1
    os.unlink(repo / "facts" / f"{SOURCE}.toml")
    os.mkfifo(repo / "facts" / f"{SOURCE}.toml")
    for argv in (["facts", "check"], ["facts", "show", SOURCE], ["check"]):
        rc, _ = cli(counts, [*argv, "--spec", str(repo / "stack.yaml")])
        if rc == 0:
            counts["false_oks"] += 1
    return counts


def _sdist(path: Path, *, cut: float = 1.0, garbage: bool = False) -> Path:
    if garbage:
        path.write_bytes(b"\x1f\x8b" + os.urandom(300))
        return path
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = SETUP.encode() * 100
        info = tarfile.TarInfo("megacpp_smoke_ext-0.1.0/setup.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    path.write_bytes(raw[: int(len(raw) * cut)])
    return path


def extract(tmp: Path) -> Counts:
    counts = Counts()
    base = tmp / "extract"
    repo = spec_copy(base, "repo")
    outside = base / "outside"
    _tree(outside, {"x": f"{PLANTED}\n", "pyproject.toml": f'[project]\nname = "{PLANTED}"\nversion = "9"\n'})
    (base / "outside.txt").write_text(f"{PLANTED}\n")
    cases: dict[str, tuple[dict[str, str | bytes], tuple[str, ...]]] = {
        "pyproject-malformed": ({"setup.py": SETUP, "pyproject.toml": "[project\nname = 1"}, ()),
        "pyproject-deep": ({"setup.py": SETUP, "pyproject.toml": "a = " + "[" * 5000 + "]" * 5000}, ()),
        "pyproject-not-utf8": ({"setup.py": SETUP, "pyproject.toml": b'[project]\nname = "\xff"\n'}, ()),
        "pyproject-wrong-types": ({"setup.py": SETUP, "pyproject.toml": "project = 5\nbuild-system = []\n"}, ()),
        "req-missing": ({"setup.py": SETUP, "r.txt": "-r missing.txt\n"}, ("--requirements", "r.txt")),
        "req-outside": ({"setup.py": SETUP, "r.txt": "-r ../../outside/x\n"}, ("--requirements", "r.txt")),
        "req-outside-eq": ({"setup.py": SETUP, "r.txt": "--requirement=../outside.txt\n"}, ("--requirements", "r.txt")),
        "req-absolute": ({"setup.py": SETUP, "r.txt": f"-r {base}/outside.txt\n"}, ("--requirements", "r.txt")),
        "req-not-utf8": ({"setup.py": SETUP, "r.txt": b"numpy\n\xff\n"}, ("--requirements", "r.txt")),
        "req-loop": ({"setup.py": SETUP, "r.txt": "-r r2.txt\n", "r2.txt": "-r r.txt\n"}, ("--requirements", "r.txt")),
        "req-given-outside": ({"setup.py": SETUP}, ("--requirements", "../outside.txt")),
        "setup-syntax": ({"setup.py": "setup(\n"}, ()),
        "setup-deep": ({"setup.py": "x = " + "(" * 5000 + ")" * 5000}, ()),
        "version-file-outside": (
            {
                "setup.py": SETUP,
                "pyproject.toml": '[project]\nname = "megacpp_smoke_ext"\ndynamic = ["version"]\n'
                '[tool.setuptools.dynamic]\nversion = {file = "../outside/x"}\n',
            },
            (),
        ),
    }
    for name, (files, extra) in cases.items():
        origin = _tree(base / name, files)
        rc, _ = _extract(counts, repo, origin, *extra)
        _judge(counts, repo, rc, name)
    link_origin = _tree(base / "pyproject-symlink", {"setup.py": SETUP})
    (link_origin / "pyproject.toml").symlink_to(outside / "pyproject.toml")
    rc, _ = _extract(counts, repo, link_origin)
    _judge(counts, repo, rc, "pyproject-symlink")
    for name, sdist in (("sdist-truncated", _sdist(base / "t.tar.gz", cut=0.5)),
                        ("sdist-garbage", _sdist(base / "g.tar.gz", garbage=True)),
                        ("sdist-empty", _sdist(base / "e.tar.gz", cut=0.0))):  # fmt: skip
        rc, _ = _extract(counts, repo, sdist)
        _judge(counts, repo, rc, name)
    good = _tree(base / "wheel-origin", {"setup.py": SETUP})
    for name, content in (("wheel-text", b"not a zip"), ("wheel-zip-header", b"PK\x03\x04" + b"\x00" * 40),
                          ("wheel-empty", b""), ("wheel-dir", None)):  # fmt: skip
        wheel = base / f"{name}-0.1.0-py3-none-any.whl"
        if content is None:
            wheel.mkdir()
        else:
            wheel.write_bytes(content)
        rc, _ = _extract(counts, repo, good, "--wheel", str(wheel))
        _judge(counts, repo, rc, name)
    return counts


def _judge(counts: Counts, repo: Path, rc: int | None, name: str) -> None:
    written = repo / "facts" / f"{SOURCE}.toml"
    if written.is_file() and PLANTED in written.read_text(errors="replace"):
        counts["escapes"] += 1
        shutil.copy(ROOT / "facts" / f"{SOURCE}.toml", written)
    if rc == 0 and name not in ("setup-syntax", "setup-deep", "pyproject-wrong-types", "req-loop"):
        counts["false_oks"] += 1
    if rc == 0:
        shutil.copy(ROOT / "facts" / f"{SOURCE}.toml", written)


def nesting(tmp: Path) -> Counts:
    counts = Counts()
    for victim in (SOURCE, "causal_conv1d", "vllm"):
        repo = spec_copy(tmp / "nesting", victim)
        (repo / "facts" / f"{victim}.toml").write_text(DEEP_TOML)
        for argv in (["facts", "check"], ["facts", "show", victim], ["check"], ["lock", "--check", "smoke"]):
            rc, _ = cli(counts, [*argv, "--spec", str(repo / "stack.yaml")])
            if rc == 0 and argv[0] == "facts":
                counts["false_oks"] += 1
    return counts


def gate(tmp: Path) -> Counts:
    counts = Counts()
    for name, mutate in (("0xff", lambda b: b + b"# \xff\n"), ("not-toml", lambda b: b"[[[\n"),
                         ("deep", lambda b: DEEP_TOML.encode()), ("nul", lambda b: b + b"\x00\n")):  # fmt: skip
        repo = spec_copy(tmp / "gate", name)
        lock = repo / "locks" / "pylock.smoke-linux-amd64.toml"
        good = lock.read_bytes()
        env = {**os.environ, **GIT_ENV}
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, env=env, check=True, capture_output=True)
        lock.write_bytes(mutate(good))
        for cmd in (["add", "-A"], ["commit", "-qm", "bad base"]):
            subprocess.run(["git", *cmd], cwd=repo, env=env, check=True, capture_output=True)
        lock.write_bytes(good)
        rc, _ = cli(counts, ["gate", "--base", "HEAD", "--spec", str(repo / "stack.yaml")], cwd=repo)
        if rc == 0:
            counts["false_oks"] += 1
    return counts


FILE_LOADING = ("OPENSSL_CONF", "HOME", "XDG_CONFIG_HOME", "PIP_CONFIG_FILE", "ZDOTDIR",
                "GIT_ALTERNATE_OBJECT_DIRECTORIES", "XDG_DATA_DIRS", "GIT_DIR", "PIP_INDEX_URL", "UV_CONFIG_FILE",
                "MAKEFILES", "SSL_CERT_FILE", "CURL_HOME", "NETRC", "GNUPGHOME", "OPENSSL_MODULES")  # fmt: skip


def envpolicy(tmp: Path) -> Counts:
    counts = Counts()
    anchor = '      MEGACPP_SMOKE_EXT_FORCE_BUILD: "TRUE"\n'
    for name in FILE_LOADING:
        repo = spec_copy(tmp / "env", name)
        text = (repo / "stack.yaml").read_text()
        (repo / "stack.yaml").write_text(text.replace(anchor, anchor + f"      {name}: /tmp/evil.cnf\n", 1))
        rc, out = cli(counts, ["check", "--spec", str(repo / "stack.yaml")])
        if rc == 0 or f"{name} is refused" not in out:
            counts["false_oks"] += 1
    return counts


def run(tmp: Path) -> dict[str, int]:
    counts = Counts()
    for fn in (fifos, extract, nesting, gate, envpolicy):
        counts.merge(fn(tmp))
    return dict(counts)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory(prefix="megacpp-adv-readers-") as d:
        print(json.dumps(run(Path(d))))
