"""`lock resolve` and `lock check` against a real local PEP 503 index (tests/fixtures/index.py), with real uv."""

from __future__ import annotations

import tomllib

import pytest

from megacpp_env import uv
from megacpp_env.cli import main
from megacpp_env.lock.pylock import read_pylock
from megacpp_env.lock.reqtxt import read_requirements
from tests.fixtures.index import write_lock_spec


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def spec(uv_offline_env, tmp_path):
    return write_lock_spec(tmp_path / "repo", uv_offline_env.nightly.url)


def lock_of(spec, name):
    return read_pylock(spec.parent / "locks" / f"pylock.{name}.toml")


def test_cross_platform_resolution_picks_each_platforms_wheel(spec, capsys):
    rc, out, _ = run(capsys, "lock", "resolve", "smoke", "--spec", str(spec))
    assert rc == 0, out
    amd, arm = lock_of(spec, "smoke-linux-amd64").by_name(), lock_of(spec, "smoke-linux-arm64").by_name()
    assert [a.filename for a in amd["fastpath"].artifacts] == ["fastpath-1.2.0-py3-none-manylinux_2_28_x86_64.whl"]
    assert [a.filename for a in arm["fastpath"].artifacts] == ["fastpath-1.2.0-py3-none-manylinux_2_28_aarch64.whl"]
    # the platform wheels carry different dependencies: each lock follows its own wheel's metadata
    assert "filelock" in amd and "six" in arm and "filelock" not in arm
    assert "smoke (platforms): consistent" in out


def test_export_is_plain_require_hashes(spec, capsys):
    assert run(capsys, "lock", "resolve", "smoke", "--platform", "linux/arm64", "--spec", str(spec))[0] == 0
    export = spec.parent / "locks" / "smoke.linux-arm64.requirements.txt"
    text = export.read_text()
    lines = [ln for ln in text.splitlines() if ln and not ln.startswith("#")]
    assert lines[0] == "attrs==25.4.0 \\"
    assert all(ln.startswith(("    --hash=sha256:", *(f"{c}" for c in "abcdefghijklmnopqrstuvwxyz"))) for ln in lines)
    assert "--index" not in text and "://" not in text.replace("# ", "")  # no index options, no URLs
    exported = read_requirements(export).by_name()
    locked = lock_of(spec, "smoke-linux-arm64").by_name()
    assert {n: (p.version, p.hashes) for n, p in exported.items()} == {
        n: (p.version, p.hashes) for n, p in locked.items()
    }


def test_torch_family_only_from_its_explicit_index(spec, uv_offline_env, capsys):
    rc, out, err = run(capsys, "lock", "resolve", "gpu", "--spec", str(spec))
    assert rc == 0, out + err
    pkgs = lock_of(spec, "gpu-linux-arm64").by_name()
    nightly = uv_offline_env.nightly.url
    assert pkgs["torch"].version == "2.13.0.dev20261101+cu132"  # not the 99.0 bait on the default index
    assert pkgs["torch"].index == nightly
    assert pkgs["torch"].artifacts[0].url.startswith(nightly.removesuffix("/simple"))
    # transitive member of the explicit index: routed through it too (second pass)
    assert pkgs["pytorch-triton"].version == "3.6.0+git1234abcd" and pkgs["pytorch-triton"].index == nightly
    # the nightly index also serves numpy 0.0.1: an explicit index gives nothing else away
    assert pkgs["numpy"].version == "2.5.5" and pkgs["numpy"].index == uv_offline_env.pypi.url
    assert pkgs["torch"].direct and not pkgs["filelock"].direct
    assert "torchvision" not in pkgs  # listed under the index, required by nothing: the probe drops it


def test_prereleases_only_where_the_index_allows_them(uv_offline_env, tmp_path, capsys):
    allowed = write_lock_spec(tmp_path / "a", uv_offline_env.nightly.url, stack='["torch<2.14", attrs]')
    assert run(capsys, "lock", "resolve", "gpu", "--spec", str(allowed))[0] == 0
    pkgs = lock_of(allowed, "gpu-linux-arm64").by_name()
    assert pkgs["torch"].version == "2.13.0.dev20261101+cu132"  # prerelease: true on the nightly index
    assert pkgs["attrs"].version == "25.4.0"  # 26.0.0rc1 on the default index is not taken

    spec_text = allowed.read_text().replace("prerelease: true", "prerelease: false")
    denied = tmp_path / "b" / "stack.yaml"
    denied.parent.mkdir()
    denied.write_text(spec_text)
    assert run(capsys, "lock", "resolve", "gpu", "--spec", str(denied))[0] == 0
    assert lock_of(denied, "gpu-linux-arm64").by_name()["torch"].version == "2.12.0+cu132"


def test_lock_records_inputs_and_uv_command(spec, capsys):
    uv.COMMANDS.clear()
    assert run(capsys, "lock", "resolve", "smoke", "--platform", "linux/arm64", "--spec", str(spec))[0] == 0
    argv = uv.COMMANDS[-1]
    assert argv[1:3] == ("pip", "compile")
    assert argv[argv.index("--python-platform") :][:2] == ("--python-platform", "aarch64-manylinux_2_28")
    assert "--no-config" in argv and argv[argv.index("torch=allow") - 1 :][:2] == (
        "--prerelease-package",
        "torch=allow",
    )
    data = tomllib.loads((spec.parent / "locks" / "pylock.smoke-linux-arm64.toml").read_text())
    tool = data["tool"]["megacpp-env"]
    assert tool["uv-version"] == uv.uv_version()
    assert tool["command"] == "megacpp-env lock resolve smoke --platform linux/arm64"
    assert tool["uv-command"].startswith("uv pip compile pyproject.toml --format pylock.toml -o pylock.toml")
    assert len(tool["inputs-hash"]) == 64 and "upload-time" not in tool


def test_unchanged_lock_is_not_rewritten(spec, capsys):
    assert run(capsys, "lock", "resolve", "smoke", "--spec", str(spec))[0] == 0
    path = spec.parent / "locks" / "pylock.smoke-linux-amd64.toml"
    before = path.stat().st_mtime_ns
    rc, out, _ = run(capsys, "lock", "resolve", "smoke", "--spec", str(spec))
    assert rc == 0 and out.count("unchanged: ") == 2
    assert path.stat().st_mtime_ns == before


def test_check_names_missing_stale_and_export_stale(spec, capsys):
    rc, out, _ = run(capsys, "lock", "check", "smoke", "--spec", str(spec))
    assert rc == 1
    assert "missing: smoke linux/amd64: locks/pylock.smoke-linux-amd64.toml does not exist" in out
    assert "(run: megacpp-env lock resolve smoke --platform linux/amd64)" in out

    assert run(capsys, "lock", "resolve", "smoke", "--spec", str(spec))[0] == 0
    assert run(capsys, "lock", "check", "--spec", str(spec), "smoke")[:2] == (
        0,
        "ok: smoke linux/amd64: locks/pylock.smoke-linux-amd64.toml\n"
        "ok: smoke linux/arm64: locks/pylock.smoke-linux-arm64.toml\n"
        "smoke (platforms): consistent (10 shared packages)\n",  # 8 + tomli-w, nvidia-ml-py (the tool's deps)
    )
    spec.write_text(spec.read_text().replace("[attrs, six, fastpath]", "[attrs, six, fastpath, idna]"))
    rc, out, _ = run(capsys, "lock", "check", "smoke", "--spec", str(spec))
    assert rc == 1
    assert "stale: smoke linux/arm64: locks/pylock.smoke-linux-arm64.toml: requirements added: idna" in out

    spec.write_text(spec.read_text().replace("[attrs, six, fastpath, idna]", "[attrs, six, fastpath]"))
    export = spec.parent / "locks" / "smoke.linux-amd64.requirements.txt"
    export.write_text(export.read_text().replace("attrs==25.4.0", "attrs==25.3.0"))
    rc, out, _ = run(capsys, "lock", "check", "smoke", "--spec", str(spec))
    assert rc == 1 and "export-stale: smoke linux/amd64: locks/smoke.linux-amd64.requirements.txt" in out
    assert run(capsys, "lock", "export", "smoke", "--spec", str(spec))[0] == 0
    assert run(capsys, "lock", "check", "smoke", "--spec", str(spec))[0] == 0


def test_unreachable_index_is_unlocked_not_a_pass(uv_offline_env, tmp_path, capsys):
    spec = write_lock_spec(tmp_path / "r", "https://download.pytorch.org/whl/nightly/cu132", reachable=False)
    rc, out, _ = run(capsys, "lock", "check", "gpu", "--spec", str(spec))
    assert rc == 1
    assert out.startswith(
        "unlocked: gpu linux/arm64: index nightly (https://download.pytorch.org/whl/nightly/cu132) unreachable here; "
        "lock it where it is reachable and commit locks/pylock.gpu-linux-arm64.toml"
    )
    assert run(capsys, "lock", "check", "gpu", "--allow-unlocked", "--spec", str(spec))[0] == 0
    # `lock` with no target skips it (and locks the rest); naming it is an error
    rc, out, _ = run(capsys, "lock", "resolve", "--spec", str(spec))
    assert rc == 0 and "skipped: gpu linux/arm64: unlocked: index nightly" in out
    assert "written: locks/pylock.smoke-linux-amd64.toml" in out
    assert run(capsys, "lock", "resolve", "gpu", "--spec", str(spec))[0] == 1


def test_align_removes_platform_divergence(uv_offline_env, tmp_path, capsys):
    spec = write_lock_spec(tmp_path / "r", uv_offline_env.nightly.url, smoke="[attrs, simdlib]")
    rc, out, _ = run(capsys, "lock", "resolve", "smoke", "--spec", str(spec))
    assert rc == 1
    assert "smoke (platforms): 1 of 9 shared packages diverge" in out
    assert "simdlib diverges: smoke linux/amd64: 1.0.0, smoke linux/arm64: 1.1.0" in out
    rc, out, _ = run(capsys, "lock", "resolve", "smoke", "--align", "--spec", str(spec))
    assert rc == 0, out
    # newest first: arm64 (simdlib 1.1.0) is tried as the reference, but 1.1.0 has no x86_64 wheel
    assert "cannot align smoke (platforms) to smoke linux/arm64: " in out
    assert "aligned smoke linux/arm64 to smoke linux/amd64" in out
    assert lock_of(spec, "smoke-linux-arm64").by_name()["simdlib"].version == "1.0.0"
    assert run(capsys, "lock", "check", "smoke", "--spec", str(spec))[0] == 0


def test_existing_lock_of_an_unreachable_index_is_checked_offline(uv_offline_env, tmp_path, capsys):
    spec = write_lock_spec(tmp_path / "r", uv_offline_env.nightly.url, reachable=False)
    assert run(capsys, "lock", "resolve", "gpu", "--try-unreachable", "--spec", str(spec))[0] == 0  # made "elsewhere"
    uv.COMMANDS.clear()
    assert run(capsys, "lock", "check", "gpu", "--spec", str(spec))[:2] == (
        0,
        "ok: gpu linux/arm64: locks/pylock.gpu-linux-arm64.toml\n",
    )
    assert uv.COMMANDS == []  # offline: uv is not even asked for its version
    spec.write_text(spec.read_text().replace("fastpath, numpy]", "fastpath]"))
    rc, out, _ = run(capsys, "lock", "check", "gpu", "--spec", str(spec))
    assert rc == 1 and "stale: gpu linux/arm64: locks/pylock.gpu-linux-arm64.toml: requirements removed: numpy" in out


def _fake_uv(tmp_path, body):
    exe = tmp_path / "fake-uv"
    exe.write_text(body)
    exe.chmod(0o755)
    return exe


def test_a_stuck_uv_is_killed_after_the_timeout(tmp_path, monkeypatch):
    from megacpp_env.errors import ToolError

    monkeypatch.setenv("MEGACPP_ENV_UV", str(_fake_uv(tmp_path, "#!/bin/sh\nexec sleep 30\n")))
    monkeypatch.setenv("MEGACPP_ENV_UV_TIMEOUT", "0.5")
    with pytest.raises(ToolError) as exc:
        uv.run_uv(["pip", "compile", "pyproject.toml"])
    assert str(exc.value) == "uv pip compile did not finish in 0.5s and was killed (raise MEGACPP_ENV_UV_TIMEOUT)"
    monkeypatch.setenv("MEGACPP_ENV_UV_TIMEOUT", "soon")
    with pytest.raises(ToolError, match="MEGACPP_ENV_UV_TIMEOUT='soon': expected a positive number of seconds"):
        uv.run_uv(["--version"])
    monkeypatch.delenv("MEGACPP_ENV_UV_TIMEOUT")
    assert uv.timeout() == 900


def test_a_uv_that_cannot_start_is_a_tool_error(tmp_path, monkeypatch):
    from megacpp_env.errors import ToolError

    exe = _fake_uv(tmp_path, "\x7fELF not really\n")  # executable bit, no valid format: exec fails
    monkeypatch.setenv("MEGACPP_ENV_UV", str(exe))
    with pytest.raises(ToolError, match=f"cannot run {exe}: Exec format error"):
        uv.run_uv(["--version"])


def test_input_project_is_tomli_w_text_with_every_character_intact():
    """The pyproject.toml uv resolves is written by the one TOML writer: what the spec says (index
    names and URLs, requirements) reaches uv unchanged, DEL and control characters included."""
    from megacpp_env.lock.inputs import LockInputs
    from megacpp_env.lock.resolve import INPUT_PROJECT, input_project
    from megacpp_env.spec.model import Index

    odd = 'x"\\\x7f\x01\t'
    inputs = LockInputs(
        target="t",
        platform="linux/amd64",
        python="3.13",
        requirements=("attrs>=24", f"six; extra == '{odd}'"),
        indexes=(Index(name=f"n{odd}", url="https://i.example/simple", explicit=True, packages=("Torch_X",)),),
    )
    data = tomllib.loads(input_project(inputs, ["extra-direct"]))
    assert data["project"] == {
        "name": INPUT_PROJECT,
        "version": "0",
        "requires-python": ">=3.13",
        "dependencies": ["attrs>=24", f"six; extra == '{odd}'", "extra-direct"],
    }
    assert data["tool"]["uv"]["index"] == [{"name": f"n{odd}", "url": "https://i.example/simple", "explicit": True}]
    assert data["tool"]["uv"]["sources"] == {"torch-x": {"index": f"n{odd}"}}
    plain = LockInputs(target="t", platform="linux/amd64", python="3.13", requirements=("a",), indexes=())
    assert "tool" not in tomllib.loads(input_project(plain))
