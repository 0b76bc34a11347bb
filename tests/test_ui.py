"""Terminal behaviour: colour (NO_COLOR/FORCE_COLOR), -q/-v, and progress only on a real TTY."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest

from megacpp_env import render, ui
from megacpp_env.spec import load_spec
from tests.fixtures.spec import REPO_ROOT


class Pipe:
    def isatty(self):
        return False


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, False),  # not a terminal
        ({"FORCE_COLOR": "1"}, True),
        ({"FORCE_COLOR": "0"}, False),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),  # NO_COLOR wins
        ({"NO_COLOR": ""}, False),  # empty NO_COLOR is unset; still not a terminal
    ],
)
def test_colour_follows_no_color_and_force_color(monkeypatch, env, expected):
    for key in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert ui.color_enabled(Pipe()) is expected
    assert (ui.paint("x", "error", stream=Pipe()) != "x") is expected


def test_colour_on_a_terminal_unless_no_color(monkeypatch):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    leader, follower = pty.openpty()
    try:
        with os.fdopen(follower, "w", closefd=False) as tty:
            assert ui.paint("FAILED", "error", stream=tty) == "\x1b[1;31mFAILED\x1b[0m"
            monkeypatch.setenv("NO_COLOR", "1")
            assert ui.paint("FAILED", "error", stream=tty) == "FAILED"
    finally:
        os.close(leader)
        os.close(follower)


def test_paint_diff_colours_changed_lines(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same\n"
    assert ui.paint_diff(diff, stream=Pipe()) == (
        "\x1b[1m--- a/x\x1b[0m\n\x1b[1m+++ b/x\x1b[0m\n\x1b[2m@@ -1 +1 @@\x1b[0m\n"
        "\x1b[31m-old\x1b[0m\n\x1b[32m+new\x1b[0m\n same\n"
    )
    monkeypatch.setenv("NO_COLOR", "1")
    assert ui.paint_diff(diff, stream=Pipe()) == diff


def _cli(*args, env=None, cwd=REPO_ROOT):
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR", "CI")} | (env or {})
    return subprocess.run([sys.executable, "-m", "megacpp_env", *args], cwd=cwd, env=full, capture_output=True,
                          text=True, check=False)  # fmt: skip


def test_quiet_and_verbose(tmp_path):
    (tmp_path / "stack.yaml").write_text((REPO_ROOT / "stack.yaml").read_text())
    first = _cli("render", cwd=tmp_path)
    files = len(render.render_all(load_spec(REPO_ROOT / "stack.yaml")))  # 3 Dockerfiles and their source plans
    assert first.returncode == 0 and first.stdout.count("wrote: ") == files and files > 3
    assert _cli("render", cwd=tmp_path).stdout.count("unchanged: ") == files
    assert _cli("-q", "render", cwd=tmp_path).stdout == ""
    assert _cli("render", "--quiet", cwd=tmp_path).stdout == ""  # after the verb too
    verbose = _cli("-v", "gate", "--base", "HEAD")
    assert verbose.returncode == 0
    assert "megacpp-env: megacpp_env.git: git: rev-parse --verify --quiet HEAD^{commit}" in verbose.stderr
    assert "megacpp_env.git" not in _cli("gate", "--base", "HEAD").stderr


def test_errors_are_red_only_when_asked(tmp_path):
    plain = _cli("targets", "--spec", str(tmp_path / "nope.yaml"))
    assert plain.stderr.startswith("megacpp-env targets: error: ")
    forced = _cli("targets", "--spec", str(tmp_path / "nope.yaml"), env={"FORCE_COLOR": "1"})
    assert forced.stderr.startswith("megacpp-env targets: \x1b[1;31merror\x1b[0m: ")


def _on_a_tty(*args, env=None):
    """Run the CLI with stderr on a real pseudo-terminal; returns (stdout, what the terminal got)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # 40 rows, 120 columns
    full = {k: v for k, v in os.environ.items() if k != "CI"} | {"TERM": "xterm"} | (env or {})
    proc = subprocess.Popen([sys.executable, "-m", "megacpp_env", *args], cwd=REPO_ROOT, env=full,
                            stdout=subprocess.PIPE, stderr=follower, text=True)  # fmt: skip
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    out = proc.stdout.read()
    proc.wait()
    os.close(leader)
    return proc.returncode, out, b"".join(chunks).decode(errors="replace")


def test_snapshot_shows_progress_on_a_terminal_only(tmp_path):
    rc, _out, tty = _on_a_tty("snapshot", "--no-cache", "-o", str(tmp_path / "a.json"))
    assert rc == 0
    assert "\r\x1b[2Ksnapshot " in tty and "verifying installed files" in tty
    assert tty.rstrip().endswith("\x1b[2K") or "snapshot sha256:" not in tty  # the line is cleared at the end
    for extra in ({"CI": "true"}, None):
        args = ("snapshot", "--no-cache", "--json") if extra is None else ("snapshot", "--no-cache", "-o", str(tmp_path / "b.json"))
        rc, _out, tty = _on_a_tty(*args, env=extra)
        assert rc == 0 and "\x1b[2K" not in tty, extra
    rc, out, tty = _on_a_tty("-q", "snapshot", "--no-cache", "-o", str(tmp_path / "c.json"))
    assert rc == 0 and tty == "" and out == ""  # -q: no progress, no summary; the document is written
    assert json.loads((tmp_path / "c.json").read_text())["digest"].startswith("sha256:")


def _drain(fd: int) -> str:
    import select

    data = b""
    while select.select([fd], [], [], 0.3)[0]:
        data += os.read(fd, 65536)
    return data.decode()


@pytest.mark.parametrize(
    ("ci", "verbosity", "shows_status", "shows_log"),
    [("", 0, True, False), ("true", 0, False, True), ("", 1, False, True), ("", -1, False, False)],
    ids=["terminal", "ci", "verbose", "quiet"],
)
def test_build_log_on_a_terminal_is_one_status_line(monkeypatch, ci, verbosity, shows_status, shows_log):
    from types import SimpleNamespace

    from megacpp_env.commands.build import _log_view

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    tty = os.fdopen(follower, "w")
    monkeypatch.setattr(sys, "stderr", tty)
    monkeypatch.setenv("CI", ci) if ci else monkeypatch.delenv("CI", raising=False)
    ui.configure(verbosity=verbosity)
    try:
        with _log_view(SimpleNamespace(target=SimpleNamespace(name="smoke"), platform="linux/amd64"), as_json=False) as on_line:
            on_line("#5 [toolchain 2/6] RUN apt-get update")
            on_line("#5 0.512 Get:1 http://deb.example/debian forky InRelease")
        tty.flush()
        seen = _drain(leader)
    finally:
        ui.configure(verbosity=0)
        tty.close()
        os.close(leader)
    assert ("smoke linux/amd64" in seen and "#5 [toolchain 2/6] RUN apt-get update" in seen) is shows_status
    assert ("Get:1 http://deb.example" in seen) is shows_log


def test_verbose_logging_is_added_once_and_removed(capsys):
    import logging

    from megacpp_env.cli import main

    logger = logging.getLogger("megacpp_env")
    for _ in range(2):
        assert main(["-v", "--spec", str(REPO_ROOT / "stack.yaml"), "gate", "--base", "HEAD"]) == 0
    assert len([h for h in logger.handlers if getattr(h, "megacpp_env_cli", False)]) == 1
    assert main(["--spec", str(REPO_ROOT / "stack.yaml"), "targets"]) == 0
    assert not [h for h in logger.handlers if getattr(h, "megacpp_env_cli", False)]
    capsys.readouterr()
