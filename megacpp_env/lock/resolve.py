"""Resolve one lock (target + platform) with ``uv pip compile`` and turn uv's PEP 751 output into
the committed lock: packages tagged with their index and ``direct`` flag, ``[tool.megacpp-env]``
recording the inputs hash, the uv version and the commands.

Explicit indexes: uv's ``--index`` + ``--index-strategy first-index`` does NOT restrict a package to
an index (uv takes *any* package the first index has -- numpy from the torch index). The restriction
that works is a generated ``pyproject.toml`` with ``[[tool.uv.index]] explicit = true`` and
``[tool.uv.sources] torch = { index = ... }`` (verified against a local index: tests/test_lock_resolve.py).
uv applies sources to direct dependencies only: a transitive package of an explicit index (pytorch-triton
under torch) would be looked up on the default index -- uv then fails, or silently picks an older torch
that does not need it. So when a direct requirement uses an explicit index, a probe run (requirements
format, ``# via`` annotations) resolves with every package of that index made direct and keeps, for the
final run, those that another package requires.

Re-locking moves only what was asked (``Relock``): the committed lock is written where uv writes its
output, which uv reads as its preferences (it keeps each locked version the requirements still allow);
``upgrade_packages`` are the exceptions (``uv --upgrade-package``); no previous lock (``lock --upgrade``)
resolves from scratch. ``exclude_newer`` is uv's upload-time cutoff: a file uploaded later does not
exist for the resolution, so the same inputs give the same lock on another day even from scratch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from megacpp_env import uv
from megacpp_env.errors import ToolError
from megacpp_env.fsutil import owned_tempdir
from megacpp_env.lock.inputs import LockInputs
from megacpp_env.lock.outputs import lock_command
from megacpp_env.lock.pylock import Lock, LockedPackage, LockMeta, read_pylock, render_pylock
from megacpp_env.lock.reqtxt import read_via
from megacpp_env.tomlwrite import dumps

INPUT_PROJECT = "megacpp-lock-input"
OVERRIDES_FILE = "overrides.txt"


@dataclass(frozen=True, kw_only=True, slots=True)
class Relock:
    """What a resolution keeps of the lock it replaces (see the module doc)."""

    previous: Lock | None = None  # the committed lock: uv's preferences; None resolves from scratch
    upgrade_packages: tuple[str, ...] = ()  # canonical names uv may move anyway
    exclude_newer: str = ""  # RFC 3339 UTC; "" for no cutoff

    def pylock_text(self) -> str:
        """The previous lock as uv reads preferences from its ``-o pylock.toml`` output."""
        return render_pylock(replace(self.previous, meta=None, path="")) if self.previous else ""

    def pins_text(self) -> str:
        """The previous lock as ``requirements.txt`` pins (the probe's output format)."""
        if self.previous is None:
            return ""
        pins = [f"{p.name}=={p.version}" + (f" ; {p.marker}" if p.marker else "")
                for p in self.previous.packages if p.version and p.vcs is None]  # fmt: skip
        return "".join(f"{pin}\n" for pin in pins)


FRESH = Relock()


@dataclass(frozen=True, kw_only=True, slots=True)
class Resolved:
    inputs: LockInputs
    lock: Lock
    seconds: float
    uv_runs: int


def input_project(inputs: LockInputs, extra_direct: Sequence[str] = ()) -> str:
    """The generated pyproject.toml uv resolves: requirements, explicit indexes, sources."""
    project = {
        "name": INPUT_PROJECT,
        "version": "0",
        "requires-python": f">={inputs.python}",
        "dependencies": [*inputs.requirements, *extra_direct],
    }
    uv_table: dict[str, Any] = {}
    if inputs.indexes:
        uv_table["index"] = [{"name": i.name, "url": i.url, "explicit": i.explicit} for i in inputs.indexes]
    sources = sorted((canonicalize_name(p), i.name) for i in inputs.indexes if i.explicit for p in i.packages)
    if sources:
        uv_table["sources"] = {name: {"index": index} for name, index in sources}
    return dumps({"project": project, **({"tool": {"uv": uv_table}} if uv_table else {})})


def _request(
    inputs: LockInputs, work: Path, constraints: Path | None, relock: Relock, fmt: str = "pylock.toml"
) -> uv.CompileRequest:
    """The uv run, with the previous lock written as its output: uv's preferences."""
    req = uv.CompileRequest(
        workdir=work,
        python_version=inputs.python,
        python_platform=uv.python_platform(inputs.platform),
        prerelease_packages=inputs.prerelease_packages(),
        constraints=constraints,
        overrides=_write_overrides(work, inputs.overrides),
        format=fmt,
        output="pylock.toml" if fmt == "pylock.toml" else "requirements.txt",
        exclude_newer=relock.exclude_newer,
        upgrade_packages=relock.upgrade_packages,
    )
    previous = relock.pylock_text() if fmt == "pylock.toml" else relock.pins_text()
    output = work / req.output
    if previous:
        output.write_text(previous, encoding="utf-8")
    else:
        output.unlink(missing_ok=True)  # an earlier pass's output is no preference
    return req


def _write_overrides(work: Path, overrides: Sequence[str]) -> Path | None:
    """``overrides.txt`` for uv (reviewed resolutions from the spec); None when there are none."""
    if not overrides:
        return None
    path = work / OVERRIDES_FILE
    path.write_text("".join(f"{o}\n" for o in overrides), encoding="utf-8")
    return path


def _run_compile(
    inputs: LockInputs, work: Path, extra: Sequence[str], constraints: Path | None, relock: Relock
) -> Lock:
    (work / "pyproject.toml").write_text(input_project(inputs, extra), encoding="utf-8")
    req = _request(inputs, work, constraints, relock)
    uv.pip_compile(req)
    return read_pylock(work / req.output)


def _probe_family(
    inputs: LockInputs, work: Path, family: Sequence[str], constraints: Path | None, relock: Relock
) -> list[str]:
    """Resolve with every package of the needed explicit indexes made direct (so each is routed through
    its index), then keep those some *other* package requires (pytorch-triton via torch). A family
    package that cannot be resolved (not on the index, conflicts) is dropped from the probe and retried."""
    probe = list(family)
    while True:
        (work / "pyproject.toml").write_text(input_project(inputs, probe), encoding="utf-8")
        req = _request(inputs, work, constraints, relock, fmt="requirements.txt")
        try:
            uv.pip_compile(req)
        except ToolError as exc:
            named = set(_named_in_error(exc, inputs, set(inputs.direct_names))) & set(probe)
            if not named:
                raise
            probe = [p for p in probe if p not in named]
            continue
        via = read_via((work / req.output).read_text(encoding="utf-8"))
        return sorted(name for name in probe if via.get(name, set()) - {""})


def _misrouted(lock: Lock, inputs: LockInputs, direct: set[str]) -> list[str]:
    """Packages of an explicit index that uv resolved as transitive (so not through their index)."""
    return sorted(p.name for p in lock.packages if inputs.index_of(p.name) is not None and p.name not in direct)


def _named_in_error(error: ToolError, inputs: LockInputs, direct: set[str]) -> list[str]:
    """Explicit-index packages, not direct, that uv's resolver error names (looked up in the wrong index)."""
    import re

    text = str(error).lower()
    names = {canonicalize_name(p) for i in inputs.indexes if i.explicit for p in i.packages} - direct
    return sorted(n for n in names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text.replace("_", "-")))


def _first_pass(
    inputs: LockInputs, work: Path, direct: set[str], cfile: Path | None, relock: Relock
) -> tuple[Lock | None, list[str]]:
    try:
        raw = _run_compile(inputs, work, (), cfile, relock)
    except ToolError as exc:
        if extra := _named_in_error(exc, inputs, direct):
            return None, extra
        raise
    return raw, _misrouted(raw, inputs, direct)


def _family(inputs: LockInputs, direct: set[str]) -> list[str]:
    """Packages of the explicit indexes the direct requirements need, that are not direct themselves."""
    return sorted({canonicalize_name(p) for i in inputs.needed_indexes() for p in i.packages} - direct)


def resolve(inputs: LockInputs, *, constraints: Mapping[str, str] | None = None, relock: Relock = FRESH) -> Resolved:
    """Resolve ``inputs`` with uv; the returned lock carries the tool table.

    uv runs once when no explicit index is involved; otherwise a probe pass finds which packages of the
    explicit index are needed transitively, and the final pass has exactly those made direct."""

    start = time.monotonic()
    direct = set(inputs.direct_names)
    with owned_tempdir("megacpp-lock-") as tmp:
        work = Path(tmp)
        cfile = _write_constraints(work, constraints)
        if family := _family(inputs, direct):
            extra = _probe_family(inputs, work, family, cfile, relock)
            raw: Lock | None = _run_compile(inputs, work, extra, cfile, relock)
            runs = 2
        else:
            raw, extra = _first_pass(inputs, work, direct, cfile, relock)
            runs = 1
            if extra:  # misrouted through the default index, or not found there
                raw = _run_compile(inputs, work, extra, cfile, relock)
                runs = 2
    assert raw is not None
    if still := _misrouted(raw, inputs, direct | set(extra)):
        raise ToolError(f"{inputs.target}: {', '.join(still)} not resolved from their explicit index")
    lock = finish_lock(
        raw, inputs, direct | set(extra), constraints_from=bool(constraints), exclude_newer=relock.exclude_newer
    )
    return Resolved(inputs=inputs, lock=lock, seconds=time.monotonic() - start, uv_runs=runs)


def _write_constraints(work: Path, constraints: Mapping[str, str] | None) -> Path | None:
    if not constraints:
        return None
    path = work / "constraints.txt"
    path.write_text("".join(f"{n}=={v}\n" for n, v in sorted(constraints.items())), encoding="utf-8")
    return path


def finish_lock(
    raw: Lock, inputs: LockInputs, direct: set[str], *, constraints_from: bool = False, exclude_newer: str = ""
) -> Lock:
    """Tag packages with index and direct flag; add ``[tool.megacpp-env]``."""
    default = uv.default_index()
    packages = tuple(replace(p, index=_index_url(p, inputs, default), direct=p.name in direct) for p in raw.packages)
    meta = LockMeta(
        target=inputs.target,
        part=inputs.part,
        platform=inputs.platform,
        python=inputs.python,
        python_platform=uv.python_platform(inputs.platform),
        inputs_hash=inputs.digest(),
        uv_version=uv.uv_version(),
        exclude_newer=exclude_newer,
        command=lock_command(inputs.target, inputs.platform),
        uv_command=" ".join(["uv", *uv.compile_args(_example_request(inputs, constraints_from, exclude_newer))]),
        direct=tuple(sorted(p.name for p in packages if p.direct)),
        requirements=tuple(inputs.requirements),
    )
    return Lock(packages=packages, requires_python=raw.requires_python, created_by="megacpp-env", meta=meta)


def _example_request(inputs: LockInputs, constraints: bool, exclude_newer: str) -> uv.CompileRequest:
    """The request as the lock records it: no upgrade flags (a later re-lock with the same inputs must
    write the same bytes)."""
    return uv.CompileRequest(
        workdir=Path(),
        python_version=inputs.python,
        python_platform=uv.python_platform(inputs.platform),
        prerelease_packages=inputs.prerelease_packages(),
        constraints=Path("constraints.txt") if constraints else None,
        overrides=Path(OVERRIDES_FILE) if inputs.overrides else None,
        exclude_newer=exclude_newer,
    )


def _index_url(pkg: LockedPackage, inputs: LockInputs, default: str) -> str:
    if pkg.vcs is not None:
        return ""
    index = inputs.index_of(pkg.name)
    return index.url.rstrip("/") if index is not None else default


def resolve_all(
    jobs: Sequence[LockInputs],
    *,
    constraints: Mapping[tuple[str, str], Mapping[str, str]] | None = None,
    relocks: Sequence[Relock] | None = None,
    on_done: Callable[[Resolved], None] | None = None,
    max_workers: int = 4,
) -> list[Resolved]:
    """Resolve several locks in parallel threads (each runs its own uv); results in ``jobs`` order."""

    def one(inputs: LockInputs, relock: Relock) -> Resolved:
        pins = (constraints or {}).get((inputs.target, inputs.platform))
        result = resolve(inputs, constraints=pins, relock=relock)
        if on_done is not None:
            on_done(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(jobs)))) as pool:
        return list(pool.map(one, jobs, relocks if relocks is not None else [FRESH] * len(jobs)))
