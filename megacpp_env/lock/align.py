"""``lock resolve --align``: remove divergence by re-resolving the other members of a group constrained to one
member's versions (uv ``--constraints``), allowed packages left free.

The reference is tried newest-first: the member ahead on the largest version steps (on the issue's
data: x86_64 -- pydantic 2 and starlette 1 against aarch64's pydantic 1 under the vllm 0.2.5 sdist).
If uv cannot satisfy the constraints on another member (no wheel for that platform), the next member
is tried. The chosen direction is always reported: aligning down to an old version is visible.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from megacpp_env.errors import ToolError
from megacpp_env.lock.consistency import GroupReport, Key, align_constraints, label
from megacpp_env.lock.diff import upgrade_level
from megacpp_env.lock.inputs import LockInputs
from megacpp_env.lock.pylock import Lock
from megacpp_env.lock.resolve import FRESH, Relock, Resolved, resolve


@dataclass(frozen=True, kw_only=True, slots=True)
class Alignment:
    group: str
    reference: Key | None  # None: no member could serve as reference
    results: Mapping[Key, Resolved]
    notes: tuple[str, ...]


def _v(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


LEVELS = ("major", "minor", "patch")


def reference_order(report: GroupReport, locks: Mapping[Key, Lock]) -> list[Key]:
    """Members ordered by how far ahead they are: most diverging packages at the highest version
    across a major step, then a minor step, then a patch step, then anything else."""
    score = {k: [0, 0, 0, 0] for k in report.compared}
    for d in report.failing:
        versions = sorted(_v(v) for v in d.versions.values())
        level = upgrade_level(versions[0], versions[-1])
        slot = LEVELS.index(level) if level in LEVELS else 3
        for key in report.compared:
            if _v(d.versions.get(label(key), "0")) == versions[-1]:
                score[key][slot] += 1
    return sorted(report.compared, key=lambda k: ([-n for n in score[k]], report.compared.index(k)))


def align_group(
    report: GroupReport, locks: Mapping[Key, Lock], inputs: Mapping[Key, LockInputs], relocks: Mapping[Key, Relock]
) -> Alignment:
    """Try each reference in order; return the first whose constraints every other member satisfies. A
    member is re-resolved as its own re-lock was (``relocks``: its committed lock as uv's preferences,
    its cut-off): the constraints move what they pin, and nothing else moves."""
    notes: list[str] = []
    for ref in reference_order(report, locks):
        others = [k for k in report.compared if k != ref and k in inputs]
        pins = align_constraints(locks[ref], report.group.allowed)
        try:
            results = {k: resolve(inputs[k], constraints=pins, relock=relocks.get(k, FRESH)) for k in others}
        except ToolError as exc:
            first = str(exc).splitlines()[-1].strip()
            notes.append(f"cannot align {report.group.name} to {label(ref)}: {first}")
            continue
        notes.append(f"aligned {', '.join(label(k) for k in others)} to {label(ref)}")
        return Alignment(group=report.group.name, reference=ref, results=results, notes=tuple(notes))
    return Alignment(group=report.group.name, reference=None, results={}, notes=tuple(notes))
