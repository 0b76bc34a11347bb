"""The corpus: mutations drawn by hypothesis, class by class, then run by a ``Differential``.

Drawing and running are apart: the corpus is a plain list (deduplicated, stable for a given
hypothesis version: ``derandomize``), so the same one can run against several tool copies and its
per-class counts can be told. ``MEGACPP_DIFF_SCALE`` multiplies every class's budget for a deeper
run by hand (``python -m tests.differential --scale 5``).
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.differential import mutations as m
from tests.differential.cachefiles import OPS
from tests.differential.engine import Differential, Outcome
from tests.differential.mutations import Mutation

SCALE_ENV = "MEGACPP_DIFF_SCALE"


@dataclass(frozen=True, kw_only=True, slots=True)
class Group:
    """Mutations of one class, with what must vary enumerated (a flag, an ignore source, a hostile
    row, a kind of cache entry) and the rest drawn by hypothesis: ``budget`` examples at most."""

    name: str  # the class its mutations count under
    area: str
    strategy: st.SearchStrategy[Mutation]
    budget: int


# Ops tried on every kind of cache entry the warm-up leaves (``ENTRY_KINDS`` of them: the cache
# directory's key, checkout, probe, unit, big files, plan, tools; a GPU box adds nvml-fixed.json);
# the rest on drawn entries.
EVERY_ENTRY_OPS = ("edit-value", "truncate", "fifo", "directory", "chown", "world-writable")
ENTRY_KINDS = 7


def _dist() -> list[Group]:
    def group(name: str, strategy: st.SearchStrategy[Mutation], budget: int = 1) -> Group:
        return Group(name=name, area="dist", strategy=strategy, budget=budget)

    out = [group("dist.same-size-edit", m.same_size_edit(t), 2 if t in m.CACHED_APART else 1) for t in m.RECORDED]
    out += [group("dist.pth-hook[stray]", m.pth_hook("site/zzhook.py", "stray"), 2)]
    out += [group("dist.pth-hook[recorded]", m.pth_hook("site/hooked.py", "recorded"), 2)]
    out += [group("dist.pth-hook[sitecustomize]", m.pth_hook("site/sitecustomize.py", "sitecustomize"), 2)]
    out += [group("dist.pyvenv-cfg", m.pyvenv_cfg(), 2)]
    out += [group("dist.pth-line", m.pth_line(t), 2) for t in ("site/zzhook.pth", "site/hooked.pth", "site/a.pth")]
    out += [group("dist.metadata-version", m.metadata_version(), 3)]
    out += [group(f"dist.record-row[{n}]", m.record_row(n)) for n in m.HOSTILE_ROWS]
    out += [group("dist.record-row-in-golden", m.record_row_in_golden(n), 2) for n in m.GOLDEN_BLINDING_ROWS]
    out += [group(f"dist.record-special[{k}]", m.record_special(k)) for k in ("fifo", "directory", "devzero")]
    out += [group("dist.stray", m.stray(), 6), group("dist.remove", m.removed(), 6)]
    return out


def _checkout() -> list[Group]:
    def group(name: str, strategy: st.SearchStrategy[Mutation], budget: int = 1) -> Group:
        return Group(name=name, area="checkout", strategy=strategy, budget=budget)

    out = [
        group(f"checkout.tracked[{f}]", m.tracked(f, how), 1 if f == "none" else 2) for f in m.FLAGS for how in m.EDITS
    ]
    out += [group(f"checkout.untracked[{s}]", m.untracked(s), 2) for s in m.SOURCES]
    out += [group("checkout.untracked-edit", m.untracked_edit(f), 2) for f in ("ex_prebuilt.so", "notes.txt")]
    out += [group(f"checkout.untracked-special[{k}]", m.untracked_special(k), 2) for k in ("fifo", "socket")]
    knobs = [*m.KNOBS, "untrackedCache"]
    return out + [group(f"checkout.knob[{k}]", m.knob(k, c)) for k in knobs for c in m.KNOB_CHANGES]


def _cache() -> list[Group]:
    def group(name: str, strategy: st.SearchStrategy[Mutation], budget: int = 1) -> Group:
        return Group(name=name, area="cache", strategy=strategy, budget=budget)

    every = [group(f"cache.{op}", m.cache_op(op, st.just(k))) for op in EVERY_ENTRY_OPS for k in range(ENTRY_KINDS)]
    drawn = [group(f"cache.{op}", m.cache_op(op, st.integers(0, 100)), 2) for op in OPS if op not in EVERY_ENTRY_OPS]
    blessed = [
        group(f"cache.bless-{how}", m.bless(how, t), 2 if t in m.CACHED_APART else 1)
        for how in ("stat", "digest")
        for t in m.BLESS_TARGETS
    ]
    return every + drawn + blessed


CONTROL = Group(name="control", area="control", strategy=st.just(Mutation(cls="control", drift=False)), budget=1)
GROUPS = [CONTROL, *_dist(), *_checkout(), *_cache()]


def scale() -> float:
    return float(os.environ.get(SCALE_ENV) or 1)


def draw(group: Group, budget: int) -> list[Mutation]:
    """Up to ``budget`` distinct mutations of ``group`` (fewer when its space is smaller)."""
    found: list[Mutation] = []

    @settings(
        max_examples=budget,
        derandomize=True,
        database=None,
        phases=[Phase.generate],
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(group.strategy)
    def collect(mutation: Mutation) -> None:
        found.append(mutation)

    collect()
    return list(dict.fromkeys(found))


def corpus(groups: Iterable[Group] = GROUPS, *, factor: float | None = None, most: int | None = None) -> list[Mutation]:
    """Every group's mutations: its budget times ``factor`` (default ``scale()``), at most ``most`` each."""
    factor = scale() if factor is None else factor
    out: list[Mutation] = []
    for group in groups:
        budget = max(1, round(group.budget * factor))
        out += draw(group, budget)[: most or None]
    return out


def run_all(
    engines: Sequence[Differential], mutations: Sequence[Mutation], progress: Callable[[Outcome], None] | None = None
) -> list[Outcome]:
    """Every mutation's outcome, in corpus order; each engine (lane) runs one at a time, in a thread."""
    todo: queue.SimpleQueue[tuple[int, Mutation]] = queue.SimpleQueue()
    for item in enumerate(mutations):
        todo.put(item)
    done: dict[int, Outcome] = {}
    lock = threading.Lock()

    def lane(engine: Differential) -> None:
        while True:
            try:
                index, mutation = todo.get_nowait()
            except queue.Empty:
                return
            outcome = engine.run(mutation)
            with lock:
                done[index] = outcome
                if progress is not None:
                    progress(outcome)

    with concurrent.futures.ThreadPoolExecutor(len(engines)) as pool:
        for future in [pool.submit(lane, e) for e in engines]:
            future.result()
    return [done[i] for i in range(len(mutations))]


def table(outcomes: Sequence[Outcome]) -> str:
    """Per class: examples run, and how many diverged (warm != cold), were blind, hung or crashed."""
    runs = Counter(o.mutation.cls for o in outcomes)
    diverged = Counter(o.mutation.cls for o in outcomes if o.diverged)
    blind = Counter(o.mutation.cls for o in outcomes if o.blind)
    broken = Counter(o.mutation.cls for o in outcomes if o.problems)
    width = max((len(c) for c in runs), default=5)
    lines = [f"{'class':<{width}}  run  diverged  blind  hung/crashed"]
    lines += [f"{c:<{width}}  {runs[c]:>3}  {diverged[c]:>8}  {blind[c]:>5}  {broken[c]:>12}" for c in runs]
    total = len(outcomes)
    lines.append(
        f"{'all':<{width}}  {total:>3}  {sum(diverged.values()):>8}  {sum(blind.values()):>5}  "
        f"{sum(broken.values()):>12}"
    )
    return "\n".join(lines)
