"""A capture may decide only what the golden's digest covers.

The capture (``<golden>.capture.json``) has no digest of its own, and ``reproduce`` acts on it: it
picks an interpreter by the capture's prefixes, fetches each checkout's commit from its remotes,
applies its diff, installs each distribution from its ``direct_url`` and rebuilds local builds with
their build env. Every such field that the snapshot's hashed facts also record is derived from them
again here and must be equal; a capture that disagrees was edited (or belongs to another snapshot)
and is refused before anything runs. Fields the facts cannot say (how the venv was made, the
interpreter name its maker ran) are checked for shape on load (``repro.document``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from megacpp_env.fsutil import sha256_bytes
from megacpp_env.repro import portable
from megacpp_env.repro.capture import golden_build_env, origin_of
from megacpp_env.repro.document import Capture, CheckoutCapture, DistCapture
from megacpp_env.snapshot.document import Snapshot

EMPTY = sha256_bytes(b"")


def disagreements(cap: Capture, snapshot: Snapshot) -> list[str]:
    """Every capture field that chooses what runs and differs from the golden's hashed facts, as
    ``key: capture value != facts value``; empty when the capture is the snapshot's."""
    return [
        *_python(cap, snapshot), *_checkouts(cap, snapshot), *_distributions(cap, snapshot),
        *_path_entries(cap, snapshot),
    ]  # fmt: skip


def _python(cap: Capture, snapshot: Snapshot) -> Iterator[str]:
    interp = portable.interpreter(snapshot)
    want = {
        "version": str(interp.get("version", "")),
        "implementation": str(interp.get("implementation", "CPython")),
        "prefix": str(Path(str(interp.get("prefix") or ""))),
        "base_prefix": str(interp.get("base_prefix", "")),
        "executable": str(interp.get("executable", "")),
    }
    for key, value in want.items():
        got = getattr(cap.python, key)
        if got != value:
            yield f"python.{key}: {got!r} != facts.python.interpreter {value!r}"


def _checkouts(cap: Capture, snapshot: Snapshot) -> Iterator[str]:
    facts = snapshot.area("checkouts")
    for key, c in sorted(cap.checkouts.items()):
        entry = facts.get(key)
        if not isinstance(entry, Mapping):
            yield f"checkouts.{key}: the golden's facts have no such checkout"
            continue
        if c.problems:  # not re-created at all (trees refuses it with its reasons)
            continue
        yield from _checkout(key, c, entry)


def _checkout(key: str, c: CheckoutCapture, entry: Mapping[str, Any]) -> Iterator[str]:
    subs = {s.get("path"): s.get("actual") for s in entry.get("submodules") or () if isinstance(s, Mapping)}
    want: dict[str, Any] = {
        "path": str(entry.get("path") or key),
        "head": entry.get("head"),
        "remotes": dict(entry.get("remotes") or {}),
        "diff": entry.get("diff_hash") if entry.get("diff_hash") != EMPTY else None,
        "untracked_hash": entry.get("untracked_hash"),
        "submodules": subs,
    }
    got: dict[str, Any] = {
        "path": c.path, "head": c.head, "remotes": c.remotes, "diff": c.diff, "untracked_hash": c.untracked_hash,
        "submodules": {s.path: s.commit for s in c.submodules},
    }  # fmt: skip
    for field, value in want.items():
        if got[field] != value:
            yield f"checkouts.{key}.{field}: {got[field]!r} != facts.checkouts.{key} {value!r}"


def _distributions(cap: Capture, snapshot: Snapshot) -> Iterator[str]:
    facts = snapshot.area("python").get("distributions") or {}
    _, roots = portable.roots_of(snapshot)
    env = golden_build_env(snapshot)
    prefix = Path(str(portable.interpreter(snapshot).get("prefix") or ""))
    for key, d in sorted(cap.distributions.items()):
        fact = facts.get(key) if isinstance(facts, Mapping) else None
        if not isinstance(fact, Mapping):
            yield f"distributions.{key}: the golden's facts have no such distribution"
            continue
        yield from _distribution(key, d, fact, roots, env)
        origin = origin_of(fact, prefix)
        # only a build record (not in the facts) makes a local build, and only of a wheel installed from
        # a file or a directory (PEP 610's direct_url.json), never of one the facts say came from an index
        recorded = d.origin == "local-build" and d.build is not None and d.build.source == "record"
        if recorded and origin not in ("url", "local-build"):
            yield f"distributions.{key}.origin: a local build, where facts.python.distributions.{key} says {origin!r}"
        elif d.origin != origin and not recorded:
            yield f"distributions.{key}.origin: {d.origin!r} != {origin!r} (from facts.python.distributions.{key})"


def _distribution(
    key: str, d: DistCapture, fact: Mapping[str, Any], roots: portable.Roots, env: Mapping[str, str]
) -> Iterator[str]:
    direct = portable.direct_url_form(fact.get("direct_url"), roots) if fact.get("direct_url") else None
    want: dict[str, Any] = {"name": str(fact.get("name", key)), "version": str(fact.get("version", "")),
                            "installer": str(fact.get("installer", "")), "direct_url": direct}  # fmt: skip
    if d.build is not None and d.build.source == "direct_url":
        want["build.build_env"] = dict(env)
    got = {"name": d.name, "version": d.version, "installer": d.installer, "direct_url": d.direct_url,
           "build.build_env": d.build.build_env if d.build else None}  # fmt: skip
    for field, value in want.items():
        if got[field] != value:
            yield f"distributions.{key}.{field}: {got[field]!r} != facts.python.distributions.{key} {value!r}"
    if d.build is not None and d.build.source == "record":
        yield from _record_paths(key, d.build.build_env, env)


def _record_paths(key: str, build_env: Mapping[str, str], env: Mapping[str, str]) -> Iterator[str]:
    """A build record's env is not in the facts: a value that names an absolute path (a compiler, a
    directory on PATH, a plugin in a flag) chooses what runs, so it must be the golden's own (its
    facts' env); knobs and paths inside the checkout (``{checkout}/...``) stay free."""
    for name, value in sorted(build_env.items()):
        if _names_absolute_path(value) and env.get(name) != value:
            yield (
                f"distributions.{key}.build.build_env.{name}: {value!r} names an absolute path that the "
                f"golden's facts (facts.env) do not hold for {name}"
            )


def _names_absolute_path(value: str) -> bool:
    tokens = value.replace("=", " ").replace(":", " ").replace(",", " ").split()
    return any(t.startswith(("/", "~")) for t in tokens)


def _path_entries(cap: Capture, snapshot: Snapshot) -> Iterator[str]:
    """Each ``.pth`` file is an unowned file of the golden's facts, and each of its path lines a
    directory the golden's interpreter had on ``sys.path`` (a line the capture invented would put a
    directory of anyone's choosing, and its ``sitecustomize``, on the re-made venv's path)."""
    everywhere, _ = portable.roots_of(snapshot)
    unowned = snapshot.area("python").get("unowned_site_files") or {}
    sites = {everywhere.text(site): set(names) for site, names in unowned.items() if isinstance(names, list)}
    raw_path = portable.interpreter(snapshot).get("sys_path") or ()
    on_path = {posixpath.normpath(everywhere.text(p)) for p in raw_path if isinstance(p, str)}
    for n, entry in enumerate(cap.path_entries):
        if entry.file not in sites.get(entry.site, ()):
            yield f"path_entries[{n}]: {entry.site}/{entry.file} is no unowned file of facts.python.unowned_site_files"
            continue
        for line in (ln.rstrip() for ln in entry.lines):
            if not line or line.startswith("#"):
                continue
            where = posixpath.normpath(line if line.startswith(("/", "{")) else f"{entry.site}/{line}")
            if where not in on_path:
                yield f"path_entries[{n}]: {entry.file} line {line!r} is not on facts.python.interpreter.sys_path"
