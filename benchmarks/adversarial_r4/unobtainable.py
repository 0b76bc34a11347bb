"""Issue 31, round 4, declared exceptions and submodules (defects 6, 7 and 10): `checkout`,
`verify-checkout` and `build-source`'s verification of trees with `unobtainable:` paths.

    python -m benchmarks.adversarial_r4.unobtainable      prints the counts as JSON

Classes:
  transport  a superproject served by a real git daemon whose .gitmodules names a repository of this
             machine (file://, FILE://, file://localhost, a plain path), with a declaration and without:
             `checkout` exiting 0, or the private repository's content under the destination, is an escape
  stand-ins  files, a .git git cannot use, a file or a link in place of a submodule that is not
             initialised, declared or not, with `submodules: false` too: `verify-checkout` exiting 0 is a
             false ok
  directory  a declared directory whose files are left out: `verify-checkout` refusing what `facts
             extract` accepts is a wedge (the two disagree); a stand-in put there and accepted, a false ok
Bad counts: tracebacks, hangs, escapes, false_oks, wedges.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.adversarial_r4._common import Counts, cli, git, git_daemon, make_repo, mini_spec  # noqa: E402

SECRET = "the private repository's content"


def transport(tmp: Path) -> Counts:
    counts = Counts()
    private = tmp / "private-repo"
    make_repo(private, {"secret.txt": SECRET + "\n"})
    served = tmp / "served"
    served.mkdir()
    with git_daemon(served) as base:
        forms = {"file": private.as_uri(), "FILE": "FILE://" + str(private), "localhost": f"file://localhost{private}",
                 "path": str(private), "dotdot": "../../../../../../../.." + str(private)}  # fmt: skip
        for i, (form, url) in enumerate(forms.items()):
            work = tmp / f"work-{i}"
            make_repo(work, {"README": "r\n"}, {"lib/private": private.as_uri(), "lib/gone": private.as_uri()})
            git(["config", "-f", ".gitmodules", "submodule.lib/private.url", url], work)
            git(["commit", "-q", "-am", "local url", "--allow-empty"], work)
            sha = git(["rev-parse", "HEAD"], work)
            git(["clone", "-q", "--bare", str(work), str(served / f"super-{i}.git")], tmp)
            for declared in ("    unobtainable: {lib/gone: gone}\n", ""):
                spec = mini_spec(tmp / f"spec-{i}-{bool(declared)}",
                                 f"  demo:\n    repo: {base}/super-{i}.git\n    commit: '{sha}'\n"
                                 f"    submodules: true\n{declared}")  # fmt: skip
                dest = tmp / f"dest-{i}-{bool(declared)}"
                rc, _out, _err = cli(counts, ["checkout", "demo", "--dest", str(dest), "--spec", str(spec)])
                pulled = dest.exists() and any(p.read_text() == SECRET + "\n" for p in dest.rglob("secret.txt"))
                if (rc == 0 and form != "dotdot") or pulled:
                    counts["escapes"] += 1
    return counts


STAND_INS = {
    "a file": lambda d: (d / "x.c").write_text("int x = evil();\n"),
    "a bogus .git": lambda d: ((d / ".git").write_text("gitdir: /nonexistent\n"), (d / "x.c").write_text("s")),
    "an empty .git dir": lambda d: ((d / ".git").mkdir(), (d / "x.c").write_text("s")),
    "a nested file": lambda d: ((d / "a/b").mkdir(parents=True), (d / "a/b/c.h").write_text("int c;\n")),
    "a hidden file": lambda d: (d / ".hidden").write_text("s"),
    "a link out": lambda d: (d / "link").symlink_to("/etc"),
    "a file in its place": lambda d: (d.rmdir(), d.write_text("stand-in\n")),
    "a link in its place": lambda d: (d.rmdir(), d.symlink_to("/tmp")),
}


def stand_ins(tmp: Path) -> Counts:
    counts = Counts()
    make_repo(tmp / "inner", {"x.c": "int x;\n"})
    sha = make_repo(tmp / "outer", {"README": "r\n"}, {"lib/gone": (tmp / "inner").as_uri()})
    shutil.rmtree(tmp / "inner")  # truly unobtainable: a declared submodule that can be had is checked out
    url = (tmp / "outer").as_uri()
    specs = {
        "declared": f"  demo:\n    repo: {url}\n    commit: '{sha}'\n    submodules: true\n"
                    "    unobtainable: {lib/gone: gone}\n",
        "submodules off": f"  demo:\n    repo: {url}\n    commit: '{sha}'\n    submodules: false\n",
    }  # fmt: skip
    for label, sources in specs.items():
        spec = mini_spec(tmp / f"spec-{label}", sources)
        pristine = tmp / f"pristine-{label}"
        rc, _out, err = cli(counts, ["checkout", "demo", "--dest", str(pristine), "--spec", str(spec)])
        assert rc == 0, err
        rc, _out, err = cli(counts, ["verify-checkout", str(pristine), "--expect", "demo", "--spec", str(spec)])
        assert rc == 0, err  # the control: as checked out, it verifies
        for i, plant in enumerate(STAND_INS.values()):
            case = tmp / f"case-{label}-{i}"
            shutil.copytree(pristine, case, symlinks=True)
            plant(case / "lib/gone")
            rc, _out, _err = cli(counts, ["verify-checkout", str(case), "--expect", "demo", "--spec", str(spec)])
            counts["false_oks"] += rc == 0
            rc, _out, _err = cli(counts, ["checkout", "demo", "--dest", str(case), "--spec", str(spec)])
            counts["false_oks"] += rc == 0
    return counts


def directory(tmp: Path) -> Counts:
    counts = Counts()
    sha = make_repo(tmp / "up", {"docs/a.png": "a", "docs/sub/b.png": "b", "src/x.c": "int x;\n"})
    spec = mini_spec(tmp / "spec", f"  demo:\n    repo: {(tmp / 'up').as_uri()}\n    commit: '{sha}'\n"
                                   "    unobtainable: {docs: too big}\n")  # fmt: skip
    dest = tmp / "dest"
    rc, _out, err = cli(counts, ["checkout", "demo", "--dest", str(dest), "--spec", str(spec)])
    assert rc == 0, err
    git(["sparse-checkout", "set", "--no-cone", "/*", "!/docs/"], dest)  # what facts extract accepts: S flags
    rc, _out, _err = cli(counts, ["verify-checkout", str(dest), "--expect", "demo", "--spec", str(spec)])
    counts["wedges"] += rc != 0
    (dest / "docs").mkdir(exist_ok=True)
    (dest / "docs/a.png").write_text("a stand-in")
    rc, _out, _err = cli(counts, ["verify-checkout", str(dest), "--expect", "demo", "--spec", str(spec)])
    counts["false_oks"] += rc == 0
    return counts


def run(tmp: Path) -> dict[str, int]:
    total = Counts()
    for case in (transport, stand_ins, directory):
        where = tmp / case.__name__
        where.mkdir()
        for key, value in case(where).items():
            total[key] += value
    return total


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="adv-r4-unobtainable-") as scratch:
        print(json.dumps(run(Path(scratch)), sort_keys=True))
