"""Static reads of CMake files: environment variables read (``$ENV{X}``, ``DEFINED ENV{X}``),
``find_package(Torch)`` (torch's CMake reads ``TORCH_CUDA_ARCH_LIST``), and build-time downloads
(``FetchContent_Declare``/``FetchContent_Populate`` with ``GIT_REPOSITORY``), each paired with the
``*_SRC_DIR`` variable read before it in the same file, which makes CMake use a local tree instead.

Variables in arguments are substituted from ``set(NAME value)`` seen earlier in the file (the last
one wins, which is the non-ROCm branch where a file sets a value per platform).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from megacpp_env.fsutil import read_regular

COMMAND_RE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
ENV_READ_RE = re.compile(r"\$ENV\{([A-Za-z_][A-Za-z0-9_]*)\}|\bDEFINED\s+ENV\{([A-Za-z_][A-Za-z0-9_]*)\}")
VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
FETCH_COMMANDS = ("fetchcontent_declare", "fetchcontent_populate")


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    name: str
    args: tuple[str, ...]
    line: int


@dataclass(frozen=True, kw_only=True, slots=True)
class FetchHit:
    name: str
    repo: str
    ref: str
    line: int
    env: str = ""
    subdir: str = ""
    submodules: tuple[str, ...] = ()


@dataclass(kw_only=True, slots=True)
class CMakeScan:
    rel: str
    env: list[tuple[str, int]] = field(default_factory=list)
    fetches: list[FetchHit] = field(default_factory=list)
    finds_torch: int = 0  # line of find_package(Torch ...), 0 when absent


def strip_comments(text: str) -> str:
    """Drop ``# ...`` line comments outside quoted arguments (line numbers kept)."""
    return "\n".join(_strip_line(line) for line in text.splitlines())


def _strip_line(line: str) -> str:
    quoted = False
    for i, ch in enumerate(line):
        if ch == '"' and (i == 0 or line[i - 1] != "\\"):
            quoted = not quoted
        elif ch == "#" and not quoted:
            return line[:i]
    return line


def commands(text: str) -> list[Command]:
    """Every ``name(args)`` command with its arguments split CMake-style (quotes removed)."""
    out: list[Command] = []
    pos = 0
    while m := COMMAND_RE.search(text, pos):
        end = _closing(text, m.end())
        if end < 0:
            break
        body = text[m.end() : end]
        out.append(Command(name=m.group(1).lower(), args=tuple(_split(body)), line=text.count("\n", 0, m.start()) + 1))
        pos = end + 1
    return out


def _closing(text: str, start: int) -> int:
    depth, quoted = 1, False
    for i in range(start, len(text)):
        ch = text[i]
        if ch == '"' and text[i - 1] != "\\":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split(body: str) -> list[str]:
    return [a[1:-1] if a.startswith('"') and a.endswith('"') else a for a in re.findall(r'"(?:[^"\\]|\\.)*"|\S+', body)]


def _substitute(value: str, variables: dict[str, str]) -> str:
    return VAR_RE.sub(lambda m: variables.get(m.group(1), m.group(0)), value)


def _keyword(args: tuple[str, ...], key: str) -> list[str]:
    """The values after ``key`` up to the next upper-case keyword."""
    if key not in args:
        return []
    out: list[str] = []
    for a in args[args.index(key) + 1 :]:
        if re.fullmatch(r"[A-Z][A-Z_]+", a):
            break
        out.append(a)
    return out


def scan_cmake(path: Path, rel: str) -> CMakeScan:
    text = strip_comments(read_regular(path).decode("utf-8", "replace"))
    scan = CMakeScan(rel=rel)
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in ENV_READ_RE.finditer(line):
            scan.env.append((m.group(1) or m.group(2), lineno))
    variables: dict[str, str] = {}
    for cmd in commands(text):
        if cmd.name == "set" and len(cmd.args) >= 2 and not cmd.args[0].startswith("ENV{"):
            variables[cmd.args[0]] = _substitute(cmd.args[1], variables)
        elif cmd.name == "find_package" and cmd.args[:1] == ("Torch",):
            scan.finds_torch = scan.finds_torch or cmd.line
        elif cmd.name in FETCH_COMMANDS and "GIT_REPOSITORY" in cmd.args:
            scan.fetches.append(_fetch(cmd, variables, scan.env))
    return scan


def _fetch(cmd: Command, variables: dict[str, str], env: list[tuple[str, int]]) -> FetchHit:
    def one(key: str) -> str:
        values = _keyword(cmd.args, key)
        return _substitute(values[0], variables) if values else ""

    src_dirs = [name for name, line in env if name.endswith("_SRC_DIR") and line <= cmd.line]
    return FetchHit(
        name=cmd.args[0],
        repo=one("GIT_REPOSITORY"),
        ref=one("GIT_TAG"),
        line=cmd.line,
        env=src_dirs[-1] if src_dirs else "",
        subdir=one("SOURCE_SUBDIR"),
        submodules=tuple(_substitute(s, variables) for s in _keyword(cmd.args, "GIT_SUBMODULES")),
    )
