"""Compilers and build tools: gcc/g++, nvcc, the ptxas Triton will use, cmake, ninja.

Looked up on the inspected environment's PATH (its scripts directory first, where pip-installed
cmake/ninja live). Each tool is time-bounded; a missing one records why.
"""

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
from megacpp_env.snapshot.proc import run_program, which
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
    compiled program's ``--version`` only changes when its file does. Keyed on the resolved file's
    (size, mtime, inode, ctime, mode) and the environment it runs with; only an ELF executable is
    cached (a script's answer depends on what it runs: always asked). Kept sealed (``cachefile``);
    only successful probes are kept."""

    def __init__(self, cache: Cache | None, environ: Mapping[str, str], notes: list[str]) -> None:
        self.cache, self.notes = cache, notes
        kept = sorted((k, v) for k, v in environ.items() if k not in VOLATILE)
        self.env = hashlib.sha256(json.dumps(kept).encode()).hexdigest()
        self.entries: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.dirty = False
        if cache is not None:
            entry = cachefile.read(str(cache.file(TOOLS_CACHE)), cache.key, TOOLS_LIMIT)
            notes += [entry.note] if entry.note else []
            try:
                data = json.loads(entry.payload) if entry.payload is not None else {}
            except ValueError:
                data = {}
            self.entries = data if isinstance(data, dict) else {}

    def key(self, program: str, args: Sequence[str]) -> tuple[str, list[Any]] | None:
        try:
            real = os.path.realpath(program)
            st = Path(real).stat()
            with open(real, "rb") as fh:
                elf = fh.read(4) == b"\x7fELF"
        except OSError:
            return None
        if not elf:
            return None
        stat = [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, st.st_mode]
        return f"{program}\0{real}\0{' '.join(args)}\0{self.env}", stat

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
    cached = cache.get(program, args)
    if cached is not None:
        return cached
    try:
        result = run_program([program, *args], timeout=TIMEOUT, env=environ)
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
) -> dict[str, Any]:
    """``site_dirs`` is called (it may wait for the probe) only to find Triton's bundled ptxas."""
    path = search_path(environ, scripts_dir)
    env = {**environ, "PATH": path}
    tools = ToolCache(cache, environ, notes if notes is not None else [])
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


def start(ctx: Context) -> Callable[[], dict[str, Any]]:
    return lambda: collect(ctx.environ, ctx.scripts, ctx.sites, ctx.plan.cache, ctx.notes)
