"""``build_source``: one pinned source into a wheel (or a verified checkout for ``install: path``).

Steps, each timed and reported through ``progress``:
  checkout   a real git checkout at the pin (``checkout.checkout_source``); with a source mirror,
             every fetch (submodules and build-time fetches too) comes from it through ``-c
             url.<mirror>.insteadOf=<pinned url>``, so the recorded origin stays the pinned URL
  verify     HEAD is the pin, no changes but a recorded overlay, submodules at their pinned commits
  overlay    apply, then verify, the plan's overlay (``overlays/<name>``)
  fetches    a verified checkout of each declared build-time fetch, its path in the named variable
  pre_build  the plan's commands (``bash -c``), in the build copy for a wheel source
  wheel      ``python -m pip wheel --no-deps --no-build-isolation --no-index`` with the plan's build
             env and the jobs formula's variables, out of tree: in a copy of the verified checkout
             (``<parent>/.<name>.build/src``, its TMPDIR and pip's output beside it), so a killed
             build never dirties the checkout; the next run (holding the same ``flock``) removes a
             killed run's copy. The wheel goes into ``--wheel-dir``, replacing only the wheels of
             the distribution this tool wrote there (``.megacpp-wheels.json``), never a user's own
  install    (optional) the wheel with ``--no-deps --no-index``, or a ``.pth`` for a path source
  sanity     (after install) ``python -P -m megacpp_env.sanity`` with the target's Python, the
             tool's source-build closure alone on its ``PYTHONPATH``
Never prints, never exits.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megacpp_env import checkout, overlay
from megacpp_env.errors import RefusedError, VerificationError
from megacpp_env.fsutil import atomic_write_text, sha256_file
from megacpp_env.srcbuild import closure, mirror
from megacpp_env.srcbuild.jobs import JobsDecision, Resources, decide, read_resources
from megacpp_env.srcbuild.plan import FetchPlan, SourcePlan, fetch_env
from megacpp_env.srcbuild.run import python_value, stream

Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class Step:
    """One step of a source build (checkout, overlay, build, install, sanity) and how long it took."""

    name: str
    seconds: float
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "seconds": round(self.seconds, 2), "detail": self.detail}


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceBuildResult:
    name: str
    target: str
    commit: str
    checkout: str
    wheel: str  # "" for a path source
    installed: bool
    jobs: JobsDecision
    steps: tuple[Step, ...]
    fetches: dict[str, str] = field(default_factory=dict)  # env var -> checkout path
    sanity: tuple[str, ...] = ()

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "target": self.target,
            "commit": self.commit,
            "checkout": self.checkout,
            "wheel": self.wheel,
            "installed": self.installed,
            "jobs": self.jobs.to_dict(),
            "steps": [s.to_dict() for s in self.steps],
            "seconds": round(self.seconds, 2),
            "fetches": dict(sorted(self.fetches.items())),
            "sanity": list(self.sanity),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildInputs:
    """Where a build reads from and writes to (the plan says what; this says where)."""

    python: Path  # the target venv's interpreter: builds the wheel, installs it, runs sanity
    workdir: Path  # the checkout (``/opt/src/<dist>`` in images)
    wheel_dir: Path
    overlays: Path | None = None  # the directory holding overlays/<name>
    mirror: Path | None = None  # a source mirror (``mirror-sources``); None: the pinned URLs
    jobs: int = 0  # --jobs N; 0: the formula
    install: bool = False
    sanity: bool = True
    resources: Resources | None = None  # None: read this machine's


class _Clock:
    def __init__(self, source: str, progress: Progress) -> None:
        self.source, self.progress, self.steps = source, progress, list[Step]()

    @contextmanager
    def step(self, name: str, detail: str = "") -> Iterator[None]:
        self.progress(f"[{self.source}] {name}{': ' + detail if detail else ''}")
        start = time.monotonic()
        yield
        self.steps.append(Step(name=name, seconds=time.monotonic() - start, detail=detail))


def build_source(plan: SourcePlan, inputs: BuildInputs, *, progress: Progress | None = None) -> SourceBuildResult:
    """Build ``plan`` as ``inputs`` say; raises StepFailedError / VerificationError / RefusedError."""
    say = progress or (lambda _line: None)
    clock = _Clock(plan.name, say)
    config = _mirror_config(plan, inputs.mirror)
    with clock.step("checkout", f"{plan.repo} @ {plan.commit}" + (f" from {inputs.mirror}" if inputs.mirror else "")):
        checkout.checkout_source(plan, inputs.workdir, git_config=config)
    with clock.step("verify"):
        _verify(plan, inputs.workdir)
    if plan.overlay:
        with clock.step("overlay", plan.overlay):
            _overlay(plan, inputs)
    with clock.step("fetches", ", ".join(f.env for f in plan.fetches) or "none"):
        fetched = {f.env: str(_fetch(f, inputs.workdir.parent, config)) for f in plan.fetches}
    decision = decide(plan.jobs, inputs.resources or read_resources(), jobs=inputs.jobs)
    env = _build_env(plan, decision, fetched)
    wheel = ""
    if plan.install == "wheel":
        with _build_area(plan, inputs.workdir) as area:
            env["TMPDIR"] = str(area / "tmp")
            _pre_build(plan, area / "src", env, clock, say)
            with clock.step("wheel", f"{decision.max_jobs} job(s): {decision.why}"):
                wheel = str(_wheel(plan, inputs, area, env, say))
    else:
        _pre_build(plan, inputs.workdir, env, clock, say)
    sanity: tuple[str, ...] = ()
    if inputs.install:
        with clock.step("install"):
            _install(plan, inputs, wheel)
        if inputs.sanity:
            with clock.step("sanity"):
                sanity = run_sanity([plan], inputs.python, say)
    return SourceBuildResult(
        name=plan.name,
        target=plan.target,
        commit=plan.commit,
        checkout=str(inputs.workdir),
        wheel=wheel,
        installed=inputs.install,
        jobs=decision,
        steps=tuple(clock.steps),
        fetches=fetched,
        sanity=sanity,
    )


def _mirror_config(plan: SourcePlan, root: Path | None) -> dict[str, str]:
    if root is None:
        return {}
    missing = mirror.missing_pins(
        root, plan.name, [(plan.repo, plan.commit), *((f.repo, f.commit) for f in plan.fetches)]
    )
    if missing:
        raise RefusedError(
            f"source mirror {root} lacks {', '.join(missing)} "
            f"(run `megacpp-env mirror-sources {plan.target} --to {root}`)"
        )
    return mirror.mirror_only_config(root, plan.name)  # nothing outside the mirror, not even a local repository


def _verify(plan: SourcePlan | FetchPlan, path: Path, overlay_dir: Path | None = None) -> None:
    """Judged by content: after the overlay, exactly the pin plus exactly the overlay's files."""
    result = checkout.verify_checkout(path, plan, overlay_dir=overlay_dir)
    if not result.ok:
        raise VerificationError(f"{plan.name}: {path} is not as pinned: " + "; ".join(result.problems))


def _overlay(plan: SourcePlan, inputs: BuildInputs) -> None:
    if inputs.overlays is None:
        raise RefusedError(f"{plan.name}: the plan names overlay {plan.overlay}; pass the overlays directory")
    directory = inputs.overlays / plan.overlay
    if not directory.is_dir():
        raise RefusedError(f"{plan.name}: overlay {plan.overlay} not found at {directory}")
    overlay.apply_overlay(directory, inputs.workdir)
    overlay.verify_overlay(directory, inputs.workdir)
    _verify(plan, inputs.workdir, directory)


def _fetch(fetch: FetchPlan, parent: Path, config: Mapping[str, str]) -> Path:
    """A verified checkout of the fetch; the variable points at its ``subdir`` when the plan names one (an
    environment variable only: CMake's own override names the root)."""
    dest = parent / fetch.name.replace("_", "-")
    checkout.checkout_source(fetch, dest, git_config=config)
    _verify(fetch, dest)
    target = (dest / fetch.subdir).resolve() if fetch.subdir else dest.resolve()
    if not target.is_dir() or not target.is_relative_to(dest.resolve()):
        raise VerificationError(f"{fetch.name}: no directory {fetch.subdir!r} in its checkout at {fetch.commit[:12]}")
    return target


def _build_env(plan: SourcePlan, decision: JobsDecision, fetched: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_REQUIRE_VIRTUALENV")}
    env.update(plan.build_env)
    env.update(decision.env)
    env = fetch_env(plan, env, fetched)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _pre_build(plan: SourcePlan, cwd: Path, env: dict[str, str], clock: _Clock, say: Progress) -> None:
    for i, command in enumerate(plan.pre_build):
        with clock.step(f"pre_build[{i}]", command):
            stream(["bash", "-c", command], cwd=cwd, env=env, source=plan.name, step=f"pre_build[{i}]", on_line=say)


@contextmanager
def _build_area(plan: SourcePlan, workdir: Path) -> Iterator[Path]:
    """``<parent>/.<name>.build``: ``src`` (a copy of the verified checkout, ``.git`` included, so a
    build that asks git for its version still can), ``tmp`` and ``dist``. One build at a time per
    checkout (a ``flock`` on ``.<name>.build.lock``, which the kernel drops when its holder dies);
    whoever holds it first removes a killed run's area. The path is the same every run, so compiler
    caches keyed on paths still hit. Removed when the build ends, whatever the outcome."""
    area = workdir.parent / f".{workdir.name}.build"
    lock = workdir.parent / f".{workdir.name}.build.lock"
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise RefusedError(f"{plan.name}: cannot open the build lock {lock}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise RefusedError(
                f"{plan.name}: another build of {workdir} is running (it holds {lock}); wait for it to end"
            ) from None
        _remove(area)  # a killed run's copy: its holder is gone, we hold the lock
        area.mkdir(mode=0o700)
        try:
            _copy_tree(workdir, area / "src")
            (area / "tmp").mkdir()
            (area / "dist").mkdir()
            yield area
        finally:
            _remove(area)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    """Remove ``path`` without following a symlink at it (a planted link is unlinked, not chased)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _copy_tree(src: Path, dest: Path) -> None:
    """A full copy, symlinks kept as links, modes and times kept (``cp -a``, copy-on-write where the
    filesystem offers it); Python's copytree where ``cp`` is missing or fails."""
    try:
        done = subprocess.run(["cp", "-a", "--reflink=auto", "--", str(src), str(dest)], capture_output=True,
                              check=False, timeout=3600).returncode == 0  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        done = False
    if not done:
        _remove(dest)
        shutil.copytree(src, dest, symlinks=True)


def _wheel(plan: SourcePlan, inputs: BuildInputs, area: Path, env: dict[str, str], say: Progress) -> Path:
    src = area / "src" / plan.subdir

    def run(args: list[str]) -> None:
        stream([str(inputs.python), "-m", "pip", *args], cwd=src, env=env, source=plan.name, step="wheel", on_line=say)

    return _keep_wheel(pip_wheel(src, area / "dist", run, what=plan.name), inputs.wheel_dir)


PIP_WHEEL = ("wheel", "--no-deps", "--no-build-isolation", "--no-index")


def pip_wheel(src: Path, out: Path, run: Callable[[list[str]], object], *, what: str) -> Path:
    """The one wheel ``pip wheel`` builds of ``src`` into the empty directory ``out``: no dependencies,
    no build isolation, no index (the interpreter's own build environment). ``run`` runs pip with the
    arguments it is given. The source build and ``reproduce``'s rebuild (``repro.rebuild``) both
    build this way."""
    run([*PIP_WHEEL, "--wheel-dir", str(out), str(src)])
    built = sorted(out.glob("*.whl"))
    if len(built) != 1:
        raise VerificationError(f"{what}: pip wheel made {len(built)} wheels, expected exactly one")
    return built[0]


RECORD = ".megacpp-wheels.json"  # in --wheel-dir: {file name: sha256} of the wheels this tool wrote there


def _keep_wheel(wheel: Path, wheel_dir: Path) -> Path:
    """Move ``wheel`` into ``wheel_dir``, replacing the earlier wheels of its distribution that this
    tool wrote there (named in the record with the same content); a user's own wheel is never removed,
    and one with the new wheel's name is refused."""
    wheel_dir.mkdir(parents=True, exist_ok=True)
    record = _read_record(wheel_dir / RECORD)
    dist = wheel.name.split("-", 1)[0]
    dest = wheel_dir / wheel.name
    ours = {name for name, digest in record.items() if _same_file(wheel_dir / name, digest)}
    if (dest.exists() or dest.is_symlink()) and wheel.name not in ours:
        raise RefusedError(
            f"{dest} exists and was not written by megacpp-env (not in {wheel_dir / RECORD} with its content): "
            "move it away or pass another --wheel-dir"
        )
    for name in sorted(ours):
        if name.split("-", 1)[0] == dist:
            (wheel_dir / name).unlink(missing_ok=True)
    kept = {name: digest for name, digest in record.items() if name in ours and name.split("-", 1)[0] != dist}
    shutil.move(str(wheel), dest)
    kept[wheel.name] = sha256_file(dest)
    atomic_write_text(wheel_dir / RECORD, json.dumps(dict(sorted(kept.items())), indent=2) + "\n")
    return dest.resolve()


def _read_record(path: Path) -> dict[str, str]:
    """The record, or {} when it is missing, not a regular file or malformed (then nothing is ours)."""
    try:
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 1 << 20:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        k: v
        for k, v in data.items()
        if isinstance(k, str) and isinstance(v, str) and k.endswith(".whl") and "/" not in k and not k.startswith(".")
    }


def _same_file(path: Path, digest: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode) and sha256_file(path) == digest
    except OSError:
        return False


def _install(plan: SourcePlan, inputs: BuildInputs, wheel: str) -> None:
    if plan.install == "path":
        purelib = python_value(inputs.python, "import sysconfig; print(sysconfig.get_paths()['purelib'])")
        pth = Path(purelib) / f"megacpp-src-{plan.dist}.pth"
        pth.write_text(f"{inputs.workdir.resolve()}\n", encoding="utf-8")
        return
    argv = [str(inputs.python), "-m", "pip", "install", "--no-deps", "--no-index", "--force-reinstall", wheel]
    stream(argv, cwd=inputs.wheel_dir, env=_quiet_pip_env(), source=plan.name, step="install", on_line=lambda _l: None)


def _quiet_pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def run_sanity(plans: list[SourcePlan], python: Path, say: Progress) -> tuple[str, ...]:
    """Each plan's sanity checks with ``python`` (a fresh interpreter per source, ``-P``); the tool's
    source-build closure alone on PYTHONPATH. Returns the report lines; raises on the first failure."""
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="megacpp-sanity-") as tmp:
        path = closure.copy_closure(Path(tmp) / "tool")
        env = {**_quiet_pip_env(), "PYTHONPATH": str(path)}
        for plan in plans:
            argv = [str(python), "-P", "-m", "megacpp_env.sanity", "--source", plan.name, *plan.sanity.args()]
            lines += stream(argv, cwd=Path(tmp), env=env, source=plan.name, step="sanity", on_line=say)
    return tuple(lines)
