"""The compilers' cache (``collectors.compilers.ToolCache``): an ELF program's answer is kept while
its file is unchanged; a Python script of the inspected interpreter's only while the snapshot's own
verdict on everything it can import holds (every distribution clean, unowned files unchanged);
any other script is always asked. Real programs, real scripts, a real sealed cache."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

from megacpp_env.snapshot.collectors import compilers
from megacpp_env.snapshot.options import Cache

PATTERN = r"version\s+(\S+)"


def _cache(tmp_path: Path) -> Cache:
    return Cache(root=tmp_path / "cache", key=b"k" * 32, records=tmp_path / "cache" / "r")


def _script(path: Path, interpreter: str, version: str) -> Path:
    path.write_text(f"#!{interpreter}\nprint('tool version {version}')\n")
    path.chmod(0o755)
    return path


def _ask(tmp_path: Path, program: Path, verdict: str | None, python: str = sys.executable) -> tuple[dict, int]:
    """(the answer, how many times the program ran) through a fresh cache object, as a snapshot does."""
    runs = tmp_path / "runs"
    env = {"PATH": os.environ["PATH"], "RUNS": str(runs)}
    tools = compilers.ToolCache(_cache(tmp_path), env, [], python=python, script_key=lambda: verdict)
    before = runs.stat().st_size if runs.exists() else 0
    out = compilers.probe_tool(str(program), ["--version"], PATTERN, env, tools)
    tools.save()
    return out, (runs.stat().st_size if runs.exists() else 0) - before


def _counting(path: Path, interpreter: str, version: str) -> Path:
    path.write_text(
        f"#!{interpreter}\nimport os\nopen(os.environ['RUNS'], 'a').write('x')\nprint('tool version {version}')\n"
    )
    path.chmod(0o755)
    return path


def test_a_script_of_the_inspected_interpreter_is_kept_while_the_verdict_holds(tmp_path: Path) -> None:
    tool = _counting(tmp_path / "tool", sys.executable, "1.0")
    assert _ask(tmp_path, tool, "clean-1") == ({"path": str(tool), "version": "1.0"}, 1)
    assert _ask(tmp_path, tool, "clean-1")[1] == 0  # kept
    assert _ask(tmp_path, tool, "clean-2")[1] == 1  # another verdict: asked again
    assert _ask(tmp_path, tool, None)[1] == 1  # no verdict (something drifted): always asked
    assert _ask(tmp_path, tool, None)[1] == 1


def test_a_script_of_another_interpreter_is_never_kept(tmp_path: Path) -> None:
    other = tmp_path / "other-python"
    other.symlink_to(shutil.which("python3") or sys.executable)  # a path the inspected one is not
    tool = _counting(tmp_path / "tool", str(other), "1.0")
    for _ in range(2):
        assert _ask(tmp_path, tool, "clean", python=str(tmp_path / "inspected-python"))[1] == 1


def test_an_edited_script_is_asked_again(tmp_path: Path) -> None:
    tool = _counting(tmp_path / "tool", sys.executable, "1.0")
    _ask(tmp_path, tool, "clean")
    _counting(tool, sys.executable, "2.0")
    assert _ask(tmp_path, tool, "clean")[0]["version"] == "2.0"


def test_an_elf_program_is_kept_while_its_file_is_unchanged(tmp_path: Path) -> None:
    real = Path(shutil.which("true") or "/bin/true")
    elf = tmp_path / "elf"
    shutil.copy2(real, elf)
    env = {"PATH": os.environ["PATH"]}
    tools = compilers.ToolCache(_cache(tmp_path), env, [])
    key = tools.key(str(elf), ["--version"])
    assert key is not None
    shell = _script(tmp_path / "sh-tool", "/bin/sh", "1.0")
    assert tools.key(str(shell), ["--version"]) is None  # a shell script: never kept


def _result(
    statuses: dict[str, str], unowned: dict[str, list[str]] | None = None, **lists: list[str]
) -> SimpleNamespace:
    dists = {name: {"location": lists.pop("location", [""])[0], "integrity": {"status": status, **lists}}
             for name, status in statuses.items()}  # fmt: skip
    return SimpleNamespace(facts={"distributions": dists, "unowned_site_files": unowned or {}})


def test_no_verdict_where_a_distribution_cannot_be_verified() -> None:
    assert compilers.script_verdict(_result({"a": "ok"})) is not None
    assert compilers.script_verdict(_result({"a": "ok", "b": "no RECORD"})) is None
    assert compilers.script_verdict(_result({"a": "drifted"}, modified_count=[501])) is None  # a list cut short
    assert compilers.script_verdict(None) is None


def test_the_verdict_follows_a_drifted_file_edited_again(tmp_path: Path) -> None:
    """A distribution with a modified file: the facts list the same file after a second edit, the
    verdict does not stay the same."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "x.py").write_text("A = 1\n")
    result = _result({"a": "drifted"}, modified=["pkg/x.py"], location=[str(tmp_path)])
    first = compilers.script_verdict(result)
    (tmp_path / "pkg" / "x.py").write_text("A = 2\n")
    assert first is not None and compilers.script_verdict(result) not in (None, first)


def test_the_verdict_follows_the_unowned_files(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "hookdir").mkdir(parents=True)
    (site / "zzhook.py").write_text("X = 1\n")
    (site / "hookdir" / "m.py").write_text("Y = 1\n")
    result = _result({"a": "ok"}, {str(site): ["hookdir/", "zzhook.py"]})
    first = compilers.script_verdict(result)
    (site / "zzhook.py").write_text("X = 2\n")
    second = compilers.script_verdict(result)
    (site / "hookdir" / "m.py").write_text("Y = 22\n")
    third = compilers.script_verdict(result)
    assert len({first, second, third}) == 3
