"""Whether two version specifier sets can never both hold, decided by interval arithmetic.

Each clause becomes an interval over versions (``>=1.2`` -> [1.2, inf), ``~=1.4.2`` -> [1.4.2, 1.5),
``==1.5.*`` -> [1.5.dev0, 1.6.dev0), ``==1.5`` -> [1.5, 1.5]); ``!=`` removes a point only from a
point interval. Everything else PEP 440 adds (pre-releases excluded by ``<``, post-releases by ``>``,
local labels, compared away here) only makes a set smaller, so leaving it out keeps the answer
sound: "disjoint" is only said when it is proven. ``===`` (arbitrary equality) is never judged.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from packaging.specifiers import Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version


@dataclass(frozen=True, slots=True)
class Interval:
    low: Version | None = None  # None: unbounded
    low_closed: bool = True
    high: Version | None = None
    high_closed: bool = True

    def empty(self) -> bool:
        if self.low is None or self.high is None:
            return False
        return self.low > self.high or (self.low == self.high and not (self.low_closed and self.high_closed))

    def meet(self, other: Interval) -> Interval:
        low, low_closed = _max_low((self.low, self.low_closed), (other.low, other.low_closed))
        high, high_closed = _min_high((self.high, self.high_closed), (other.high, other.high_closed))
        return Interval(low, low_closed, high, high_closed)


def _max_low(a: tuple[Version | None, bool], b: tuple[Version | None, bool]) -> tuple[Version | None, bool]:
    if a[0] is None:
        return b
    if b[0] is None or a[0] > b[0]:
        return a
    if b[0] > a[0]:
        return b
    return (a[0], a[1] and b[1])


def _min_high(a: tuple[Version | None, bool], b: tuple[Version | None, bool]) -> tuple[Version | None, bool]:
    if a[0] is None:
        return b
    if b[0] is None or a[0] < b[0]:
        return a
    if b[0] < a[0]:
        return b
    return (a[0], a[1] and b[1])


def _bump(release: tuple[int, ...], keep: int) -> Version:
    """The first version after every ``release[:keep]``-prefixed one (``1.4`` keep 1 -> ``2.dev0``)."""
    head = list(release[:keep])
    head[-1] += 1
    return Version(".".join(map(str, head)) + ".dev0")


def clause_interval(spec: Specifier) -> Interval | None:
    """The interval of one clause; None when it cannot be judged (``===``, ``!=``, invalid versions)."""
    op, text = spec.operator, spec.version
    try:
        if op == "==" and text.endswith(".*"):
            base = Version(text[:-2])
            return Interval(Version(text[:-2] + ".dev0"), True, _bump(base.release, len(base.release)), False)
        v = _public(text)
    except InvalidVersion:
        return None
    shapes = {
        "==": lambda: Interval(v, True, v, True),
        ">=": lambda: Interval(v, True, None),
        ">": lambda: Interval(v, False, None),
        "<=": lambda: Interval(None, True, v, True),
        "<": lambda: Interval(None, True, v, False),
        "~=": lambda: Interval(v, True, _bump(v.release, len(v.release) - 1), False),
    }
    shape = shapes.get(op)
    return shape() if shape is not None else None


def set_interval(specs: SpecifierSet) -> Interval:
    """The interval a whole specifier set is contained in (with ``!=`` applied to a point)."""
    out = Interval()
    excluded: list[Version] = []
    for spec in specs:
        if spec.operator == "!=" and not spec.version.endswith(".*"):
            with contextlib.suppress(InvalidVersion):
                excluded.append(_public(spec.version))
            continue
        interval = clause_interval(spec)
        if interval is not None:
            out = out.meet(interval)
    if out.low is not None and out.low == out.high and out.low in excluded:
        return Interval(out.low, False, out.high, False)
    return out


def _public(text: str) -> Version:
    """Versions compared without local labels: ``==1.5`` admits ``1.5+cu132`` (sound, never narrower)."""
    return Version(Version(text).public)


def disjoint(a: SpecifierSet, b: SpecifierSet) -> bool:
    """True only when no version can satisfy both ``a`` and ``b``."""
    return set_interval(a & b).empty()


def admits(specs: SpecifierSet, version: str) -> bool:
    """Whether ``version`` (a known, built version) satisfies ``specs``; pre-releases count, as pip check does."""
    return specs.contains(Version(version), prereleases=True)
