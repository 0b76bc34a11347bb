"""`run --golden`: CMD runs on the golden's environment with its exit code passed through; drift is
refused (or run with --allow-drift, and said); every attempt leaves one JSON line in the run record."""

from __future__ import annotations

import json
import os
import sys

import pytest

from megacpp_env.cli import main
from megacpp_env.repro.runrecord import read


@pytest.fixture
def golden(tmp_path, monkeypatch, snap_venv):
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    gold = tmp_path / "golden"
    assert main(["snapshot", "--spec", str(tmp_path / "none.yaml"), "--python", str(snap_venv.python),
                 "--golden", "bench", "--golden-dir", str(gold)]) == 0  # fmt: skip
    return gold


def _run(gold, *args):
    return main(["run", "--spec", str(gold / "none.yaml"), "--golden", "bench", "--golden-dir", str(gold), *args])


def test_cmd_runs_with_its_exit_code_and_a_record(golden, capfd):
    assert _run(golden, "--", sys.executable, "-c", "import sys; print('out'); sys.exit(3)") == 3
    out, err = capfd.readouterr()
    assert out == "out\n" and "environment is golden bench" in err
    (record,) = _read(golden / "bench.runs.jsonl")
    assert record["cmd"] == [sys.executable, "-c", "import sys; print('out'); sys.exit(3)"]
    assert (record["ran"], record["exit_code"], record["drift"], record["allowed_drift"]) == (True, 3, False, False)
    assert record["snapshot_digest"] == record["golden_digest"]
    assert record["wall_s"] > 0 and record["precheck_s"] > 0 and record["cwd"] == os.getcwd()


def test_a_signal_exit_is_128_plus_the_signal(golden):
    assert _run(golden, "--", sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)") == 143


CHILD = """
import pathlib, signal, sys, time
def stop(signum, frame):
    pathlib.Path(sys.argv[1]).write_text(signal.Signals(signum).name)
    sys.exit(7)
signal.signal(signal.SIGTERM, stop)
pathlib.Path(sys.argv[2]).write_text("ready")
time.sleep(120)
"""


def test_sigterm_to_the_program_reaches_cmd_which_is_waited_for_and_recorded(golden, tmp_path):
    """SIGTERM sent to megacpp-env alone (a scheduler stopping the job) is passed on to the benchmark,
    which ends as it chooses; its exit code is the program's and the run record has it (SIGTERM's
    default action killed the program and left the benchmark running, unrecorded)."""
    import signal
    import subprocess
    import time

    got, ready = tmp_path / "got", tmp_path / "ready"
    argv = [sys.executable, "-m", "megacpp_env", "run", "--spec", str(golden / "none.yaml"), "--golden", "bench",
            "--golden-dir", str(golden), "--", sys.executable, "-c", CHILD, str(got), str(ready)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert ready.exists(), proc.communicate()[1]
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert (proc.returncode, got.read_text()) == (7, "SIGTERM"), err
    (record,) = _read(golden / "bench.runs.jsonl")
    assert (record["ran"], record["exit_code"]) == (True, 7)


def test_drift_is_refused_and_recorded(golden, snap_venv, capsys, tmp_path):
    (snap_venv.site / "demo_pkg" / "ops" / "x.py").write_text("patched = True\n")
    marker = tmp_path / "ran"
    record_file = tmp_path / "runs.jsonl"
    cmd = ["--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    assert _run(golden, "--record", str(record_file), "--json", *cmd) == 1
    assert not marker.exists()
    out, err = capsys.readouterr()
    assert "demo_pkg 1.0: 1 file modified since install: demo_pkg/ops/x.py" in err and "refused" in err
    assert json.loads(out)["refused"] is True
    (record,) = _read(record_file)
    assert (record["ran"], record["exit_code"], record["wall_s"], record["drift"]) == (False, None, None, True)
    assert record["drift_summary"]["findings"] == ["demo_pkg 1.0: 1 file modified since install: demo_pkg/ops/x.py"]
    assert record["snapshot_digest"] != record["golden_digest"]
    assert _run(golden, "--record", str(record_file), "--allow-drift", *cmd) == 0
    assert marker.exists() and "WARNING: running on an environment that drifted" in capsys.readouterr().err
    assert _read(record_file)[-1]["allowed_drift"] is True
    assert _run(golden, "--record", str(record_file), "--ignore", "python", *cmd) == 0


def test_no_command_and_a_special_record_file_are_refused_before_anything_runs(golden, tmp_path, capsys):
    assert _run(golden) == 1
    assert "no command to run: put it after --" in capsys.readouterr().err
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert _run(golden, "--record", str(fifo), "--", sys.executable, "-c", "pass") == 1
    assert "not a regular file" in capsys.readouterr().err


def test_the_precheck_inspects_what_the_golden_inspected(golden, tmp_path, monkeypatch):
    """Not the tool's interpreter and not $VIRTUAL_ENV's (an empty venv here): the golden's --python."""
    from tests.fixtures.snapshot import make_venv

    monkeypatch.setenv("VIRTUAL_ENV", str(make_venv(tmp_path / "elsewhere").root))
    assert _run(golden, "--ignore", "env.VIRTUAL_ENV", "--", sys.executable, "-c", "pass") == 0
    assert _run(golden, "--python", str(tmp_path / "elsewhere" / "bin" / "python"), "--ignore", "env.VIRTUAL_ENV",
                "--", sys.executable, "-c", "pass") == 1  # fmt: skip


def _read(path) -> list[dict]:
    return [r.to_dict() for r in read(path)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json\n", ":1: not JSON"),
        ("[1]\n", ":1: expected a table at the top, got an array"),
        ('{"surprise": 1}\n', ":1: unknown key(s): surprise"),
    ],
)
def test_a_bad_run_record_line_is_named(tmp_path, text, message):
    from megacpp_env.repro.runrecord import RunRecordError

    path = tmp_path / "runs.jsonl"
    path.write_text(text)
    with pytest.raises(RunRecordError) as err:
        read(path)
    assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_a_command_line_with_a_newline_is_recorded_and_read_back(golden):
    """A `python -c` script spans lines: the record keeps the argument as it was (JSON escapes it), and
    reading the record back gives it (the reader refused it as a control character)."""
    script = "import sys\nsys.exit(4)"
    assert _run(golden, "--", sys.executable, "-c", script) == 4
    (record,) = _read(golden / "bench.runs.jsonl")
    assert record["cmd"] == [sys.executable, "-c", script]


def test_a_working_directory_with_a_newline_is_recorded_and_read_back(golden, tmp_path, monkeypatch):
    """The sibling of a newline in an argument: the directory the command ran in."""
    odd = tmp_path / "bench\nrun"
    odd.mkdir()
    monkeypatch.chdir(odd)
    assert _run(golden, "--", sys.executable, "-c", "pass") == 0
    (record,) = _read(golden / "bench.runs.jsonl")
    assert record["cwd"] == str(odd)
