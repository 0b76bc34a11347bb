"""The post-install dependency check the images and ``build-source`` run in the target venv:
``python -m megacpp_env.depcheck [--resolutions FILE] [--path DIR] [--json]``.

It checks what ``pip check`` checks -- every installed distribution's ``Requires-Dist`` (markers
evaluated, extras not requested) is installed at a matching version, pre-releases allowed -- and then
accepts exactly the target's declared resolutions, nothing else:

* a requirement on a package another distribution provides (``pytorch-triton`` provides ``triton``)
  is met when the provider is installed at a matching version;
* a requirement on an overridden package is met when the installed version satisfies the override,
  and a package an override removes (``sys_platform == 'never'``) may be absent;
* a provider installed next to the package it provides (both own ``site-packages/triton/``) is an error.

Stdlib and ``packaging`` only; the resolutions file is JSON rendered from stack.yaml per target
(``images/<target>/resolutions.json``). Exit status 0 clean, 1 problems, 2 usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from megacpp_env.errors import FormatError
from megacpp_env.findings import CodeDoc, Finding
from megacpp_env.records import Record, Table, read_json

SCHEMA_VERSION = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Accepted(Record):
    """An override: the installed version of its package must satisfy ``requirement``; a requirement
    it overrules is accepted only from ``requirers`` (any requirer when empty)."""

    requirement: str
    reason: str
    requirers: tuple[str, ...] = ()

    def covers(self, requirer: str) -> bool:
        return not self.requirers or canonicalize_name(requirer) in {canonicalize_name(r) for r in self.requirers}


@dataclass(frozen=True, kw_only=True, slots=True)
class Resolutions:
    """What a target declares it accepts beyond pip check: overrides (requirement -> reason) and
    provides (provider -> provided package, reason)."""

    target: str = ""
    overrides: tuple[Accepted, ...] = ()
    provides: tuple[tuple[str, str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "target": self.target,
            "overrides": [o.to_dict() for o in self.overrides],
            "provides": [{"provider": p, "provides": q, "reason": why} for p, q, why in self.provides],
        }

    @classmethod
    def from_table(cls, t: Table) -> Resolutions:
        t.only(("schema_version", "target", "overrides", "provides"))
        if t.number("schema_version") != SCHEMA_VERSION:
            t.fail(f"unsupported schema_version (this tool reads {SCHEMA_VERSION})", "schema_version")
        overrides = []
        for o in t.tables("overrides"):
            o.only(("requirement", "reason", "requirers"))
            text = o.text("requirement", nonempty=True)
            try:
                Requirement(text)
            except InvalidRequirement as exc:
                o.fail(f"invalid requirement: {exc}", "requirement")
            overrides.append(
                Accepted(requirement=text, reason=o.text("reason", nonempty=True), requirers=o.texts("requirers"))
            )
        provides = []
        for p in t.tables("provides"):
            p.only(("provider", "provides", "reason"))
            provides.append(
                (p.text("provider", nonempty=True), p.text("provides", nonempty=True), p.text("reason", ""))
            )
        return cls(target=t.text("target", ""), overrides=tuple(overrides), provides=tuple(provides))


def read_resolutions(path: Path) -> Resolutions:
    return Resolutions.from_table(read_json(path, FormatError))


# problem -> code (``explain DC001``)
CODE_OF = {"missing": "DC001", "conflict": "DC002", "both installed": "DC003", "bad metadata": "DC004"}
_FAMILY = "dependency check (python -m megacpp_env.depcheck, in images and build-source)"
_SILENCE = "a declared resolution of the target in stack.yaml (resolutions.overrides or resolutions.provides)"
CODES = (
    CodeDoc(
        code="DC001",
        severity="error",
        summary="every requirement of an installed distribution is installed",
        family=_FAMILY,
        doc="What pip check checks: each Requires-Dist (markers evaluated) names an installed "
        "distribution; a declared provider or an override that removes the package accepts it.",
        example="missing: vllm 0.29.0 requires xgrammar==0.1.25: not installed",
        silence=_SILENCE,
    ),
    CodeDoc(
        code="DC002",
        severity="error",
        summary="every requirement is met by the installed version",
        family=_FAMILY,
        example="conflict: mamba-ssm 2.3.0 requires triton: 3.5.0 is installed",
        silence=_SILENCE,
    ),
    CodeDoc(
        code="DC003",
        severity="error",
        summary="a provider is not installed beside what it provides",
        family=_FAMILY,
        doc="pytorch-triton and triton both own site-packages/triton/: they overwrite each other's files.",
        example="both installed: pytorch-triton requires triton: pytorch-triton provides "
        "triton, and both are installed",
        silence="cannot be accepted: remove one of them",
    ),
    CodeDoc(
        code="DC004",
        severity="error",
        summary="every Requires-Dist parses",
        family=_FAMILY,
        example="bad metadata: foo 1.0 requires foo>=>1: unparsable Requires-Dist",
        silence="cannot be accepted: the distribution's metadata is broken",
    ),
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Installed:
    name: str  # canonical
    version: str
    requires: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Problem(Record):
    requirer: str
    requirement: str
    problem: str  # "missing", "conflict", "both installed", "bad metadata"
    detail: str
    accepted_by: str = ""  # the resolution that accepts it ("provides", "override"), "" when it fails

    def line(self) -> str:
        head = f"{self.requirer} requires {self.requirement}: {self.detail}"
        return f"accepted ({self.accepted_by}): {head}" if self.accepted_by else f"{self.problem}: {head}"

    def finding(self) -> Finding:
        """The common finding (``megacpp_env.findings``): an accepted problem is suppressed by its resolution."""
        return Finding(
            code=CODE_OF[self.problem],
            severity="error",
            key=self.requirer,
            message=f"{self.requirer} requires {self.requirement}: {self.detail}",
            remedy="declare the resolution in the target (resolutions: overrides or provides), or fix the lock",
            suppressed=self.accepted_by,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Report:
    findings: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def failing(self) -> list[Problem]:
        return [f for f in self.findings if not f.accepted_by]

    @property
    def ok(self) -> bool:
        return not self.failing


def installed(paths: Sequence[str] | None = None) -> dict[str, Installed]:
    out: dict[str, Installed] = {}
    dists = metadata.distributions(path=list(paths)) if paths is not None else metadata.distributions()
    for dist in dists:
        name = dist.metadata["Name"]
        if not name or canonicalize_name(name) in out:
            continue  # pip check, too, looks at the first distribution of a name on the path
        out[canonicalize_name(name)] = Installed(
            name=canonicalize_name(name), version=dist.version, requires=tuple(dist.requires or ())
        )
    return out


def _version_ok(req: Requirement, version: str) -> bool:
    try:
        return req.specifier.contains(Version(version).public, prereleases=True) or req.specifier.contains(
            version, prereleases=True
        )
    except InvalidVersion:
        return False


def check(env: dict[str, Installed], res: Resolutions) -> Report:
    provides: dict[str, str] = {canonicalize_name(q): canonicalize_name(p) for p, q, _ in res.provides}
    overrides: dict[str, Accepted] = {canonicalize_name(Requirement(o.requirement).name): o for o in res.overrides}
    findings: list[Problem] = []
    for dist in sorted(env.values(), key=lambda d: d.name):
        for text in dist.requires:
            found = _one(dist, text, env, provides, overrides)
            if found is not None:
                findings.append(found)
    for provided, provider in sorted(provides.items()):
        if provided in env and provider in env:
            findings.append(
                Problem(
                    requirer=provider,
                    requirement=provided,
                    problem="both installed",
                    detail=f"{provider} provides {provided}, and both are installed: they overwrite each other's files",
                )
            )
    return Report(findings=tuple(findings))


def _one(
    dist: Installed, text: str, env: dict[str, Installed], provides: dict[str, str], overrides: dict[str, Accepted]
) -> Problem | None:
    try:
        req = Requirement(text)
    except InvalidRequirement:
        return Problem(requirer=dist.name, requirement=text, problem="bad metadata", detail="unparsable Requires-Dist")
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        return None
    name = canonicalize_name(req.name)
    have = env.get(name)
    if have is not None and _version_ok(req, have.version):
        return None
    problem = "missing" if have is None else "conflict"
    detail = "not installed" if have is None else f"{have.version} is installed"
    base = Problem(requirer=f"{dist.name} {dist.version}", requirement=text, problem=problem, detail=detail)
    return _accept(base, dist.name, req, name, have, env, provides, overrides.get(name))


def _accept(
    f: Problem,
    requirer: str,
    req: Requirement,
    name: str,
    have: Installed | None,
    env: dict[str, Installed],
    provides: dict[str, str],
    override: Accepted | None,
) -> Problem:
    """``f`` marked accepted when a declared provides alias or override covers it, else ``f``."""
    provider = env.get(provides.get(name, ""))
    if have is None and provider is not None and _version_ok(req, provider.version):
        return _accepted(f, f"provides: {provider.name} {provider.version} provides {name}")
    if override is None or not override.covers(requirer):
        return f
    over = Requirement(override.requirement)
    removed = over.marker is not None and not over.marker.evaluate({"extra": ""})
    if removed and have is None:
        return _accepted(f, f"override {over}: removed ({override.reason})")
    if have is not None and not removed and _version_ok(over, have.version):
        return _accepted(f, f"override {over} ({override.reason})")
    return f


def _accepted(f: Problem, by: str) -> Problem:
    return Problem(requirer=f.requirer, requirement=f.requirement, problem=f.problem, detail=f.detail, accepted_by=by)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m megacpp_env.depcheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("--resolutions", metavar="FILE", help="the target's resolutions.json")
    parser.add_argument(
        "--path", action="append", metavar="DIR", help="check these site directories (default: sys.path)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        res = read_resolutions(Path(args.resolutions)) if args.resolutions else Resolutions()
    except (FormatError, OSError) as exc:
        print(f"depcheck: {exc}", file=sys.stderr)
        return 2
    report = check(installed(args.path), res)
    if args.json:
        found = [{**f.to_dict(), **f.finding().to_dict()} for f in report.findings]
        print(json.dumps({"ok": report.ok, "findings": found}, indent=2, sort_keys=True))
    else:
        for f in report.findings:
            print(f.line())
        print(
            "depcheck: ok" + (f" ({len(report.findings)} accepted by declared resolutions)" if report.findings else "")
            if report.ok
            else f"depcheck: {len(report.failing)} problem(s)"
        )
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
