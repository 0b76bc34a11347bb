"""Static reads of CMake files: environment variables read (``$ENV{X}``, ``DEFINED ENV{X}``),
``find_package(Torch)`` (torch's CMake reads ``TORCH_CUDA_ARCH_LIST``), and build-time downloads
(``FetchContent_Declare``, ``FetchContent_Populate`` and ``ExternalProject_Add`` with
``GIT_REPOSITORY``), each paired with the ``*_SRC_DIR`` variable read before it in the same file, which
makes CMake use a local tree instead.

For each download it records what CMake itself would do with it (tests/test_cmake_engine.py runs the real
CMake on the same declarations and compares):

* the submodules CMake clones (``submodule_mode``): no ``GIT_SUBMODULES`` (or one whose value expands to
  nothing) clones every submodule; ``GIT_SUBMODULES ""`` none, for FetchContent always, for
  ExternalProject only under policy CMP0097 NEW (``cmake_minimum_required`` 3.16 or later, or
  ``cmake_policy(SET CMP0097 NEW)``; OLD clones them all); a list clones those. ``GIT_SUBMODULES_RECURSE``
  (default ON) says whether each is cloned recursively;
* the cache variable CMake's own override reads, ``FETCHCONTENT_SOURCE_DIR_<NAME>``: honoured for a
  ``FetchContent_Declare`` (populated by ``FetchContent_MakeAvailable`` or a one-argument
  ``FetchContent_Populate``), ignored by a ``FetchContent_Populate`` given its own options and unknown to
  ExternalProject;
* every condition that tests the ``*_SRC_DIR`` variable to choose code (``env_branches``), leaving out
  the one that only copies ``$ENV{X}`` into ``X``: a second one means the variable also selects
  upstream's local-development code, not only where the tree comes from.

Variables in arguments are substituted from ``set(NAME value)`` seen earlier in the file (the last
one wins, which is the non-ROCm branch where a file sets a value per platform).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from megacpp_env.fsutil import read_regular
from megacpp_env.layout import CMAKE_FETCH_OVERRIDE_RE

COMMAND_RE = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(")
ENV_READ_RE = re.compile(r"\$ENV\{([A-Za-z_][A-Za-z0-9_]*)\}|\bDEFINED\s+ENV\{([A-Za-z_][A-Za-z0-9_]*)\}")
VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
FETCH_COMMANDS = {
    "fetchcontent_declare": "FetchContent_Declare",
    "fetchcontent_populate": "FetchContent_Populate",
    "externalproject_add": "ExternalProject_Add",
}
# The option names of ExternalProject_Add (which FetchContent passes its options to): a value list ends
# at the next one. By prefix, so a submodule path in upper case is not taken for an option.
OPTION_RE = re.compile(
    r"(GIT|SVN|HG|CVS|URL|TLS|NETRC|HTTP|INACTIVITY|DOWNLOAD|UPDATE|PATCH|CONFIGURE|BUILD|INSTALL|TEST|CMAKE|"
    r"SOURCE|BINARY|SUBBUILD|STAMP|TMP|PREFIX|LOG|USES_TERMINAL|STEP|INDEPENDENT|LIST|DEPENDS|EXCLUDE_FROM_ALL|"
    r"SYSTEM|OVERRIDE_FIND_PACKAGE|FIND_PACKAGE_ARGS|QUIET|COMMAND|WORKING_DIRECTORY|JOB_POOLS)(_[A-Z0-9_]*)?"
)
CMP0097_SINCE = (3, 16)  # the CMake release that introduced the policy: a minimum at or past it sets NEW
SUBMODULE_MODES = ("all", "none", "list", "unknown")


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    name: str
    args: tuple[str, ...]
    line: int
    quoted: tuple[bool, ...] = ()  # per argument: written as a quoted argument


@dataclass(frozen=True, kw_only=True, slots=True)
class FetchHit:
    name: str
    repo: str
    ref: str
    line: int
    env: str = ""
    subdir: str = ""
    submodules: tuple[str, ...] = ()  # the GIT_SUBMODULES list (mode "list")
    command: str = ""  # FetchContent_Declare | FetchContent_Populate | ExternalProject_Add
    submodule_mode: str = "all"
    submodules_recurse: bool = True
    cmake_override: str = ""  # FETCHCONTENT_SOURCE_DIR_<NAME> where CMake honours it
    env_branches: tuple[int, ...] = ()  # lines of the conditions on ``env`` that choose code


@dataclass(kw_only=True, slots=True)
class CMakeScan:
    rel: str
    env: list[tuple[str, int]] = field(default_factory=list)
    fetches: list[FetchHit] = field(default_factory=list)
    finds_torch: int = 0  # line of find_package(Torch ...), 0 when absent
    policy_version: str = ""  # the policy version cmake_minimum_required / cmake_policy(VERSION) set


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
        tokens = re.findall(r'"(?:[^"\\]|\\.)*"|\S+', text[m.end() : end])
        quoted = tuple(len(t) >= 2 and t.startswith('"') and t.endswith('"') for t in tokens)
        args = tuple(t[1:-1] if q else t for t, q in zip(tokens, quoted, strict=True))
        out.append(Command(name=m.group(1).lower(), args=args, line=text.count("\n", 0, m.start()) + 1, quoted=quoted))
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


def _substitute(value: str, variables: dict[str, str]) -> str:
    return VAR_RE.sub(lambda m: variables.get(m.group(1), m.group(0)), value)


def _values(cmd: Command, key: str) -> list[tuple[str, bool]] | None:
    """The arguments after option ``key`` up to the next option, with their quoting (None: no ``key``)."""
    if key not in cmd.args:
        return None
    start = cmd.args.index(key) + 1
    out: list[tuple[str, bool]] = []
    for arg, quoted in zip(cmd.args[start:], cmd.quoted[start:], strict=True):
        if not quoted and OPTION_RE.fullmatch(arg):
            break
        out.append((arg, quoted))
    return out


def _keyword(cmd: Command, key: str) -> list[str]:
    return [value for value, _ in _values(cmd, key) or []]


def scan_cmake(path: Path, rel: str, *, policy_version: str = "") -> CMakeScan:
    """One CMake file's reads and fetches. ``policy_version``: the policy version in force where the file
    is included (the project's ``cmake_minimum_required``), for a file that sets none of its own."""
    text = strip_comments(read_regular(path).decode("utf-8", "replace"))
    scan = CMakeScan(rel=rel, policy_version=policy_version)
    for lineno, line in enumerate(text.splitlines(), 1):
        for m in ENV_READ_RE.finditer(line):
            scan.env.append((m.group(1) or m.group(2), lineno))
    variables: dict[str, str] = {}
    cmp0097 = ""  # an explicit cmake_policy(SET CMP0097 ...)
    cmds = commands(text)
    for cmd in cmds:
        if cmd.name == "set" and len(cmd.args) >= 2 and not cmd.args[0].startswith("ENV{"):
            variables[cmd.args[0]] = _substitute(cmd.args[1], variables)
        elif cmd.name == "cmake_minimum_required" or (cmd.name == "cmake_policy" and cmd.args[:1] == ("VERSION",)):
            scan.policy_version = _policy_version(cmd) or scan.policy_version
        elif cmd.name == "cmake_policy" and cmd.args[:2] == ("SET", "CMP0097") and len(cmd.args) >= 3:
            cmp0097 = cmd.args[2].upper()
        elif cmd.name == "find_package" and cmd.args[:1] == ("Torch",):
            scan.finds_torch = scan.finds_torch or cmd.line
        elif cmd.name in FETCH_COMMANDS and "GIT_REPOSITORY" in cmd.args:
            policy = cmp0097 or _policy_from_version(scan.policy_version)
            scan.fetches.append(_fetch(cmd, variables, scan.env, cmds, policy))
    return scan


def _policy_version(cmd: Command) -> str:
    """``VERSION min[...max]``: policies are set as of ``max`` when given (CMake 3.12+), else ``min``."""
    values = _keyword(cmd, "VERSION")
    if not values:
        return ""
    low, _, high = values[0].partition("...")
    return high or low


def _policy_from_version(version: str) -> str:
    parts = re.match(r"^(\d+)\.(\d+)", version)
    if not parts:
        return ""
    return "NEW" if (int(parts.group(1)), int(parts.group(2))) >= CMP0097_SINCE else "OLD"


def submodule_mode(cmd: Command, variables: dict[str, str], cmp0097: str) -> tuple[str, tuple[str, ...]]:
    """(mode, listed paths) of the submodules CMake clones for ``cmd``: an unquoted argument expands to
    the list elements of its value (empty ones dropped), a quoted one is one element, even empty."""
    raw = _values(cmd, "GIT_SUBMODULES")
    if raw is None:
        return "all", ()
    elements: list[str] = []
    for arg, quoted in raw:
        value = _substitute(arg, variables)
        if VAR_RE.search(value):
            return "unknown", ()  # a variable this file does not set: its value is not known here
        elements += [value] if quoted else [v for v in value.split(";") if v]
    listed = tuple(e for e in elements if e)
    if listed:
        return "list", listed
    if not elements:
        return "all", ()  # the option with no value is the option not given
    if cmd.name == "externalproject_add":
        return {"NEW": "none", "OLD": "all"}.get(cmp0097, "unknown"), ()
    return "none", ()  # FetchContent's own sub-build runs with every policy NEW


def _fetch(
    cmd: Command, variables: dict[str, str], env: list[tuple[str, int]], cmds: list[Command], cmp0097: str
) -> FetchHit:
    def one(key: str) -> str:
        values = _keyword(cmd, key)
        return _substitute(values[0], variables) if values else ""

    src_dirs = [name for name, line in env if name.endswith("_SRC_DIR") and line <= cmd.line]
    var = src_dirs[-1] if src_dirs else ""
    mode, listed = submodule_mode(cmd, variables, cmp0097)
    recurse = one("GIT_SUBMODULES_RECURSE").upper() not in ("OFF", "FALSE", "0", "NO", "N", "IGNORE")
    return FetchHit(
        name=cmd.args[0],
        repo=one("GIT_REPOSITORY"),
        ref=one("GIT_TAG"),
        line=cmd.line,
        env=var,
        subdir=one("SOURCE_SUBDIR"),
        submodules=listed,
        command=FETCH_COMMANDS[cmd.name],
        submodule_mode=mode,
        submodules_recurse=recurse,
        cmake_override=_override(cmd),
        env_branches=branches(cmds, var) if var else (),
    )


def _override(cmd: Command) -> str:
    """``FETCHCONTENT_SOURCE_DIR_<NAME>`` (CMake upper-cases the content name, ASCII only) for a
    declaration CMake honours it for; '' for a FetchContent_Populate with its own options or an
    ExternalProject_Add."""
    if cmd.name != "fetchcontent_declare":
        return ""
    name = "FETCHCONTENT_SOURCE_DIR_" + cmd.args[0].translate(_UPPER)
    return name if CMAKE_FETCH_OVERRIDE_RE.fullmatch(name) else ""  # a name a spec can give (and print) safely


_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def branches(cmds: list[Command], var: str) -> tuple[int, ...]:
    """Lines of the ``if``/``elseif`` conditions that test ``var`` (the variable or ``ENV{var}``) to choose
    code; a condition whose only body is ``set(var $ENV{var})`` (the copy) is not a choice, and one nested
    in the block of a choice is part of that choice (a check of the local tree it already took)."""
    word = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(var)}(?![A-Za-z0-9_])")
    out: list[int] = []
    inside = -1  # the index of the endif that closes the block of the last choice counted
    for i, cmd in enumerate(cmds):
        if i < inside or cmd.name not in ("if", "elseif") or not any(word.search(a) for a in cmd.args):
            continue
        body = _body(cmds, i)
        copy = (
            len(body) == 1
            and body[0].name == "set"
            and body[0].args[:1] == (var,)
            and body[0].args[1:] == (f"$ENV{{{var}}}",)
        )
        if not copy:
            out.append(cmd.line)
            inside = _block_end(cmds, i)
    return tuple(out)


def _block_end(cmds: list[Command], at: int) -> int:
    """The index of the ``endif`` that closes the block the condition at ``at`` belongs to."""
    depth = 0
    for j in range(at + 1, len(cmds)):
        if cmds[j].name == "if":
            depth += 1
        elif cmds[j].name == "endif":
            if not depth:
                return j
            depth -= 1
    return len(cmds)


def _body(cmds: list[Command], at: int) -> list[Command]:
    """The commands of the branch that the condition at ``at`` opens (nested blocks included)."""
    depth, out = 0, []
    for cmd in cmds[at + 1 :]:
        if cmd.name == "if":
            depth += 1
        elif cmd.name == "endif" and depth:
            depth -= 1
        elif cmd.name in ("endif", "elseif", "else") and not depth:
            break
        out.append(cmd)
    return out
