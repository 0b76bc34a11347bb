"""The source-build closure: what images' source stages copy of the tool. It must be complete (it runs alone)
and small (no spec, no YAML, no templates), and follow the imports of the code as it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from megacpp_env.srcbuild.closure import closure, copy_closure
from tests.fixtures.srcbuild import REPO_ROOT

PROBE = """
import json, sys
import megacpp_env.srcbuild.__main__, megacpp_env.srcbuild.build, megacpp_env.srcbuild.collect, megacpp_env.sanity
mods = sorted(m for m in sys.modules if m == "megacpp_env" or m.startswith("megacpp_env."))
print(json.dumps({"file": megacpp_env.__file__, "modules": mods,
                  "third_party": sorted(m for m in ("yaml", "jinja2", "packaging") if m in sys.modules)}))
"""


def test_closure_is_small_and_spec_free() -> None:
    files = closure()
    assert "megacpp_env/srcbuild/build.py" in files and "megacpp_env/sanity.py" in files
    assert "megacpp_env/overlay.py" in files and "megacpp_env/checkout.py" in files and "megacpp_env/git.py" in files
    assert not [f for f in files if f.startswith(("megacpp_env/spec", "megacpp_env/commands", "megacpp_env/lock"))]
    assert "megacpp_env/render.py" not in files and "megacpp_env/sourceplans.py" not in files
    assert files == tuple(sorted(set(files)))


def test_every_module_loaded_at_run_time_is_in_the_closure(tmp_path: Path) -> None:
    tool = copy_closure(tmp_path / "tool")
    env = {**os.environ, "PYTHONPATH": str(tool)}
    proc = subprocess.run([sys.executable, "-P", "-c", PROBE], capture_output=True, text=True, env=env, check=True)
    seen = json.loads(proc.stdout)
    assert seen["file"] == str(tool / "megacpp_env" / "__init__.py")  # the copy, not the installed tool
    assert seen["third_party"] == []
    as_files = {m.replace(".", "/") for m in seen["modules"]}
    in_closure = {f.removesuffix("/__init__.py").removesuffix(".py") for f in closure()}
    assert as_files <= in_closure, as_files - in_closure


def test_lazy_imports_count_and_type_checking_ones_do_not(tmp_path: Path) -> None:
    pkg = tmp_path / "megacpp_env"
    (pkg / "entry").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "entry/__init__.py": "from megacpp_env import eager\n",
        "entry/main.py": (
            "from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from megacpp_env import typing_only\n"
            "def f():\n    from megacpp_env.deep import lazy\n    from . import sibling\n"
        ),
        "entry/sibling.py": "",
        "eager.py": "import megacpp_env.also\n",
        "also.py": "",
        "typing_only.py": "",
        "deep/__init__.py": "",
        "deep/lazy.py": "",
        "unused.py": "",
    }
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    got = closure(("megacpp_env.entry",), root=tmp_path)
    assert got == (
        "megacpp_env/__init__.py",
        "megacpp_env/also.py",
        "megacpp_env/deep/__init__.py",
        "megacpp_env/deep/lazy.py",
        "megacpp_env/eager.py",
        "megacpp_env/entry/__init__.py",
        "megacpp_env/entry/main.py",
        "megacpp_env/entry/sibling.py",
    )


def test_closure_lists_files_of_this_checkout() -> None:
    assert all((REPO_ROOT / f).is_file() for f in closure())


def test_a_changed_module_changes_the_closure_in_the_same_process(tmp_path: Path) -> None:
    """The parse of a module is kept by its bytes: an edit (even one that keeps the size and the mtime)
    is seen by the next call, and every call answers what a process that never parsed anything answers."""
    from megacpp_env.srcbuild import closure as closure_module

    pkg = tmp_path / "megacpp_env"
    (pkg / "srcbuild").mkdir(parents=True)
    for rel in ("__init__.py", "srcbuild/__init__.py", "a.py", "b.py"):
        (pkg / rel).write_text("")
    entry = pkg / "srcbuild" / "__init__.py"
    entry.write_text("import megacpp_env.a\n")
    stat = entry.stat()
    first = closure(("megacpp_env.srcbuild",), root=tmp_path)
    entry.write_text("import megacpp_env.b\n")  # same size
    os.utime(entry, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    warm = closure(("megacpp_env.srcbuild",), root=tmp_path)
    closure_module._PARSED.clear()
    assert warm == closure(("megacpp_env.srcbuild",), root=tmp_path)
    assert "megacpp_env/a.py" in first and "megacpp_env/b.py" not in first
    assert "megacpp_env/b.py" in warm and "megacpp_env/a.py" not in warm
