"""docs/DESIGN.md's "Where a newcomer adds…" table, proven: in a temporary copy of the repository (the
files git tracks or would track), a newcomer adds each of the four kinds of thing exactly as the
table says (a verb, a rule, a snapshot collector, a target), runs the table's "then" commands (which
regenerate the generated files), and the tests that check each kind pass on the copy, unchanged. A
snapshot golden stored by the repository as it was still checks against the copy's snapshot, which
has the new area (its registration says how an older document reads it).

One test, run once: it copies the tree and runs a chosen set of the suite's test files in it (about
three minutes here).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.install import copy_tree

# What each row of the table asks for, as the newcomer would type it.
VERB = '''"""`megacpp-env count`: how many targets and sources the spec has."""

from __future__ import annotations

import argparse

from megacpp_env.commands._common import add_json, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_json(parser)


def run(args: argparse.Namespace) -> int:
    from megacpp_env.spec.view import target_rows
    from megacpp_env.ui import print_json

    rows = target_rows(load(args))
    if args.json:
        print_json({"targets": len(rows)})
    else:
        print(f"{len(rows)} targets")
    return 0
'''
VERB_LINE = '    "count": ("count", "count the targets of the spec"),\n'

RULE = '''"""A rule a newcomer adds: a module of its own, found by being here."""

from __future__ import annotations

from collections.abc import Iterator

from megacpp_env.rules.base import Hit, target_rule
from megacpp_env.spec.model import Spec, Target


@target_rule("NC001", "warning")
def short_description(spec: Spec, target: Target) -> Iterator[Hit]:
    """a target's description fits on one line

    `megacpp-env targets` lists a target with its description on one line: a long one wraps.

    Trip: set targets.smoke.description = ''' + "x" * 130 + '''
    """
    if len(target.description) > 120:
        yield (f"targets.{target.name}.description", "longer than 120 characters", "say it in one line")
'''

COLLECTOR = '''"""The machine's boot id: a snapshot area a newcomer adds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context


def start(ctx: Context) -> Callable[[], dict[str, Any]]:
    def collect() -> dict[str, Any]:
        boot = Path("/proc/sys/kernel/random/boot_id")
        return {"kernel_booted": boot.is_file()}

    return collect
'''
FRAGMENT = {
    "facts": {
        "type": "object",
        "description": "Whether the kernel says when it booted (a newcomer's area).",
        "properties": {"kernel_booted": {"type": "boolean", "description": "The kernel has a boot id."}},
        "additionalProperties": False,
        "required": ["kernel_booted"],
    }
}
COLLECTOR_LINE = '    Collector(area="boot", module="boot", timeout=10.0, code="SD013", severity="info", older="note"),\n'

TARGET = """  tiny:
    description: a CPU target that builds no source (added by a newcomer)
    platforms: [linux/amd64]
    base_image:
      linux/amd64: megacpp-base/debian-forky:amd64
    toolchain: debian-forky-cpu
    ignore:
      TC005: "megacpp-base/debian-forky is built locally: it has no registry digest to pin"
    requirements: [attrs>=24.2]
"""

# The tests that check each kind, run on the copy as they are.
CHECKS = {
    "verb": ["tests/test_verbs.py", "tests/test_cli.py::test_every_json_verb_has_a_failing_case",
             "tests/test_completion.py::test_shipped_scripts_are_current"],
    "rule": ["tests/test_policy.py", "tests/test_explain.py::test_docs_codes_md_is_current"],
    "collector": ["tests/test_snapshot_registry.py", "tests/test_snapshot_schema.py", "tests/test_snapshot_docs.py",
                  "tests/test_explain.py"],
    "target": ["tests/test_render.py", "tests/test_srcbuild_plan.py", "tests/test_pinning.py", "tests/test_spec.py"],
    "all": ["tests/test_layers.py"],
}  # fmt: skip


def _insert(path: Path, before: str, text: str, *, up: int = 0) -> None:
    """``text`` as the lines just before the first line that starts with ``before`` (``up`` lines higher)."""
    lines = path.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith(before)) - up
    path.write_text("".join([*lines[:at], text, *lines[at:]]))


def _run(root: Path, *argv: str, out: Path | None = None) -> str:
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("MEGACPP_ENV_SPEC", None)
    proc = subprocess.run([sys.executable, *argv], cwd=root, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    if out is not None:
        out.write_text(proc.stdout)
    return proc.stdout


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_tree(tmp_path_factory.mktemp("newcomer") / "repo", links=True)
    code = _run(root, "-c", "import megacpp_env; print(megacpp_env.__file__)")
    assert code.strip() == str(root / "megacpp_env" / "__init__.py")  # the copy's package, not this tree's
    return root


def test_each_row_of_the_table_is_one_place_and_its_generated_files(copy, tmp_path):
    root = copy
    # a golden stored by the repository as it is (the copy before any edit), before the new area exists
    golden = ["--python", sys.executable, "--golden-dir", str(tmp_path / "golden")]
    _run(root, "-m", "megacpp_env", "snapshot", "--golden", "before", "-q", *golden)

    # a verb: its module, one line in cli.VERBS; then the completions and, as it takes --json, a FAILING case
    (root / "megacpp_env" / "commands" / "count.py").write_text(VERB)
    _insert(root / "megacpp_env" / "cli.py", '    "bisect-check":', VERB_LINE)
    _insert(root / "tests" / "test_cli.py", '    "mirror-artifacts":', '    "count": ["count", "--spec", MISSING],\n')
    _run(root, "scripts/completions.py")
    # a rule: one decorated function in a module of rules/ (found by being there); then docs/CODES.md
    (root / "megacpp_env" / "rules" / "newcomer.py").write_text(RULE)
    # a collector: its module, its schema fragment, one registration; then the schema and docs/SNAPSHOT.md
    (root / "megacpp_env" / "snapshot" / "collectors" / "boot.py").write_text(COLLECTOR)
    (root / "megacpp_env" / "snapshot" / "schema" / "boot.json").write_text(json.dumps(FRAGMENT, indent=2) + "\n")
    _insert(root / "megacpp_env" / "snapshot" / "registry.py", "HOST_CODE", COLLECTOR_LINE, up=1)  # in COLLECTORS
    _run(root, "scripts/snapshot_docs.py")
    _run(root, "-m", "megacpp_env", "explain", "--all", "--format", "markdown", out=root / "docs" / "CODES.md")
    # a target: one entry under targets:; then its rendered files
    _insert(root / "stack.yaml", "# Targets meant to run the same stack", TARGET)
    _run(root, "-m", "megacpp_env", "render")

    assert "tiny" in json.loads(_run(root, "-m", "megacpp_env", "targets", "--json"))[-1]["name"]
    assert json.loads(_run(root, "-m", "megacpp_env", "count", "--json")) == {"targets": 5}
    assert "NC001 (warning): a target's description fits on one line" in _run(root, "-m", "megacpp_env", "explain", "NC001")
    assert (root / "images" / "tiny" / "Dockerfile").is_file()

    # the golden taken before the area existed still checks: the new area is a note, not drift
    checked = _run(root, "-m", "megacpp_env", "snapshot", "--check-golden", "before", *golden)
    assert re.search(r"boot: golden before predates this area .*: not compared", checked), checked
    assert "no drift between golden before and live" in checked

    tests = [t for kind in CHECKS.values() for t in kind]
    _run(root, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *tests)
