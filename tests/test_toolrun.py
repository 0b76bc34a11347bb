"""toolrun: the time limit read from the environment and the bounded run that pip.py and uv.py share."""

from __future__ import annotations

import sys

import pytest

from megacpp_env import netio
from megacpp_env.errors import ToolError
from megacpp_env.toolrun import Tool, env_seconds, run_tool

TOOL = Tool(what="py probe", program="the probe", errors=lambda proc: proc.stderr.strip(), hint=" (raise X)")


def test_env_seconds_reads_a_positive_number(monkeypatch):
    monkeypatch.delenv("MEGACPP_TEST_SECONDS", raising=False)
    assert env_seconds("MEGACPP_TEST_SECONDS", 7.0) == 7.0
    monkeypatch.setenv("MEGACPP_TEST_SECONDS", "  ")
    assert env_seconds("MEGACPP_TEST_SECONDS", 7.0) == 7.0
    monkeypatch.setenv("MEGACPP_TEST_SECONDS", " 2.5 ")
    assert env_seconds("MEGACPP_TEST_SECONDS", 7.0) == 2.5


@pytest.mark.parametrize("raw", ["soon", "0", "-1", "1e7", "nan", "inf", "x" * 60])
def test_env_seconds_refuses_anything_else(monkeypatch, raw):
    monkeypatch.setenv("MEGACPP_TEST_SECONDS", raw)
    with pytest.raises(ToolError) as exc:
        env_seconds("MEGACPP_TEST_SECONDS", 7.0)
    assert str(exc.value) == f"MEGACPP_TEST_SECONDS={raw[:40]!r}: expected a positive number of seconds"


def test_env_seconds_raises_the_callers_error(monkeypatch):
    monkeypatch.setenv(netio.DEADLINE_ENV, "soon")
    with pytest.raises(netio.NetError) as exc:
        netio.deadline_s(30.0)
    assert (exc.value.what, exc.value.detail) == (
        "",
        "MEGACPP_NET_DEADLINE='soon': expected a positive number of seconds",
    )


def test_run_tool_records_and_captures():
    commands: list[tuple[str, ...]] = []
    argv = [sys.executable, "-c", "import os, sys; print(os.environ['PROBE']); print('e', file=sys.stderr)"]
    run = run_tool(argv, TOOL, commands=commands, env={"PROBE": "seen"}, timeout_s=60)
    assert (run.args, run.returncode, run.stdout, run.stderr) == (tuple(argv), 0, "seen\n", "e\n")
    assert commands == [tuple(argv)]


def test_run_tool_failures_are_one_tool_error(tmp_path):
    commands: list[tuple[str, ...]] = []
    failing = [sys.executable, "-c", "import sys; print('bad input', file=sys.stderr); sys.exit(3)"]
    with pytest.raises(ToolError, match=r"\Apy probe failed:\nbad input\Z"):
        run_tool(failing, TOOL, commands=commands, env={}, timeout_s=60)
    with pytest.raises(ToolError, match=r"\Apy probe did not finish in 0.5s \(raise X\)\Z"):
        run_tool([sys.executable, "-c", "import time; time.sleep(30)"], TOOL, commands=commands, env={}, timeout_s=0.5)
    with pytest.raises(ToolError, match=r"\Acannot run the probe: No such file or directory\Z"):
        run_tool([str(tmp_path / "absent")], TOOL, commands=commands, env={}, timeout_s=60)
    assert len(commands) == 3  # each run is recorded before it starts
