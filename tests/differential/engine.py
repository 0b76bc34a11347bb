"""Run one mutation and compare the warm answer with the ``--no-cache`` one.

For each mutation, in a fresh copy of the world (``World.reset``): the ``setup`` steps, the git
index refreshed, every changed mtime put back in the past, the caches warmed by ``WARM_UPS``
snapshots (and, for a mutation that asks, the example's own golden taken); then the ``change``
steps, and four answers from the CLI (``toolserver.py``):

- warm:  ``snapshot --check-golden g --json`` and ``run --golden g --json -- true``, each from the
         same warmed (and mutated) cache: the cache is saved before the first and put back before
         the second, FIFOs, owners and modes included;
- cold:  the same check with ``--no-cache``, and ``run`` with an empty cache directory (it has no
         ``--no-cache``).

An answer is the exit codes, the snapshot digests and the drift findings (``diff GOLDEN LIVE
--json`` of the document the check printed; ``run``'s drift summary). The warm answer must equal
the cold one. Besides, no call may hang, crash (exit 3, a traceback) or answer outside 0/1, and
the cold check must see what the mutation claims (``Mutation.drift``).
"""

from __future__ import annotations

import io
import json
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.differential.client import Call, ToolServer
from tests.differential.mutations import Mutation
from tests.differential.world import GOLDEN, World, backdate, remove_tree

WARM_UPS = 1  # one snapshot fills every cache (test_one_snapshot_warms_every_cache)
TIMEOUT = 10.0  # seconds per CLI call: a snapshot of this world takes well under one
COARSE_CLOCK = 0.05  # seconds: more than a kernel tick (ctimes come from the coarse clock)
MEMORY_KIB = 1 << 20  # a call that needs more than 1 GiB for this world reads without bound


@dataclass(frozen=True, kw_only=True, slots=True)
class Answer:
    check: str  # "exit N" or "timed out"
    digest: str
    findings: tuple[str, ...]
    run: str
    run_digest: str
    run_findings: tuple[str, ...]

    def lines(self) -> list[str]:
        return [
            f"check: {self.check}, digest {self.digest or '-'}",
            *(f"  {f}" for f in self.findings),
            f"run: {self.run}, digest {self.run_digest or '-'}",
            *(f"  {f}" for f in self.run_findings),
        ]


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    mutation: Mutation
    label: str  # the mutation's class, with the cache entry it hit
    applied: tuple[str, ...]
    warm: Answer
    cold: Answer
    problems: tuple[str, ...]  # hangs, crashes, exit codes outside 0/1

    @property
    def diverged(self) -> bool:
        return self.warm != self.cold

    @property
    def blind(self) -> bool:
        """The cold check missed drift the mutation made, or saw drift where only a cache changed."""
        drift = self.mutation.drift
        return drift is not None and self.cold.check != ("exit 1" if drift else "exit 0")

    @property
    def ok(self) -> bool:
        return not (self.diverged or self.blind or self.problems)

    def verdict(self) -> str:
        parts = ["warm != cold"] if self.diverged else []
        parts += ["cold check blind to the mutation"] if self.blind else []
        return ", ".join(parts + list(self.problems)) or "ok"

    def report(self) -> str:
        return "\n".join(
            [
                f"[{self.label}] {self.verdict()}",
                f"  mutation: {self.mutation}",
                *(f"  did: {a}" for a in self.applied),
                "  warm:",
                *(f"    {line}" for line in self.warm.lines()),
                "  cold:",
                *(f"    {line}" for line in self.cold.lines()),
            ]
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Example:
    """What every CLI call of one example shares: its environment and the golden it checks."""

    env: dict[str, str]
    golden_dir: Path


class Differential:
    """The corpus runner for one tool copy (its ``ToolServer``) and one world."""

    def __init__(self, server: ToolServer, world: World, template: Path, golden_dir: Path) -> None:
        self.server = server
        self.world = world
        self.template = template
        self.golden_dir = golden_dir

    # ---- the calls -------------------------------------------------------------------------------

    def _call(self, argv: list[str], env: dict[str, str]) -> Call:
        return self.server.call(argv, env=env, cwd=self.world.cwd, timeout=TIMEOUT)

    def _snapshot(self, golden_dir: Path, *extra: str) -> list[str]:
        w = self.world
        where = ["--python", str(w.python), "--paths", str(w.checkout), "--golden-dir", str(golden_dir)]
        return ["snapshot", *where, "--json", *extra]

    def _run(self, golden_dir: Path) -> list[str]:
        where = ["--golden-dir", str(golden_dir), "--record", str(self.world.runs)]
        return ["run", "--golden", GOLDEN, *where, "--json", "--", "true"]

    def take_golden(self) -> None:
        """Golden ``g`` of the untouched world, by this tool copy."""
        self.prepare(Mutation(cls="golden", drift=None))
        call = self._call(self._snapshot(self.golden_dir, "--golden", GOLDEN), self.world.env())
        if call.code != 0:
            raise RuntimeError(f"the golden could not be taken ({call.describe()}):\n{call.stderr[-3000:]}")

    # ---- one mutation ----------------------------------------------------------------------------

    def prepare(self, mutation: Mutation) -> float:
        """A fresh world with the mutation's setup done, as if long ago (nothing in the racy window);
        returns when its git index was refreshed."""
        started = time.time()
        self.world.reset(self.template)
        for step in mutation.setup:
            step.apply(self.world)
        self.world.git("update-index", "-q", "--refresh", env=mutation.env(self.world))
        refreshed = time.time()
        backdate(self.world.root, since=started)
        return refreshed

    def warm_up(self, env: dict[str, str]) -> list[str]:
        """``WARM_UPS`` plain snapshots (each must exit 0): the caches as a box that ran them has them."""
        problems = []
        for _ in range(WARM_UPS):
            call = self._call(self._snapshot(self.golden_dir), env)
            problems += _problems(call, "warm-up") or ([f"warm-up {call.describe()}"] if call.code != 0 else [])
        return problems

    def run(self, mutation: Mutation) -> Outcome:
        refreshed = self.prepare(mutation)
        env = self.world.env(extra=mutation.env(self.world))
        problems = self.warm_up(env)
        if mutation.cls.startswith("checkout."):
            _next_second(refreshed)
        example = Example(env=env, golden_dir=self._own_golden(env) if mutation.golden_after_setup else self.golden_dir)
        tags = [t for t in (step.tag(self.world) for step in mutation.change) if t]
        applied = tuple(step.apply(self.world) for step in mutation.change)
        warm, cold = self._answers(example, problems)
        label = f"{mutation.cls}[{','.join(tags)}]" if tags else mutation.cls
        return Outcome(mutation=mutation, label=label, applied=applied, warm=warm, cold=cold, problems=tuple(problems))

    def _own_golden(self, env: dict[str, str]) -> Path:
        """This example's golden, of its world as the setup left it (a tool may refuse to store it:
        then every check of the example says so, warm and cold alike)."""
        golden_dir = self.world.root / "golden"
        self._call(self._snapshot(golden_dir, "--golden", GOLDEN), env)
        return golden_dir

    def _answers(self, example: Example, problems: list[str]) -> tuple[Answer, Answer]:
        env, golden_dir = example.env, example.golden_dir
        saved = save_tree(self.world.cache)
        warm_check = self._call(self._snapshot(golden_dir, "--check-golden", GOLDEN), env)
        restore_tree(self.world.cache, saved)
        warm_run = self._call(self._run(golden_dir), env)
        cold_check = self._call(self._snapshot(golden_dir, "--check-golden", GOLDEN, "--no-cache"), env)
        cold_run = self._call(self._run(golden_dir), {**env, "MEGACPP_ENV_CACHE_DIR": str(self.world.cold_cache)})
        calls = {"warm check": warm_check, "warm run": warm_run, "cold check": cold_check, "cold run": cold_run}
        for name, call in calls.items():
            problems += _problems(call, name)
        warm = self._answer(warm_check, warm_run, "warm", golden_dir)
        return warm, self._answer(cold_check, cold_run, "cold", golden_dir)

    def _answer(self, check: Call, run: Call, name: str, golden_dir: Path) -> Answer:
        document = _json(check.stdout)
        digest = str(document.get("digest", "")) if document else ""
        findings = self._findings(check.stdout, name, golden_dir) if document else (_no_json(check),)
        record = _json(run.stdout)
        summary = record.get("drift_summary") if record else None
        run_findings = tuple(summary.get("findings", [])) if isinstance(summary, dict) else (_no_json(run),)
        return Answer(
            check=check.describe(),
            digest=digest,
            findings=findings,
            run=run.describe(),
            run_digest=str(record.get("snapshot_digest", "")) if record else "",
            run_findings=run_findings,
        )

    def _findings(self, document: str, name: str, golden_dir: Path) -> tuple[str, ...]:
        """The drift findings of ``diff GOLDEN LIVE --json`` (notes are not drift: left out)."""
        live = self.world.root / f"live-{name}.json"
        live.write_text(document)
        call = self._call(["diff", str(golden_dir / f"{GOLDEN}.json"), str(live), "--json"], self.world.env())
        report = _json(call.stdout)
        if not report:
            return (_no_json(call),)
        found = [f"{f['severity']} {f['key']}: {f['message']}" for f in report["findings"] if f["severity"] != "note"]
        return tuple(sorted(found))


def _next_second(since: float) -> None:
    """Wait until the clock's second is past that of ``since``. git compares the ctime it keeps in
    the index in whole seconds: an edit in the second of the index refresh is invisible to git's own
    stat check with any setting, so whether a warm path built on it sees the edit would depend on
    how long the warm-up took. After this wait, only the mutation's git settings decide. (A file's
    ctime comes from the kernel's coarse clock, a tick behind ``time.time()``: hence the margin.)"""
    wait = int(since) + 1 + COARSE_CLOCK - time.time()
    if wait > 0:
        time.sleep(wait)


def _json(text: str) -> dict[str, Any] | None:
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _no_json(call: Call) -> str:
    last = (call.stderr.strip().splitlines() or [""])[-1]
    return f"<no JSON answer ({call.describe()}): {last[:200]}>"


def _problems(call: Call, name: str) -> list[str]:
    out = []
    if call.timed_out:
        out.append(f"{name} hung (killed after {TIMEOUT:g}s)")
    elif call.code not in (0, 1):
        out.append(f"{name} exit {call.code}")
    if call.peak_kib > MEMORY_KIB:
        out.append(f"{name} took {call.peak_kib >> 10} MiB of memory")
    if "Traceback (most recent call last)" in call.stderr:
        out.append(f"{name} printed a traceback")
    return out


def save_tree(path: Path) -> bytes:
    """``path`` as a tar in memory: FIFOs, symlinks, owners, modes and mtimes as they are (nothing read
    through a FIFO or a link)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(path, arcname=".")
    return buf.getvalue()


def restore_tree(path: Path, blob: bytes) -> None:
    if path.exists() or path.is_symlink():
        remove_tree(path)
    path.mkdir()
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(path, numeric_owner=True, filter="fully_trusted")
