"""``bisect-check GOLDEN``: before a bisect step blames the code, prove the environment is the
golden's. Two checks, from the worktree at the candidate commit:

1. the snapshot digest equals the golden's: the same interpreter, distributions, installed files,
   checkouts, variables ... (what the golden inspected, warm cache). The worktree under bisect is
   left out on both sides: its commit changes at every step and is what is being tested, not the
   environment. The run record is never part of a snapshot.
2. the project's own package imports from the worktree (``find_spec`` in the inspected interpreter,
   from the worktree, as a script run there would): a stale copy in ``site-packages`` or another
   checkout earlier on ``sys.path`` means the commit under test is not the code that would run.
   Tracked files changed in the worktree mean the same.

``git bisect run`` reads exit 0 as good, 125 as skip: a drifted environment skips the commit
instead of marking it bad (the command maps its own errors to 128, which aborts the bisect).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env import git
from megacpp_env.errors import MegacppEnvError, SpecError
from megacpp_env.repro.goldens import GoldenRef, find, options_like, spec_loader, spec_once
from megacpp_env.snapshot.collect import take_snapshot
from megacpp_env.snapshot.context import SnapshotOptions
from megacpp_env.snapshot.diff import DiffReport, diff_snapshots
from megacpp_env.snapshot.document import Snapshot
from megacpp_env.snapshot.interpreter import interpreter_for
from megacpp_env.snapshot.proc import run_program
from megacpp_env.worktree import content

if TYPE_CHECKING:
    pass

EXIT_MATCH = 0
EXIT_SKIP = 125  # git bisect run: "cannot test this commit"
FIND_SPEC = (
    "import importlib.util, sys; s = importlib.util.find_spec(sys.argv[1]); print(s.origin if s and s.origin else '')"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class BisectVerdict:
    golden: str
    worktree: str
    package: str
    golden_digest: str  # of the golden's facts without the worktree
    live_digest: str
    origin: str  # where the package imports from ('' when it does not import)
    problems: tuple[str, ...]
    report: DiffReport

    @property
    def match(self) -> bool:
        return not self.problems

    @property
    def exit_code(self) -> int:
        return EXIT_MATCH if self.match else EXIT_SKIP

    def to_dict(self) -> dict[str, Any]:
        return {
            "match": self.match, "exit_code": self.exit_code, "golden": self.golden, "worktree": self.worktree,
            "package": self.package, "golden_digest": self.golden_digest, "live_digest": self.live_digest,
            "origin": self.origin, "problems": list(self.problems), "diff": self.report.to_dict(),
        }  # fmt: skip


def default_package(worktree: Path) -> str:
    """The import name of the worktree's project: ``[project].name`` of its pyproject.toml with
    '-'/'.' as '_', else the worktree's directory name; ``--package`` when neither is right."""
    try:
        name = tomllib.loads((worktree / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]
    except (OSError, KeyError, TypeError, ValueError):
        name = worktree.resolve().name
    module = re.sub(r"[-.]+", "_", str(name)).lower()
    if not module.isidentifier():
        raise SpecError(
            f"cannot tell the package of {worktree} ({name!r})", key="--package", remedy="pass --package NAME"
        )
    return module


def without(facts: Mapping[str, Any], worktree: Path) -> dict[str, Any]:
    """``facts`` with the worktree under bisect left out of the checkouts."""
    real = os.path.realpath(worktree)
    out = dict(facts)
    checkouts = out.get("checkouts")
    if isinstance(checkouts, Mapping):
        out["checkouts"] = {k: v for k, v in checkouts.items() if not _is(v, real)}
    return out


def _is(entry: Any, real: str) -> bool:
    return isinstance(entry, Mapping) and isinstance(entry.get("path"), str) and os.path.realpath(entry["path"]) == real


def import_origin(python: str, package: str, worktree: Path, environ: Mapping[str, str]) -> str:
    """Where ``package`` is found by ``python`` run from ``worktree`` (not imported: its code does not run)."""
    result = run_program([python, "-c", FIND_SPEC, package], timeout=60, env=dict(environ), cwd=str(worktree))
    return result.stdout.strip()


def _inside(path: str, root: Path) -> bool:
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip("/") + "/")


def _tracked_changes(worktree: Path) -> list[str]:
    try:
        return [c.path for c in content.read(worktree).delta.changes() if c.status != "?"]
    except MegacppEnvError:
        return []


def outside_git(environ: Mapping[str, str], golden: Snapshot) -> dict[str, str]:
    """The environment as the user set it: ``git bisect run`` puts git's exec-path (``git
    --exec-path``) first on PATH for the command it runs; that is git's, not the environment's."""
    env = dict(environ)
    golden_path = str((golden.area("env").get("variables") or {}).get("PATH", ""))
    try:
        exec_path = git.git_text(["--exec-path"])
    except MegacppEnvError:
        return env
    parts = env.get("PATH", "").split(os.pathsep)
    while parts and parts[0] == exec_path and not golden_path.startswith(exec_path):
        parts.pop(0)
    env["PATH"] = os.pathsep.join(parts)
    return env


def bisect_check(golden: GoldenRef, opts: SnapshotOptions, *, worktree: Path, package: str) -> BisectVerdict:
    environ = outside_git(os.environ if opts.environ is None else opts.environ, golden.snapshot)
    opts = replace(_without_worktree(opts, worktree), environ=environ)
    live = take_snapshot(opts)
    a = Snapshot(facts=without(golden.snapshot.facts, worktree), host=golden.snapshot.host)
    b = Snapshot(facts=without(live.facts, worktree), host=live.host)
    report = diff_snapshots(a, b, a_label=f"golden {golden.name}", b_label="live")
    problems = [f"environment drifted: {f.message}" for f in report.findings if f.severity != "note"][:20]
    if a.digest != b.digest and not problems:
        problems.append(f"snapshot digest {b.digest} differs from the golden's {a.digest}")
    origin = import_origin(interpreter_for(opts.python, environ), package, worktree, environ)
    if not origin:
        problems.append(f"package {package} does not import from {worktree}")
    elif not _inside(origin, worktree):
        problems.append(f"package {package} imports from {origin}, not from the worktree {worktree}")
    changed = _tracked_changes(worktree)
    if changed:
        problems.append(
            f"the worktree has uncommitted changes to {len(changed)} tracked file(s) ({', '.join(changed[:5])})"
        )
    return BisectVerdict(
        golden=golden.name, worktree=str(worktree), package=package, golden_digest=a.digest, live_digest=b.digest,
        origin=origin, problems=tuple(problems), report=report,
    )  # fmt: skip


def _without_worktree(opts: SnapshotOptions, worktree: Path) -> SnapshotOptions:
    real = os.path.realpath(worktree)
    return replace(opts, paths=tuple(p for p in opts.paths if os.path.realpath(p) != real))


def check_golden(
    golden: str, golden_dir: Path | None, spec_path: Path | None, *, worktree: Path, package: str | None,
    python: str | None,
) -> tuple[GoldenRef, str, BisectVerdict]:  # fmt: skip
    """``bisect-check GOLDEN``: is this environment the golden's, with ``package`` (default: the
    worktree's) imported from the worktree? The golden, the package and the verdict. The spec at
    ``spec_path`` is loaded only when needed (``goldens.spec_once``)."""
    spec = spec_once(spec_path)
    ref = find(golden, golden_dir, spec)
    package = package or default_package(worktree)
    opts = options_like(
        ref.snapshot,
        python=python,
        paths=None,
        spec=spec_loader(ref.snapshot, spec),
        command="megacpp-env bisect-check",
    )
    return ref, package, bisect_check(ref, opts, worktree=worktree, package=package)
