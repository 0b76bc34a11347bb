"""Issue 19, round 3, git area: mirrors and checkouts under hostile input.

    python -m benchmarks.adversarial_r3.git

Classes, each with siblings of the issue's reproductions, all on real repositories under ``tmp``:
  urls        hostile submodule and pinned URLs (``--upload-pack=``, ``ext::``, ``fd::``,
              ``ssh://-oProxyCommand=``, scp-like ``-o`` hosts, unknown schemes, newlines) through
              mirror-sources and checkout; a planted ``PWNED`` file is a command that ran (escape)
  corrupt     a mirror with a flipped pack byte, a truncated pack or index, a replaced or deleted
              object, a deleted pin ref: a re-run saying "unchanged" is a false ok, and so is a
              repaired mirror that does not serve a verified checkout
  hole        checkout from a mirror missing a blob: anything left is a partial, a failing re-run
              with a good mirror a wedge
  kills       SIGKILL of checkout / mirror-sources at several moments: leftovers after the next
              run are partials, a next run that fails is a wedge
  offline     checkout --mirror from a mirror that lacks the pin: exit 0 is a false ok (it fetched
              from elsewhere)
  inputs      mirror-sources with a corrupt index.json and with --to a file, below a file, in /proc
Every command runs in a subprocess with a timeout (a hang); exit 3 or "Traceback" is a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYS = ("commands", "tracebacks", "hangs", "leaked", "planted", "escapes", "false_oks", "partials", "wedges")
TIMEOUT_S = 60
IDENTITY = {
    "GIT_AUTHOR_NAME": "A", "GIT_AUTHOR_EMAIL": "a@example.invalid", "GIT_COMMITTER_NAME": "A",
    "GIT_COMMITTER_EMAIL": "a@example.invalid", "GIT_AUTHOR_DATE": "2025-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2025-01-01T00:00:00+0000", "GIT_CONFIG_NOSYSTEM": "1",
}  # fmt: skip
HOSTILE_URLS = (
    "--upload-pack=touch {pwn}",
    "--upload-pack=touch${{IFS}}{pwn}",
    "-oProxyCommand=touch PWNED:x",
    "ext::sh -c touch% {pwn}",
    "ext::touch {pwn}",
    "fd::3",
    "fd::0,1/x",
    "ssh://-oProxyCommand=touch PWNED/x",
    "git+ssh://-oProxyCommand=touch PWNED/x",
    "ssh://user@-oProxyCommand=touch PWNED/x",
    "u@-oProxyCommand=touch PWNED:x",
    "testhelper::x",
    "foo://host/x",
    "https://host/x\\n[core]\\n\\tsshCommand = touch PWNED",
)


def sh_git(args: list[str], cwd: Path) -> str:
    env = {**os.environ, **IDENTITY, "HOME": str(cwd)}
    cfg = ["-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main", "-c", "commit.gpgSign=false"]
    out = subprocess.run(["git", *cfg, *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def make_repo(path: Path, files: dict[str, str], links: dict[str, tuple[str, str]] | None = None) -> str:
    """A repository with ``files`` and submodules ``links`` (path -> (url, commit)) committed."""
    path.mkdir(parents=True)
    sh_git(["init", "-q"], path)
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    sh_git(["add", "-A"], path)
    if links:
        text = "".join(f'[submodule "{p}"]\n\tpath = {p}\n\turl = {u}\n' for p, (u, _) in links.items())
        (path / ".gitmodules").write_text(text)
        sh_git(["add", ".gitmodules"], path)
        for p, (_, sha) in links.items():
            sh_git(["update-index", "--add", "--cacheinfo", f"160000,{sha},{p}"], path)
    sh_git(["commit", "-q", "-m", "c"], path)
    return sh_git(["rev-parse", "HEAD"], path)


class Counts:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.c = dict.fromkeys(KEYS, 0)
        self.notes: list[str] = []  # which case made each bad count (stderr with --verbose)

    def bad(self, key: str, count: int | bool, what: str) -> None:
        self.c[key] += int(count)
        if count:
            self.notes.append(f"{key}: {what}")

    def run(self, code: str, cwd: Path, *, timeout: float = TIMEOUT_S) -> tuple[int, str]:
        """One command: python code against the package (exit 0 ok, 1 refused, 3 a bug)."""
        self.c["commands"] += 1
        prog = (
            "import sys, json\nfrom megacpp_env.errors import MegacppEnvError\n"
            f"try:\n{_indent(code)}\nexcept MegacppEnvError as e:\n    print(e, file=sys.stderr); sys.exit(1)\n"
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(self.tmp / "home")}
        try:
            p = subprocess.run([sys.executable, "-c", prog], cwd=cwd, env=env, capture_output=True, text=True,
                               timeout=timeout, check=False)  # fmt: skip
        except subprocess.TimeoutExpired:
            self.c["hangs"] += 1
            return 124, ""
        if p.returncode not in (0, 1) or "Traceback" in p.stderr:
            self.c["tracebacks"] += 1
        return p.returncode, p.stdout + p.stderr

    def cli(self, args: list[str], cwd: Path) -> int:
        return self.run(f"from megacpp_env.cli import main\nsys.exit(main({args!r}))", cwd)[0]

    def pwned(self) -> None:
        found = list(self.tmp.rglob("PWNED*"))
        self.c["escapes"] += len(found)
        for f in found:
            f.unlink()


def _indent(code: str) -> str:
    return "\n".join("    " + line for line in code.splitlines())


MIRROR = (
    "from pathlib import Path\nfrom megacpp_env.srcbuild.mirror import mirror_sources, MirrorRequest, Pin\n"
    "(m,) = mirror_sources(Path({root!r}), [MirrorRequest(source='demo', pins=(Pin(url={url!r}, "
    "commit={commit!r}, submodules=True),))])\nprint('ACTION', m.action)"
)
CHECKOUT = (
    "from pathlib import Path\nfrom megacpp_env.checkout import checkout_source, verify_checkout\n"
    "from megacpp_env.spec.model import Source\n"
    "try:\n    from megacpp_env.srcbuild.mirror import mirror_only_config\n"
    "except ImportError:  # before issue 19\n    from megacpp_env.srcbuild.mirror import insteadof_config as mirror_only_config\n"
    "s = Source(name='demo', repo={url!r}, commit={commit!r}, submodules=True)\n"
    "cfg = mirror_only_config(Path({root!r}), 'demo') if {root!r} else None\n"
    "checkout_source(s, Path({dest!r}), git_config=cfg)\nassert verify_checkout(Path({dest!r}), s).ok"
)


def case_urls(k: Counts, base: Path) -> None:
    sub = base / "sub"
    sub_commit = make_repo(sub, {"x.txt": "x\n"})
    for i, raw in enumerate(HOSTILE_URLS):
        url = raw.format(pwn=k.tmp / "PWNED")  # outside every directory a failed run removes
        up = base / f"up{i}"
        commit = make_repo(up, {"a.txt": "a\n"}, {"lib": (url.replace("\\n", "\n").replace("\\t", "\t"), sub_commit)})
        for code in (
            MIRROR.format(root=str(base / f"m{i}"), url=up.as_uri(), commit=commit),
            CHECKOUT.format(url=up.as_uri(), commit=commit, root="", dest=str(base / f"co{i}")),
            MIRROR.format(root=str(base / f"mp{i}"), url=url, commit=commit),
            CHECKOUT.format(url=url, commit=commit, root="", dest=str(base / f"cop{i}")),
        ):
            rc, _ = k.run(code, up)
            k.bad("false_oks", rc == 0, f"accepted {url!r}")
            k.pwned()


def _mirrored(k: Counts, base: Path, name: str) -> tuple[Path, Path, str, Path, Path]:
    """(upstream, root, commit, superproject mirror repo, submodule mirror repo), packed."""
    sub = base / f"{name}-sub"
    sub_commit = make_repo(sub, {"lib.txt": "lib\n" * 50})
    up = base / f"{name}-up"
    files = {"a.txt": "a\n", "data.bin": "".join(chr(65 + i % 26) for i in range(4096))}
    commit = make_repo(up, files, {"lib": (sub.as_uri(), sub_commit)})
    root = base / f"{name}-mirror"
    k.run(MIRROR.format(root=str(root), url=up.as_uri(), commit=commit), base)
    repos = sorted((root / "sources" / "demo" / "git").iterdir())
    main = next(r for r in repos if r.name.endswith("-up.git"))
    subr = next(r for r in repos if r.name.endswith("-sub.git"))
    return up, root, commit, main, subr


def _obj(repo: Path, rev: str) -> Path:
    oid = sh_git(["rev-parse", rev], repo)
    return repo / "objects" / oid[:2] / oid[2:]


def _flip(path: Path, at: float = 0.5, cut: int = 0) -> None:
    data = bytearray(path.read_bytes())
    path.chmod(0o644)
    if cut:
        path.write_bytes(bytes(data[:-cut]))
        return
    data[int(len(data) * at)] ^= 0x01
    path.write_bytes(bytes(data))


def corruptions(commit: str) -> dict[str, Callable[[Path, Path], None]]:
    def pack(repo: Path) -> Path:
        sh_git(["repack", "-a", "-d", "-q"], repo)
        return next((repo / "objects" / "pack").glob("*.pack"))

    def replace_blob(main: Path, _sub: Path) -> None:
        target = _obj(main, f"{commit}:data.bin")
        target.chmod(0o644)
        shutil.copyfile(_obj(main, f"{commit}:a.txt"), target)

    return {
        "flipped-pack-byte": lambda m, _s: _flip(pack(m)),
        "flipped-pack-trailer": lambda m, _s: _flip(pack(m), at=0.999),
        "truncated-pack": lambda m, _s: _flip(pack(m), cut=40),
        "flipped-idx-byte": lambda m, _s: _flip(pack(m).with_suffix(".idx"), at=0.7),
        "replaced-blob": replace_blob,
        "deleted-blob": lambda m, _s: _obj(m, f"{commit}:data.bin").unlink(),
        "deleted-tree": lambda m, _s: _obj(m, f"{commit}^{{tree}}").unlink(),
        "deleted-pin-ref": lambda m, _s: (m / "refs" / "megacpp" / "pins" / commit).unlink(),
        "deleted-submodule-blob": lambda _m, s: _sub_blob(s),
        "deleted-submodule-pin-ref": lambda _m, s: [p.unlink() for p in (s / "refs/megacpp/pins").iterdir()],
    }


def _sub_blob(sub: Path) -> None:
    ref = next((sub / "refs/megacpp/pins").iterdir()).name
    _obj(sub, f"{ref}:lib.txt").unlink()


def case_corrupt(k: Counts, base: Path) -> None:
    for i, name in enumerate(corruptions("")):
        up, root, commit, main, sub = _mirrored(k, base, f"c{i}")
        corruptions(commit)[name](main, sub)
        rc, out = k.run(MIRROR.format(root=str(root), url=up.as_uri(), commit=commit), base)
        k.bad("false_oks", rc == 0 and "ACTION unchanged" in out, f"{name}: re-run said unchanged")
        dest = base / f"c{i}-co"
        rc, _ = k.run(CHECKOUT.format(url=up.as_uri(), commit=commit, root=str(root), dest=str(dest)), base)
        k.bad("false_oks", rc != 0, f"{name}: the mirror re-run passed does not serve a checkout")


def case_hole(k: Counts, base: Path) -> None:
    up, root, commit, main, _sub = _mirrored(k, base, "h")
    _obj(main, f"{commit}:data.bin").unlink()
    dest = base / "h-co"
    k.run(CHECKOUT.format(url=up.as_uri(), commit=commit, root=str(root), dest=str(dest)), base)
    k.bad("partials", dest.exists() + len(list(base.glob(".h-co.partial-*"))), "checkout from a mirror with a hole")
    k.run(MIRROR.format(root=str(root), url=up.as_uri(), commit=commit), base)
    rc, _ = k.run(CHECKOUT.format(url=up.as_uri(), commit=commit, root=str(root), dest=str(dest)), base)
    k.bad("wedges", rc != 0, "checkout after the hole was repaired")


def case_kills(k: Counts, base: Path) -> None:
    up, root, commit, _main, _sub = _mirrored(k, base, "k")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(k.tmp / "home")}
    for i, delay in enumerate((0.35, 0.5, 0.7, 0.9, 1.2)):
        fresh = base / f"k{i}-mirror"
        jobs = {
            "mirror": (MIRROR.format(root=str(fresh), url=up.as_uri(), commit=commit), fresh / "sources", ".demo."),
            "checkout": (CHECKOUT.format(url=up.as_uri(), commit=commit, root=str(root), dest=str(base / f"k{i}-co")),
                         base, f".k{i}-co.partial-"),
        }  # fmt: skip
        for code, where, prefix in jobs.values():
            k.c["commands"] += 1
            p = subprocess.Popen([sys.executable, "-c", code], cwd=base, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            time.sleep(delay)
            p.send_signal(signal.SIGKILL)
            p.wait()
            rc, _ = k.run(code, base)
            k.bad("wedges", rc != 0, f"re-run after SIGKILL at {delay}s: {code.splitlines()[-1][:60]}")
            left = [e.name for e in where.glob(f"{prefix}*") if "partial" in e.name or ".old-" in e.name]
            k.bad("partials", len(left), f"left after SIGKILL at {delay}s and a re-run: {left}")


def case_offline(k: Counts, base: Path) -> None:
    up, root, commit, _main, _sub = _mirrored(k, base, "o")
    other = base / "o-other"
    other_commit = make_repo(other, {"o.txt": "o\n"})
    rc, _ = k.run(
        CHECKOUT.format(url=other.as_uri(), commit=other_commit, root=str(root), dest=str(base / "o-co")), base
    )
    k.bad("false_oks", rc == 0, "checkout with a mirror lacking the pin fetched from a local upstream")
    index = root / "sources" / "demo" / "index.json"
    doc = json.loads(index.read_text())
    doc["repos"] = {u: e for u, e in doc["repos"].items() if u == up.as_uri()}  # the submodule's URL dropped
    index.write_text(json.dumps(doc))
    rc, _ = k.run(CHECKOUT.format(url=up.as_uri(), commit=commit, root=str(root), dest=str(base / "o-co3")), base)
    k.bad("false_oks", rc == 0, "checkout with a mirror lacking a submodule fetched it from its local upstream")
    spec = ROOT / "stack.yaml"
    empty = base / "o-empty"
    (empty / "sources" / "megacpp_smoke_ext").mkdir(parents=True)
    (empty / "sources" / "megacpp_smoke_ext" / "index.json").write_text(
        '{"schema_version": 1, "source": "megacpp_smoke_ext", "repos": {}}'
    )
    rc = k.cli(
        ["checkout", "megacpp_smoke_ext", "--mirror", str(empty), "--dest", str(base / "o-co2"), "--spec", str(spec)],
        base,
    )
    k.bad("false_oks", rc == 0, "checkout --mirror lacking the pin fetched from the network")


def case_inputs(k: Counts, base: Path) -> None:
    spec = str(ROOT / "stack.yaml")
    bad = {
        "truncated": b'{"schema_version": 1, "sources": {"demo": {"pa',
        "wrong-types": b'{"schema_version": "1", "sources": ["demo"]}',
        "wrong-entry": b'{"schema_version": 1, "sources": {"demo": 7}}',
        "deep": b'{"schema_version": 1, "sources": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "huge": b'{"schema_version": 1, "x": "' + b"a" * (80 << 20) + b'"}',
        "non-utf8": b'{"schema_version": 1, "sources": {"\xff\xfe": {}}}',
        "schema": b'{"schema_version": 99, "sources": {}}',
        "array": b"[1, 2, 3]",
    }
    for name, data in bad.items():
        root = base / f"i-{name}"
        root.mkdir()
        (root / "index.json").write_bytes(data)
        k.cli(["mirror-sources", "smoke", "--to", str(root), "--spec", spec], base)
        (root / "index.json").unlink()
        (root / "sources" / "megacpp_smoke_ext").mkdir(parents=True, exist_ok=True)
        (root / "sources" / "megacpp_smoke_ext" / "index.json").write_bytes(data)
        k.cli(
            [
                "checkout",
                "megacpp_smoke_ext",
                "--mirror",
                str(root),
                "--dest",
                str(base / f"i-co-{name}"),
                "--spec",
                spec,
            ],
            base,
        )
    blocker = base / "i-file"
    blocker.write_text("x")
    (base / "i-link").symlink_to(blocker)
    for to in (blocker, blocker / "sub", Path("/proc/megacpp-x"), base / "i-link", Path("/proc/self/x")):
        k.cli(["mirror-sources", "smoke", "--to", str(to), "--spec", spec], base)
    k.c["escapes"] += blocker.read_text() != "x"


def run(tmp: Path) -> dict[str, int]:
    tmp = Path(tmp)
    (tmp / "home").mkdir(parents=True, exist_ok=True)
    k = Counts(tmp)
    for case in (case_urls, case_corrupt, case_hole, case_kills, case_offline, case_inputs):
        base = tmp / case.__name__
        base.mkdir()
        case(k, base)
    k.pwned()
    NOTES[:] = k.notes
    return k.c


NOTES: list[str] = []


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="adv-r3-git-") as d:
        print(json.dumps(run(Path(d)), indent=None))
        for line in NOTES:
            print(line, file=sys.stderr)
