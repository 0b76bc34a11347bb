"""`-q` is quiet: `check` and `lock check` print only what fails (or is not ok), on the shipped spec."""

from __future__ import annotations

import shutil
from pathlib import Path

from megacpp_env.cli import main
from megacpp_env.spec import load_spec
from tests.fixtures.install import REPO_ROOT

SPEC = str(REPO_ROOT / "stack.yaml")


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_check_quiet_prints_nothing_when_it_passes(capsys):
    rc, loud, _ = run(capsys, "check", "--spec", SPEC)
    assert rc == 0 and "suppressed warning" in loud and loud.rstrip().splitlines()[-1].endswith(" suppressed")
    rc, out, err = run(capsys, "-q", "check", "--spec", SPEC)
    assert (rc, out, err) == (0, "", "")


def _with_a_warning(where: Path) -> str:
    """The shipped spec (and its facts) in ``where``, smoke's suppression of TC005 dropped: a warning no
    suppression covers (every warning of the shipped spec is suppressed, each with its reason)."""
    shutil.copytree(REPO_ROOT / "facts", where / "facts")
    shutil.copytree(REPO_ROOT / "overlays", where / "overlays")
    lines = (REPO_ROOT / "stack.yaml").read_text().splitlines(keepends=True)
    at = load_spec(REPO_ROOT / "stack.yaml").lines["targets.smoke.ignore"] - 1
    assert lines[at].strip() == "ignore:" and lines[at + 1].strip().startswith("TC005:")
    (where / "stack.yaml").write_text("".join(lines[:at] + lines[at + 2 :]))
    return str(where / "stack.yaml")


def test_check_quiet_prints_the_failing_findings_and_the_verdict(capsys, tmp_path):
    spec = _with_a_warning(tmp_path)
    rc, loud, _ = run(capsys, "check", "--strict", "--spec", spec)
    rc_q, out, _ = run(capsys, "-q", "check", "--strict", "--spec", spec)
    assert rc == rc_q == 1
    assert "warning TC005 targets.smoke.base_image" in out
    # with --strict every warning fails, so each is shown; suppressed findings never fail
    assert out.splitlines() == [line for line in loud.splitlines() if ": suppressed " not in line]


def test_lock_check_quiet_lists_only_what_is_not_ok(capsys):
    rc, loud, _ = run(capsys, "lock", "check", "--allow-unlocked", "--spec", SPEC)
    assert rc == 0 and "ok: smoke linux/amd64" in loud and "consistent" in loud
    rc, out, _ = run(capsys, "-q", "lock", "check", "--allow-unlocked", "--spec", SPEC)
    assert rc == 0
    assert out.splitlines() == [line for line in loud.splitlines() if line.startswith("unlocked: ")]
    assert run(capsys, "-q", "lock", "check", "smoke", "cuda_smoke", "--spec", SPEC)[:2] == (0, "")


def test_targets_columns_are_as_wide_as_their_data(capsys):
    rc, out, _ = run(capsys, "targets", "--spec", SPEC)
    assert rc == 0
    lines = out.splitlines()
    names = [line.split()[0] for line in lines]
    assert "cuda_smoke" in names
    starts = {line.index(line.split()[1], len(line.split()[0])) for line in lines}
    assert starts == {max(map(len, names)) + 1}  # every platforms column starts at the same offset
