"""Golden runs through the CLI: store, check (exit 0), drift (exit 1 with the diff printed)."""

from __future__ import annotations

import json

import pytest

from megacpp_env.cli import main


@pytest.fixture
def cli(tmp_path, monkeypatch, snap_venv):
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CPPMEGA_MAMBA3_P1", raising=False)
    base = [
        "--spec",
        str(tmp_path / "none.yaml"),
        "--python",
        str(snap_venv.python),
        "--golden-dir",
        str(tmp_path / "golden"),
    ]
    return lambda *args: main(["snapshot", *base, *args])


def test_store_then_check_golden(cli, tmp_path, capsys, monkeypatch, snap_venv):
    assert cli("--golden", "bench-1") == 0
    stored = json.loads((tmp_path / "golden" / "bench-1.json").read_text())
    assert stored["schema"] == "megacpp-env/snapshot"
    assert cli("--check-golden", "bench-1") == 0
    assert "no drift between golden bench-1 and live" in capsys.readouterr().out
    monkeypatch.setenv("CPPMEGA_MAMBA3_P1", "0")
    (snap_venv.site / "demo_pkg" / "ops" / "x.py").write_text("patched = True\n")
    assert cli("--check-golden", "bench-1") == 1
    out = capsys.readouterr().out
    assert "demo_pkg 1.0: 1 file modified since install: demo_pkg/ops/x.py" in out
    assert "env CPPMEGA_MAMBA3_P1: unset -> 0" in out
    assert cli("--check-golden", "bench-1", "--ignore", "env", "--ignore", "python") == 0


def test_missing_golden_and_bad_names(cli, capsys):
    assert cli("--check-golden", "nope") == 1
    assert "no golden snapshot 'nope'" in capsys.readouterr().err
    assert cli("--golden", "../escape") == 1
    assert "golden name '../escape'" in capsys.readouterr().err


def test_golden_dir_comes_from_the_spec(tmp_path, stack_data, snap_options):
    from megacpp_env.snapshot.golden import golden_dir
    from tests.fixtures.spec import load_data

    spec = load_data(stack_data, tmp_path / "stack.yaml")
    assert golden_dir(spec, None) == tmp_path / ".megacpp" / "golden"
    assert golden_dir(None, tmp_path / "x") == tmp_path / "x"
