"""Static reads of Python build files (never executed, never importing torch).

``scan_file`` walks one file's AST and returns what the facts need from it: environment variables
read (``os.getenv``/``os.environ.get``/``os.environ[...]``/``in os.environ``, also through helper
functions that pass a parameter on to one of those), literal ``-gencode`` targets, a hard-coded
``nvcc --threads N``, the source files each extension compiles (``sources=[...]``), a division of
the job count by the nvcc thread count, build tools imported (torch's cpp_extension, setuptools-scm's ``get_version``),
local modules imported and file paths spelled out as string parts (``ROOT / "vllm" / "envs.py"``).
"""

from __future__ import annotations

import ast
import functools
import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path

from megacpp_env.errors import InputError
from megacpp_env.fsutil import read_regular

GENCODE_RE = re.compile(r"arch=compute_([0-9]+[a-z]?),code=(?:sm|compute)_([0-9]+[a-z]?)")
THREADS_RE = re.compile(r"^--threads[= ]([0-9]+)$")
UNIT_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")
ENV_FUNCS = {("os", "getenv"), ("os.environ", "get")}

MAX_SOURCE = 16 << 20  # the largest source file scanned


@dataclass(frozen=True, kw_only=True, slots=True)
class EnvHit:
    name: str
    line: int
    default: str | None = None
    compared: tuple[str, ...] = ()


@dataclass(kw_only=True, slots=True)
class FileScan:
    rel: str
    env: list[EnvHit] = field(default_factory=list)
    gencode: list[tuple[str, int]] = field(default_factory=list)
    threads: tuple[int, int] | None = None  # (count, line)
    units: list[tuple[int, int]] = field(default_factory=list)  # (source files, line) per ``sources=[...]``
    divides: int | None = None  # line of ``jobs // nvcc_threads`` (the build splits its jobs among nvcc threads)
    tools: list[tuple[str, int, str]] = field(default_factory=list)  # (name, line, detail)
    imports: list[tuple[str, int]] = field(default_factory=list)  # (dotted module, level), module level
    nested_imports: list[tuple[str, int]] = field(default_factory=list)  # inside functions
    paths: list[str] = field(default_factory=list)


def parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(read_regular(path, limit=MAX_SOURCE), filename=str(path))
    except (SyntaxError, ValueError, OSError, RecursionError, MemoryError):  # InputError is a ValueError
        return None


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def string_constants(tree: ast.Module, nodes: list[ast.AST] | None = None) -> dict[str, str]:
    """``NAME = "literal"`` assignments used to resolve env names and paths: module-level ones, and
    names assigned exactly one literal anywhere in the file (``env_var_name = "X"`` in a function)."""
    values: dict[str, set[str]] = {}
    for node in nodes if nodes is not None else ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, set()).add(node.value.value)
    out = {name: next(iter(v)) for name, v in values.items() if len(v) == 1}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def os_aliases(nodes: list[ast.AST]) -> dict[str, str]:
    """Local names bound to ``os``, ``os.environ`` and ``os.getenv`` (``import os as _os``)."""
    out = {"os": "os"}
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update({a.asname: "os" for a in node.names if a.name == "os" and a.asname})
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and not node.level:
            out.update({a.asname or a.name: f"os.{a.name}" for a in node.names if a.name in ("environ", "getenv")})
    return out


def canonical(dotted: str, aliases: dict[str, str]) -> str:
    head, dot, rest = dotted.partition(".")
    return aliases[head] + dot + rest if head in aliases else dotted


class _Scanner(ast.NodeVisitor):
    def __init__(
        self, rel: str, consts: dict[str, str], wrappers: dict[str, int], aliases: dict[str, str] | None = None
    ) -> None:
        self.aliases = aliases or {"os": "os"}
        self.out = FileScan(rel=rel)
        self.consts = consts
        self.wrappers = wrappers  # helper function name -> index of the parameter that is an env name
        self.parents: dict[int, ast.AST] = {}
        self.depth = 0  # > 0 inside a function body

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_If(self, node: ast.If) -> None:
        if _dotted(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):  # never runs
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def text(self, node: ast.expr | None) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return self.consts.get(node.id)
        return None

    def env_name(self, call: ast.Call) -> str | None:
        """The variable an env-reading call reads (None when it is not one or the name is not literal)."""
        func = canonical(_dotted(call.func), self.aliases)
        owner, _, attr = func.rpartition(".")
        if (owner, attr) in ENV_FUNCS:
            return self.text(call.args[0]) if call.args else None
        index = self.wrappers.get(func.rpartition(".")[2])
        if index is not None and len(call.args) > index:
            return self.text(call.args[index])
        return None

    def visit_Call(self, node: ast.Call) -> None:
        name = self.env_name(node)
        if name:
            default = self.text(node.args[1]) if len(node.args) > 1 else None
            self.out.env.append(EnvHit(name=name, line=node.lineno, default=default, compared=self.compared(node)))
        self.tool_call(node)
        self.path_parts(node)
        self.compile_units(node)
        self.generic_visit(node)

    def compile_units(self, node: ast.Call) -> None:
        """``Extension(..., sources=["a.cpp", "b.cu"])``: the translation units one extension compiles."""
        for kw in node.keywords:
            if kw.arg == "sources" and isinstance(kw.value, (ast.List, ast.Tuple)):
                files = [t for e in kw.value.elts if (t := self.text(e)) is not None and t.endswith(UNIT_SUFFIXES)]
                if files:
                    self.out.units.append((len(files), kw.value.lineno))

    def visit_BinOp(self, node: ast.BinOp) -> None:
        # vLLM's setup.py compute_num_jobs: ``num_jobs = max(1, num_jobs // nvcc_threads)``
        if isinstance(node.op, ast.FloorDiv) and "nvcc_threads" in _dotted(node.right).lower():
            self.out.divides = self.out.divides or node.lineno
        self.generic_visit(node)

    def compared(self, node: ast.expr) -> tuple[str, ...]:
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Compare) and parent.left is node:
            ops_ok = all(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in parent.ops)
            values = [v for c in parent.comparators for v in self.literals(c)]
            return tuple(values) if ops_ok else ()
        return ()

    def literals(self, node: ast.expr) -> list[str]:
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [t for e in node.elts if (t := self.text(e)) is not None]
        t = self.text(node)
        return [t] if t is not None else []

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if canonical(_dotted(node.value), self.aliases) == "os.environ" and isinstance(node.ctx, ast.Load):
            name = self.text(node.slice)
            if name:
                self.out.env.append(EnvHit(name=name, line=node.lineno, compared=self.compared(node)))
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        membership = len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn))
        if membership and canonical(_dotted(node.comparators[0]), self.aliases) == "os.environ":
            name = self.text(node.left)
            if name:
                self.out.env.append(EnvHit(name=name, line=node.lineno))
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            for m in GENCODE_RE.finditer(node.value):
                self.out.gencode.append((f"arch=compute_{m.group(1)},code=sm_{m.group(2)}", node.lineno))
            threads = THREADS_RE.match(node.value)
            if threads:
                self.out.threads = (int(threads.group(1)), node.lineno)

    def visit_List(self, node: ast.List) -> None:
        self.threads_pair(node.elts)
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        self.threads_pair(node.elts)
        self.generic_visit(node)

    def threads_pair(self, elts: list[ast.expr]) -> None:
        for a, b in itertools.pairwise(elts):
            if self.text(a) == "--threads":
                value = b.value if isinstance(b, ast.Constant) else None
                if isinstance(value, (int, str)) and str(value).isdigit():
                    self.out.threads = (int(value), a.lineno)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.imported(alias.name, 0, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        self.imported(module, node.level, node.lineno)
        for alias in node.names:
            self.record_import(f"{module}.{alias.name}" if module else alias.name, node.level)

    def record_import(self, module: str, level: int) -> None:
        (self.out.nested_imports if self.depth else self.out.imports).append((module, level))

    def imported(self, module: str, level: int, line: int) -> None:
        self.record_import(module, level)
        if module == "torch.utils.cpp_extension" or module.startswith("torch.utils.cpp_extension."):
            self.out.tools.append(("torch.utils.cpp_extension", line, ""))

    def tool_call(self, node: ast.Call) -> None:
        func = _dotted(node.func)
        if func in ("get_version", "setuptools_scm.get_version"):
            kws = {k.arg for k in node.keywords}
            detail = "dist_name given" if "dist_name" in kws else "no dist_name: only SETUPTOOLS_SCM_PRETEND_VERSION"
            self.out.tools.append(("setuptools_scm.get_version", node.lineno, detail))

    def path_parts(self, node: ast.Call) -> None:
        parts = [t for a in node.args for t in _path_texts(a, self)]
        if len(parts) >= 2 or (parts and parts[-1].endswith(".py")):
            self.out.paths.append("/".join(parts))


def _path_texts(node: ast.expr, scanner: _Scanner) -> list[str]:
    """String parts of a path expression: ``ROOT / "a" / "b.py"`` or the arguments of os.path.join."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _path_texts(node.left, scanner) + _path_texts(node.right, scanner)
    text = scanner.text(node)
    return [text] if text and "/" not in text.strip("/") and text.strip() else []


def _wrappers(nodes: list[ast.AST], aliases: dict[str, str]) -> dict[str, int]:
    """Helper functions that read the environment variable named by one of their parameters
    (``def _tri_flag(name): os.environ.get(name)``), to a fixpoint (wrappers of wrappers)."""
    found: dict[str, int] = {}
    funcs = [n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    calls = {id(fn): [c for c in ast.walk(fn) if isinstance(c, ast.Call)] for fn in funcs}
    changed = True
    while changed:
        changed = False
        for fn in funcs:
            if fn.name in found:
                continue
            params = [a.arg for a in fn.args.args]
            bound = 1 if params[:1] in (["self"], ["cls"]) else 0  # a method: calls omit self
            index = _param_passed(calls[id(fn)], params, found, aliases)
            if index is not None and index >= bound:
                found[fn.name] = index - bound
                changed = True
    return found


def _param_passed(
    calls: list[ast.Call], params: list[str], wrappers: dict[str, int], aliases: dict[str, str]
) -> int | None:
    for node in calls:
        func = canonical(_dotted(node.func), aliases)
        owner, _, attr = func.rpartition(".")
        index = 0 if (owner, attr) in ENV_FUNCS else wrappers.get(attr or func)
        if index is None or len(node.args) <= index:
            continue
        arg = node.args[index]
        if isinstance(arg, ast.Name) and arg.id in params:
            return params.index(arg.id)
    return None


def scan_file(path: Path, rel: str) -> FileScan:
    """One file's reads (cached by content: a closure and the scan that follows it read each file once,
    and a file edited in between is scanned again)."""
    try:
        data = read_regular(path, limit=MAX_SOURCE)
    except (OSError, InputError):
        return FileScan(rel=rel)
    return _scan_bytes(data, str(path), rel)


@functools.lru_cache(maxsize=4096)
def _scan_bytes(data: bytes, filename: str, rel: str) -> FileScan:
    try:
        tree: ast.Module | None = ast.parse(data, filename=filename)
    except (SyntaxError, ValueError):
        tree = None
    if tree is None:
        return FileScan(rel=rel)
    nodes = list(ast.walk(tree))
    reads_env = b"environ" in data or b"getenv" in data
    aliases = os_aliases(nodes)
    scanner = _Scanner(rel, string_constants(tree, nodes), _wrappers(nodes, aliases) if reads_env else {}, aliases)
    if reads_env:
        for parent in nodes:
            for child in ast.iter_child_nodes(parent):
                scanner.parents[id(child)] = parent
    scanner.visit(tree)
    return scanner.out
