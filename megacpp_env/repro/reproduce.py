"""``reproduce``: make the golden's environment again in other directories and prove it.

1. the interpreter (same implementation and version), 2. each captured checkout at
``--checkouts DIR/<name>`` (commit, submodules, diff, untracked files: proved by hash), 3. the venv
at ``--venv DIR``, made as the golden's was, 4. the distributions (``installs``), 5. the ``.pth``
path entries (``install: path`` checkouts on ``sys.path`` as in the golden), 6. a snapshot of the
result (its interpreter, its checkouts, the venv activated as the golden's was) compared with the
golden location-independently (``portable``). Identical means the two portable digests are equal
and nothing was left out. Never prints; ``say`` receives progress lines.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.errors import RefusedError
from megacpp_env.fsutil import atomic_write_text
from megacpp_env.repro import covered, installs, portable, pyenv, trees
from megacpp_env.repro.document import Capture
from megacpp_env.repro.goldens import GoldenRef, find, spec_once
from megacpp_env.repro.outcome import ReproduceReport, Unrecreated, render
from megacpp_env.snapshot.collect import SnapshotOptions, take_snapshot
from megacpp_env.snapshot.document import Snapshot

if TYPE_CHECKING:
    pass

Say = Callable[[str], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReproduceOptions:
    venv: Path
    checkouts: Path
    mirror: Path | None = None
    python: str | None = None
    environ: Mapping[str, str] | None = None  # the process environment by default
    cache_dir: Path | None = None  # the snapshot's hash cache


def _empty_or_absent(path: Path, option: str) -> None:
    if path.exists() and not (path.is_dir() and not any(path.iterdir())):
        raise RefusedError(f"{option} {path} exists and is not empty: reproduce makes it fresh (pass a new directory)")


def check(golden: GoldenRef, opts: ReproduceOptions) -> Capture:
    """Everything that can be refused before anything is made."""
    cap = golden.capture()
    if cap is None:
        raise RefusedError(
            f"golden {golden.name} has no capture ({golden.capture_file}): it was stored without one; store it "
            f"again with `megacpp-env snapshot --golden {golden.name}` on the machine it describes"
        )
    if cap.snapshot_digest != golden.snapshot.digest:
        raise RefusedError(
            f"{golden.capture_file} belongs to snapshot {cap.snapshot_digest}, not {golden.snapshot.digest}"
        )
    wrong = covered.disagreements(cap, golden.snapshot)
    if wrong:
        raise RefusedError(
            f"{golden.capture_file} disagrees with the hashed facts of golden {golden.name} (it was edited, or "
            f"belongs to another snapshot): {'; '.join(wrong[:5])}{' ...' if len(wrong) > 5 else ''}; store the "
            f"golden again with `megacpp-env snapshot --golden {golden.name}` on the machine it describes"
        )
    _empty_or_absent(opts.venv, "--venv")
    for c in cap.checkouts.values():
        _empty_or_absent(opts.checkouts / c.name, "--checkouts")
    if opts.mirror is not None and not opts.mirror.is_dir():
        raise RefusedError(f"--mirror {opts.mirror} is not a directory")
    return cap


def reproduce(golden: GoldenRef, opts: ReproduceOptions, say: Say = lambda _line: None) -> ReproduceReport:
    cap = check(golden, opts)
    opts = replace(opts, venv=opts.venv.absolute(), checkouts=opts.checkouts.absolute())
    clock: dict[str, float] = {}
    with _Step(clock, "python", say, f"finding Python {cap.python.version}"):
        python = pyenv.find_python(cap.python, opts.python)
    with _Step(clock, "checkouts", say, f"re-creating {len(cap.checkouts)} checkout(s)"):
        made, failed = _checkouts(golden, cap, opts, say)
    with _Step(clock, "venv", say, f"making the venv at {opts.venv}"):
        venv_python = pyenv.make_venv(python, opts.venv, cap.python, with_pip=_ensurepip(cap))
    prefix = opts.venv.absolute()
    roots = _roots(cap, prefix, made)
    with pyenv.scratch() as tmp, _Step(clock, "install", say, "installing distributions"):
        target = installs.Target(python=venv_python, prefix=prefix, roots=roots, checkouts=made, mirror=opts.mirror,
                                 work=Path(tmp))  # fmt: skip
        done = installs.install_all(cap, target, say)
    write_path_entries(cap, roots)
    with _Step(clock, "verify", say, "snapshot of the result, compared with the golden"):
        live = take_snapshot(_live_options(golden.snapshot, venv_python, prefix, made, opts))
        comparison = _compare(golden.snapshot, cap, live)
    return ReproduceReport(
        golden=golden.name, venv=str(prefix), python=python, checkouts={k: str(v) for k, v in made.items()},
        installed=done.done, unrecreated=(*failed, *done.failed, *machine(comparison)), comparison=comparison,
        notes=(*cap.problems, *done.notes), seconds=clock,
    )  # fmt: skip


class _Step:
    def __init__(self, clock: dict[str, float], name: str, say: Say, line: str) -> None:
        self.clock, self.name, self.say, self.line = clock, name, say, line

    def __enter__(self) -> None:
        self.say(self.line)
        self.start = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        self.clock[self.name] = time.monotonic() - self.start


def _ensurepip(cap: Capture) -> bool:
    pip = cap.distributions.get("pip")
    return pip is not None and pip.installer == "pip" and cap.python.maker == "venv"


def _checkouts(
    golden: GoldenRef, cap: Capture, opts: ReproduceOptions, say: Say
) -> tuple[dict[str, Path], list[Unrecreated]]:
    opts.checkouts.mkdir(parents=True, exist_ok=True)
    rewrites = trees.source_rewrites(opts.mirror)
    made: dict[str, Path] = {}
    failed: list[Unrecreated] = []
    for c in sorted(cap.checkouts.values(), key=lambda c: c.name):
        say(f"checkout {c.name} @ {str(c.head)[:12]}")
        dest = (opts.checkouts / c.name).absolute()
        problems = trees.recreate(c, dest, golden.store, rewrites)
        failed += problems
        if dest.is_dir():
            made[c.name] = dest
    return made, failed


def _roots(cap: Capture, prefix: Path, made: Mapping[str, Path]) -> portable.Roots:
    pairs = [(str(p), portable.checkout_token(name)) for name, p in made.items()]
    return portable.Roots.of([*pairs, (str(prefix), portable.VENV)])


def write_path_entries(cap: Capture, roots: portable.Roots) -> None:
    """The golden's unowned ``.pth`` files, their tokens resolved to the re-created paths."""
    prefix = Path(roots.resolve(portable.VENV)).resolve()
    for entry in cap.path_entries:
        site = Path(roots.resolve(entry.site))
        if not site.resolve().is_relative_to(prefix):
            raise RefusedError(f"path entry {entry.file}: {site} is outside the venv {prefix}")
        text = "".join(roots.resolve(line) + "\n" for line in entry.lines)
        atomic_write_text(site / entry.file, text)


def activated(environ: Mapping[str, str], golden: Snapshot, prefix: Path) -> dict[str, str]:
    """The process environment with the re-created venv active as the golden's was (VIRTUAL_ENV and
    its bin first on PATH), or with no venv active when the golden had none."""
    env = dict(environ)
    active, golden_prefix = env.pop("VIRTUAL_ENV", ""), str(portable.interpreter(golden).get("prefix") or "")
    gone = {f"{p}/bin" for p in (active, golden_prefix) if p}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and p not in gone]
    variables: Any = golden.area("env").get("variables") or {}
    if variables.get("VIRTUAL_ENV") == portable.interpreter(golden).get("prefix"):
        env["VIRTUAL_ENV"] = str(prefix)
        path.insert(0, str(prefix / "bin"))
    env["PATH"] = os.pathsep.join(path)
    return env


def _live_options(
    golden: Snapshot, python: Path, prefix: Path, made: Mapping[str, Path], opts: ReproduceOptions
) -> SnapshotOptions:
    environ = activated(os.environ if opts.environ is None else opts.environ, golden, prefix)
    return SnapshotOptions(python=str(python), paths=tuple(made.values()), environ=environ,
                           cache_dir=opts.cache_dir, command="megacpp-env reproduce (verification)")  # fmt: skip


def _compare(golden: Snapshot, cap: Capture, live: Snapshot) -> portable.Comparison:
    golden_roots = portable.roots_of(golden)
    golden_records = {k: d.portable_record for k, d in cap.distributions.items() if d.portable_record}
    live_roots = portable.roots_of(live)
    live_records = portable.live_record_digests(live, live_roots[1])
    return portable.compare(
        golden, portable.comparable(golden, golden_roots, golden_records),
        live, portable.comparable(live, live_roots, live_records),
    )  # fmt: skip


# What reproduce does not make (the machine around the venv and the checkouts), and what to do.
MACHINE = {
    "system": ("the operating system", "reproduce inside the image or OS the golden ran on; if that image's base is "
               "gone from its registry, rebuild it from the digest pinned in stack.yaml (megacpp-env build TARGET) "
               "or load a saved copy (docker load)"),
    "gpu": ("the GPUs and driver", "run on a machine with the golden's GPUs and driver"),
    "compilers": ("the compilers", "install the golden's toolchain (stack.yaml's toolchain pins) first on PATH"),
    "env": ("the environment variables", "set them as the golden had them (its snapshot's env.variables)"),
    "runtime": ("the runtime patches", "switch the MEGACPP_PATCH_* gates and hooks as in the golden"),
    "torch": ("torch's build facts", "install the golden's torch build (the lock's exact wheel)"),
}  # fmt: skip


def machine(comparison: portable.Comparison) -> list[Unrecreated]:
    """One entry per area of the machine that differs from the golden's, in words."""
    by_area: dict[str, list[str]] = {}
    for f in comparison.report.findings:
        if f.area in MACHINE and f.severity != "note":
            by_area.setdefault(f.area, []).append(f.message)
    return [
        Unrecreated(
            what=MACHINE[area][0],
            why="; ".join(messages[:3]) + (" ..." if len(messages) > 3 else ""),
            remedy=MACHINE[area][1],
        )
        for area, messages in sorted(by_area.items())
    ]


def reproduce_golden(
    golden: str, golden_dir: Path | None, spec_path: Path | None, opts: ReproduceOptions, say: Say
) -> tuple[ReproduceReport, str]:
    """``reproduce GOLDEN``: find the golden (by name: in the golden directory of the spec at
    ``spec_path``, loaded only then), make its environment again and prove it identical; the report and
    its text rendering."""
    report = reproduce(find(golden, golden_dir, spec_once(spec_path)), opts, say=say)
    return report, render(report)
