"""`lock` argument parsing: sub-commands, platform selection (no uv, no network: every case fails
before a resolution would start)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from megacpp_env import uv
from megacpp_env.cli import main

SPEC = str(Path(__file__).resolve().parent.parent / "stack.yaml")


def run(capsys, *argv):
    rc = main([*argv, "--spec", SPEC])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # each sub-command has only its own options: one that belongs to another is refused by argparse,
        # wherever it stands, before or after the targets
        (["check", "--align"], "unrecognized arguments: --align"),
        (["check", "smoke", "--upgrade"], "unrecognized arguments: --upgrade"),
        (["export", "--allow-unlocked"], "unrecognized arguments: --allow-unlocked"),
        (["resolve", "--format", "markdown"], "unrecognized arguments: --format"),
        (["resolve", "smoke", "--format", "json"], "unrecognized arguments: --format json"),
        (["--check", "--align"], "--check is now a sub-command: megacpp-env lock check [TARGET...]"),
    ],
)
def test_options_of_another_sub_command_are_usage_errors(argv, message, capsys):
    uv.COMMANDS.clear()
    rc, out, err = run(capsys, "lock", *argv)
    assert (rc, out) == (2, "")
    assert err.startswith("usage: megacpp-env lock ") and message in err
    assert uv.COMMANDS == []


def test_options_after_targets_still_apply(capsys):
    rc, out, _ = run(capsys, "lock", "check", "smoke", "--platform", "linux/arm64")
    assert rc == 0
    assert out.splitlines()[0] == "ok: smoke linux/arm64: locks/pylock.smoke-linux-arm64.toml"
    rc, out, _ = run(capsys, "lock", "check", "--platform", "linux/amd64", "smoke", "--json")
    assert rc == 0
    assert [(x["target"], x["platform"]) for x in json.loads(out)["locks"]] == [("smoke", "linux/amd64")]


@pytest.mark.parametrize(
    "argv",
    [["lock", "check", "--platform", "bogus"], ["mirror", "smoke", "--to", "unused", "--platform", "linux/riscv64"]],
)
def test_a_platform_no_target_can_have_is_a_usage_error(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uv.COMMANDS.clear()
    rc, out, err = run(capsys, *argv)
    assert (rc, out) == (2, "")
    assert err.startswith(f"megacpp-env {argv[0]}: error: unknown platform {argv[-1]!r} (remedy: ")
    assert uv.COMMANDS == [] and not (tmp_path / "unused").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["lock", "check", "gb10", "--platform", "linux/amd64"],
            "target gb10 has no platform linux/amd64 (its platforms: linux/arm64)",
        ),
        (
            ["lock", "resolve", "smoke", "gb10", "--platform", "linux/amd64"],
            "target gb10 has no platform linux/amd64 (its platforms: linux/arm64)",
        ),
        (  # targets on both sides of an option are one list (argparse's intermixed parsing)
            ["lock", "resolve", "smoke", "--platform", "linux/amd64", "gb10"],
            "target gb10 has no platform linux/amd64 (its platforms: linux/arm64)",
        ),
    ],
)
def test_a_platform_the_selection_lacks_is_an_error(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    uv.COMMANDS.clear()
    rc, out, err = run(capsys, *argv)
    assert (rc, out) == (1, "")
    assert err == f"megacpp-env {argv[0]}: error: --platform: {message}\n"
    assert uv.COMMANDS == [] and not (tmp_path / "unused").exists()


def test_platform_of_some_targets_selects_those(capsys):
    rc, out, _ = run(capsys, "lock", "check", "--platform", "linux/arm64", "--allow-unlocked")
    assert rc == 0
    from megacpp_env.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[1] / "stack.yaml")
    arm64 = [name for name, t in spec.targets.items() if "linux/arm64" in t.platforms]  # the spec's, in order
    shown = [ln.split(":")[1].strip() for ln in out.splitlines() if ln.startswith(("ok", "unlocked"))]
    assert list(dict.fromkeys(shown)) == [f"{name} linux/arm64" for name in arm64]  # a CUDA toolchain lock repeats
