"""Compilers and build tools: gcc/g++, nvcc, the ptxas Triton will use, cmake, ninja.

Looked up on the inspected environment's PATH (its scripts directory first, where pip-installed
cmake/ninja live). Each tool is time-bounded; a missing one records why.
"""

# ruff: noqa: PTH118 (os.path.join on the unowned entries' paths, as os.walk gives them)

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.errors import ToolError
from megacpp_env.snapshot.proc import Running, run_program, which
from megacpp_env.snapshot.tasks import Task
from megacpp_env.snapshot.verify import cachefile

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context
    from megacpp_env.snapshot.options import Cache

# name -> (argv after the program, regex whose group 1 is the version)
TOOLS: dict[str, tuple[tuple[str, ...], str]] = {
    "gcc": (("-dumpfullversion",), r"^\s*(\d+(?:\.\d+)*)"),
    "g++": (("-dumpfullversion",), r"^\s*(\d+(?:\.\d+)*)"),
    "nvcc": (("--version",), r"V(\d+(?:\.\d+)+)"),
    "cmake": (("--version",), r"version\s+(\S+)"),
    "ninja": (("--version",), r"^\s*(\S+)"),
}
PTXAS_ARGS = ("--version",)
PTXAS_RE = r"V(\d+(?:\.\d+)+)"
TIMEOUT = 10.0


def search_path(environ: Mapping[str, str], scripts_dir: str) -> str:
    parts = [scripts_dir] if scripts_dir else []
    parts += [p for p in environ.get("PATH", os.defpath).split(os.pathsep) if p]
    return os.pathsep.join(parts)


class ToolCache:
    """Version output per executable: ``nvcc --version`` alone costs a quarter of a second, and a
    program's answer changes only when what it runs does. Kept sealed (``cachefile``); only
    successful probes are kept. The key, beside the program's path, arguments and environment:

    - an ELF executable: the resolved file's (size, mtime, inode, ctime, mode);
    - a Python script run by the inspected interpreter (pip's ``cmake``, ``ninja``): the script's
      and the interpreter's stats and ``script_key()``, the snapshot's own verdict on everything
      the script can import (``script_key``: None unless every distribution verified clean);
    - anything else (a shell script, another interpreter's script): never cached, always asked.
    """

    def __init__(
        self,
        cache: Cache | None,
        environ: Mapping[str, str],
        notes: list[str],
        *,
        python: str = "",
        script_key: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.cache, self.notes, self.python, self.script_key = cache, notes, python, script_key
        kept = sorted((k, v) for k, v in environ.items() if k not in VOLATILE)
        self.env = hashlib.sha256(json.dumps(kept).encode()).hexdigest()
        self.entries: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.dirty = False
        if cache is not None:
            _found, data = cachefile.read_json(str(cache.file(TOOLS_CACHE)), cache.key, TOOLS_LIMIT, notes)
            self.entries = data if isinstance(data, dict) else {}

    def speculate(self, program: str, args: Sequence[str]) -> bool:
        """Whether to start ``program`` before its key is known: a script whose key waits on the
        python collector's verdict, unless a kept answer for this very script file (its stat) is
        there to be confirmed (a repeat: starting it would only cost a process)."""
        if self.cache is None or not self.python:
            return False
        try:
            real = os.path.realpath(program)
            st = Path(real).stat()
            with open(real, "rb") as fh:
                if fh.read(2) != b"#!":
                    return False
        except OSError:
            return False
        own = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, st.st_mode]
        kept = self.entries.get(f"{program}\0{real}\0{' '.join(args)}\0{self.env}")
        return not (isinstance(kept, dict) and isinstance(kept.get("stat"), list) and kept["stat"][:5] == own)

    def key(self, program: str, args: Sequence[str]) -> tuple[str, list[Any]] | None:
        try:
            real = os.path.realpath(program)
            st = Path(real).stat()
            with open(real, "rb") as fh:
                head = fh.read(512)
        except OSError:
            return None
        stat: list[Any] = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, st.st_mode]
        if not head.startswith(b"\x7fELF"):
            extra = self._script(head)
            if extra is None:
                return None
            stat += extra
        return f"{program}\0{real}\0{' '.join(args)}\0{self.env}", stat

    def _script(self, head: bytes) -> list[Any] | None:
        """What a Python script's answer depends on beyond its own file; None: not cacheable."""
        if not head.startswith(b"#!") or not self.python:
            return None
        words = head[2:].split(b"\n", 1)[0].split()
        if not words or os.path.realpath(os.fsdecode(words[0])) != os.path.realpath(self.python):
            return None
        verdict = self.script_key()
        try:
            st = Path(os.path.realpath(self.python)).stat()
        except OSError:
            return None
        return None if verdict is None else [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, verdict]

    def get(self, program: str, args: Sequence[str]) -> dict[str, Any] | None:
        k = self.key(program, args)
        hit = self.entries.get(k[0]) if k else None
        if not (k and isinstance(hit, dict) and hit.get("stat") == k[1] and isinstance(hit.get("result"), dict)):
            return None
        result = hit["result"]
        return dict(result) if all(isinstance(v, str) for v in result.values()) else None

    def put(self, program: str, args: Sequence[str], result: dict[str, Any]) -> None:
        k = self.key(program, args)
        if k and "error" not in result:
            with self.lock:
                self.entries[k[0]] = {"stat": k[1], "result": result}
                self.dirty = True

    def save(self) -> None:
        if self.cache is not None and self.dirty:
            payload = json.dumps(self.entries, sort_keys=True).encode()
            note = cachefile.write(str(self.cache.file(TOOLS_CACHE)), payload, self.cache.key)
            self.notes += [note] if note else []


TOOLS_CACHE = "tools-2.json"
# Variables that do not change what a program prints (the shell's bookkeeping).
VOLATILE = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "TERM", "COLUMNS", "LINES", "SSH_TTY", "SSH_CONNECTION"})
TOOLS_LIMIT = 16 << 20


def probe_tool(
    program: str, args: Sequence[str], pattern: str, environ: Mapping[str, str], cache: ToolCache
) -> dict[str, Any]:
    """The program's version. A script whose key waits on the python collector's verdict is started
    at once, beside that wait, unless a kept answer for the same script file waits to be confirmed:
    a cache hit stops it, a miss (a first run) loses no time."""
    early = Running([program, *args], timeout=TIMEOUT, env=environ) if cache.speculate(program, args) else None
    cached = cache.get(program, args)
    if cached is not None:
        if early is not None:
            early.stop()
        return cached
    try:
        result = early.result() if early is not None else run_program([program, *args], timeout=TIMEOUT, env=environ)
    except ToolError as exc:
        return {"path": program, "error": str(exc)}
    text = result.stdout + result.stderr
    match = re.search(pattern, text, re.MULTILINE)
    out: dict[str, Any] = {"path": program, "version": match.group(1) if match else ""}
    if program.endswith(("nvcc", "ptxas")):
        release = re.search(r"release (\d+\.\d+)", text)
        out["release"] = release.group(1) if release else ""
    cache.put(program, args, out)
    return out


def triton_ptxas(environ: Mapping[str, str], site_dirs: Sequence[str], path: str) -> tuple[str, str]:
    """(path, how it was chosen) of the ptxas Triton will run."""
    if environ.get("TRITON_PTXAS_PATH"):
        return environ["TRITON_PTXAS_PATH"], "TRITON_PTXAS_PATH"
    for site in site_dirs:
        bundled = Path(site) / "triton" / "backends" / "nvidia" / "bin" / "ptxas"
        if bundled.is_file():
            return str(bundled), "bundled with triton"
    found = which("ptxas", path=path)
    return (found, "PATH") if found else ("", "")


def collect(
    environ: Mapping[str, str],
    scripts_dir: str,
    site_dirs: Callable[[], Sequence[str]],
    cache: Cache | None = None,
    notes: list[str] | None = None,
    *,
    python: str = "",
    script_key: Callable[[], str | None] = lambda: None,
) -> dict[str, Any]:
    """``site_dirs`` is called (it may wait for the probe) only to find Triton's bundled ptxas;
    ``script_key`` (it may wait for the python collector) only for a script of ``python``'s."""
    path = search_path(environ, scripts_dir)
    env = {**environ, "PATH": path}
    tools = ToolCache(cache, environ, notes if notes is not None else [], python=python, script_key=script_key)
    out: dict[str, Any] = {}
    tasks: dict[str, Task[dict[str, Any]]] = {}
    for name, (args, pattern) in TOOLS.items():
        program = which(name, path=path)
        if program is None:
            out[name] = {"error": f"{name} not found"}
        else:
            tasks[name] = Task(probe_tool, program, args, pattern, env, tools, name=f"snapshot-{name}")
    ptxas, how = triton_ptxas(environ, site_dirs(), path)
    if ptxas:
        tasks["triton_ptxas"] = Task(probe_tool, ptxas, PTXAS_ARGS, PTXAS_RE, env, tools, name="snapshot-ptxas")
    else:
        out["triton_ptxas"] = {"error": "no ptxas for Triton (TRITON_PTXAS_PATH unset, no bundled or PATH ptxas)"}
    for name, task in tasks.items():
        out[name] = task.result()
    tools.save()
    if how and "error" not in out["triton_ptxas"]:
        out["triton_ptxas"]["chosen_by"] = how
    return dict(sorted(out.items()))


SCRIPT_WAIT = 5.0  # seconds a script's cache lookup waits for the python collector's verdict (else: run it)
UNOWNED_LIMIT = 20_000  # entries stat-ed under the site directories' unowned files; more: not cacheable


def script_verdict(result: Any) -> str | None:
    """The key of everything a script of the inspected interpreter can import, from the python
    collector's result: every distribution was verified against its RECORD (a clean one by content),
    so the facts themselves, plus the stats of what a RECORD cannot vouch for: each file listed as
    modified, removed or added (a file edited twice leaves the same list, not the same stat), and
    every file no RECORD owns in the site directories. None (not cacheable) when a distribution has
    no RECORD, a list was cut short, or there are more than ``UNOWNED_LIMIT`` such files."""
    facts = getattr(result, "facts", None)
    if not isinstance(facts, dict):
        return None
    stats: list[Any] = []
    for dist in (facts.get("distributions") or {}).values():
        integrity = dist.get("integrity") if isinstance(dist, dict) else None
        if not isinstance(integrity, dict) or integrity.get("status") not in ("ok", "drifted"):
            return None
        for name in ("modified", "removed", "added", "malformed", "outside"):
            if f"{name}_count" in integrity:
                return None
            if name in ("modified", "removed", "added"):
                stats += [
                    (rel, _lstat(os.path.join(str(dist.get("location")), rel))) for rel in integrity.get(name) or ()
                ]
    for site, names in sorted((facts.get("unowned_site_files") or {}).items()):
        for name in names:
            for here, _dirs, files in os.walk(os.path.join(site, name)) if name.endswith("/") else ():
                stats += [(os.path.join(here, f), _lstat(os.path.join(here, f))) for f in sorted(files)]
            stats.append((name, _lstat(os.path.join(site, name))))
    if len(stats) > UNOWNED_LIMIT:
        return None
    return hashlib.sha256(json.dumps([facts, stats], sort_keys=True, default=str).encode()).hexdigest()


def _lstat(path: str) -> list[int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, st.st_mode]


def start(ctx: Context) -> Callable[[], dict[str, Any]]:
    verdict: list[str | None] = []

    def script_key() -> str | None:
        if not verdict:
            verdict.append(script_verdict(ctx.python_result.get(SCRIPT_WAIT)))
        return verdict[0]

    return lambda: collect(
        ctx.environ, ctx.scripts, ctx.sites, ctx.plan.cache, ctx.notes, python=ctx.python, script_key=script_key
    )
