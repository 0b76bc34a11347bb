"""The snapshot collectors: one registration each, the one description of its area. Adding a
collector is one new module under ``snapshot/collectors/`` that defines ``start(ctx: Context) ->
Callable[[], facts]``, its schema fragment ``snapshot/schema/<area>.json`` and one ``Collector``
line here, declaring:

- its area, its module and its timeout;
- the finding code and the severity of a difference in ``diff`` (``explain CODE`` documents it), and
  its explainer: a function of ``snapshot/diff.py`` named here (none: every differing fact as
  ``key: old -> new``), and for an unhashed area the explainer of its live readings (none: never a
  note);
- whether it counts in the digest;
- its progress label (what a snapshot still running is waiting for);
- how a document older than the area reads it (``older``): ``drift``, every fact of it differs, or
  ``note``, the older document predates the area: one note, no drift, and the schema does not
  require it (so goldens stored before a new area keep checking);

and nothing else lists the areas: ``collect``, ``document``, ``diff``, ``codes`` and the generated
JSON Schema (``snapshot.schemagen``) read this table; ``tests/test_snapshot_registry.py`` checks
every entry.

Where a collector's result goes: a hashed area's under the document's ``facts`` (the digest), an
unhashed area's under ``live`` (recorded, never hashed). A hashed area with live readings returns
``Parts(facts=..., live=...)``: the facts are hashed, the readings go under ``live`` by the same
area name (the GPUs' clocks now, temperatures and power draw beside their configured limits).

Import-light on purpose: a collector's module is imported only when a snapshot runs, and this
module imports none of them.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from megacpp_env import findings

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context

SEVERITIES = tuple(s for s in findings.SEVERITIES if s != "ok")  # a difference is never "ok"
PACKAGE = "megacpp_env.snapshot.collectors"  # the only package a collector's module is loaded from
MODULE_RE = re.compile(r"[a-z_][a-z0-9_]*")
CODE_RE = re.compile(r"SD[0-9]{3}")
OLDER = ("drift", "note")  # how a document without the area reads it
HOST_AREA = "host"  # not collected as a fact: host differences are notes


@dataclass(frozen=True, kw_only=True, slots=True)
class Collector:
    area: str  # the key of its facts in the snapshot
    module: str  # megacpp_env.snapshot.collectors.<module>, one identifier: defines start(ctx)
    timeout: float  # seconds; past it the area records {"error": "timed out after ..."}
    code: str  # of a difference in this area (SD001 ...; ``explain SD001``)
    severity: str  # of a difference in this area, in diff (one of SEVERITIES)
    explain: str = ""  # a function of snapshot/diff.py explaining a difference in the facts ("": generic)
    explain_live: str = ""  # one explaining a difference in its live readings worth a note ("": none)
    label: str = ""  # what a snapshot still running is waiting for, on the progress line (default: the area)
    hashed: bool = True  # counts in the snapshot's digest (False: the whole area goes under ``live``)
    older: str = "drift"  # a document without the area: "drift" (its facts differ) or "note" (it predates it)
    # waits (at most a second) until the integrity workers have their work: the planning before that
    # is GIL-bound and on the critical path, and this collector's import and Python work would share
    # the GIL with it (False only for the two that start that work: python and gpu)
    after_launch: bool = True

    def __post_init__(self) -> None:
        """Only a module of the snapshot package: a dotted path could load any module, past the
        layers tests/test_layers.py checks."""
        if not MODULE_RE.fullmatch(self.module):
            raise ValueError(
                f"collector {self.area!r}: module {self.module!r} is not a module name of {PACKAGE} "
                "(one lower-case identifier, no dots); put the collector in megacpp_env/snapshot/"
            )
        if not CODE_RE.fullmatch(self.code) or self.older not in OLDER:
            raise ValueError(
                f"collector {self.area!r}: code {self.code!r} (SD and three digits) or older {self.older!r} "
                f"(one of {', '.join(OLDER)}) is not valid"
            )

    def start(self, ctx: Context) -> Callable[[], Any]:
        """The collector's job: its module is imported in the job's own thread (the imports of
        eleven modules on the thread that starts them all held up every start)."""

        def job() -> Any:
            return importlib.import_module(f"{PACKAGE}.{self.module}").start(ctx)()

        return job


# In display order: diff and doctor list areas this way.
COLLECTORS: tuple[Collector, ...] = (
    # python starts the integrity workers; gpu reads NVML in a child (``nvml_child``, started before
    # the verb): neither waits; every other collector waits until the workers have their work
    Collector(area="python", module="python_env", timeout=900.0, code="SD001", severity="error",
              explain="diff_python", label="verifying installed files", after_launch=False),
    Collector(area="checkouts", module="checkouts", timeout=120.0, code="SD002", severity="error",
              explain="diff_checkouts"),
    Collector(area="torch", module="torch_facts", timeout=240.0, code="SD003", severity="error", explain="diff_torch"),
    Collector(area="gpu", module="gpu", timeout=30.0, code="SD004", severity="warning", explain="diff_gpu",
              label="GPUs", after_launch=False),
    Collector(area="compilers", module="compilers", timeout=30.0, code="SD005", severity="warning"),
    Collector(area="runtime", module="runtime", timeout=10.0, code="SD006", severity="warning", explain="diff_runtime"),
    Collector(area="env", module="envvars", timeout=10.0, code="SD007", severity="warning", explain="diff_env"),
    Collector(area="scheduler", module="scheduler", timeout=10.0, code="SD008", severity="warning"),
    Collector(area="system", module="system", timeout=10.0, code="SD009", severity="info", explain="diff_system"),
    Collector(area="container", module="container", timeout=10.0, code="SD010", severity="note", hashed=False,
              explain_live="live_container"),
    Collector(area="repo", module="repo", timeout=60.0, code="SD011", severity="note", hashed=False,
              explain_live="live_repo", label="training repository"),
)  # fmt: skip
HOST_CODE = "SD012"  # a difference in where, when and how a snapshot was taken: a note
OTHER_CODE = "SD000"  # a difference in an area no collector of this version registers


def collectors() -> tuple[Collector, ...]:
    return COLLECTORS


def areas() -> tuple[str, ...]:
    return tuple(c.area for c in collectors())


def by_area(area: str) -> Collector | None:
    return next((c for c in collectors() if c.area == area), None)


def label(area: str) -> str:
    """What the progress line says a snapshot is waiting for while ``area`` runs."""
    found = by_area(area)
    return (found.label or found.area) if found else area


def severity_of(area: str) -> str:
    """The severity of a difference in ``area``: host differences are notes, unknown areas info."""
    if area == HOST_AREA:
        return "note"
    found = by_area(area)
    return found.severity if found else "info"


def rank(area: str) -> int:
    """Display order of an area (registered ones first, then host, then anything else)."""
    order = [*areas(), HOST_AREA]
    return order.index(area) if area in order else len(order)


def hashed(area: str) -> bool:
    """Whether ``area`` counts in the digest (an area this version does not know does: a newer
    snapshot's facts are never silently left out of its digest)."""
    found = by_area(area)
    return found.hashed if found else True


def code_of(area: str) -> str:
    """The finding code of a difference in ``area`` (``explain`` documents it)."""
    if area == HOST_AREA:
        return HOST_CODE
    found = by_area(area)
    return found.code if found else OTHER_CODE
