"""`reproduce` and `snapshot --export-lock` offline, against the local index stand-in: a venv whose
distributions uv installed, a checkout with local changes; re-made from a mirror directory and
proved identical; a wheel the mirror lacks named with what to do; refusals before anything is made."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest
from packaging.pylock import Pylock

from megacpp_env.cli import main
from tests.fixtures.git_repos import FILE_OK, make_repo, write_files
from tests.fixtures.snapshot import make_venv


@pytest.fixture
def golden(tmp_path, monkeypatch, uv_offline_env):
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    venv = make_venv(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "uv", "pip", "install", "--python", str(venv.python), "--quiet",
                    "six==1.17.0", "filelock==3.20.0"], check=True)  # fmt: skip
    origin = tmp_path / "origin"
    make_repo(origin, {"lib.py": "X = 1\n"})
    src = tmp_path / "src" / "lib"
    from megacpp_env import git

    git.run_git(["clone", "--quiet", str(origin), str(src)], config=FILE_OK)
    write_files(src, {"lib.py": "X = 2\n", "local.txt": "mine\n"})
    gold = tmp_path / "golden"
    lock = tmp_path / "pylock.bench.toml"
    assert main(["snapshot", "--spec", str(tmp_path / "none.yaml"), "--python", str(venv.python), "--paths", str(src),
                 "--golden", "bench", "--golden-dir", str(gold), "--export-lock", str(lock)]) == 0  # fmt: skip
    return gold, lock, uv_offline_env


def _reproduce(tmp_path, gold, *extra):
    out = tmp_path / "again"
    args = ["reproduce", "bench", "--golden-dir", str(gold), "--venv", str(out / "venv"), "--checkouts", str(out / "src")]
    return main([*args, "--json", *extra]), out


def test_export_lock_is_what_the_venv_runs(golden, tmp_path):
    _gold, lock, indexes = golden
    data = tomllib.loads(lock.read_text())
    Pylock.from_dict(data)  # valid PEP 751
    wheels = {p["name"]: p["wheels"] for p in data["packages"]}
    assert sorted(wheels) == ["filelock", "six"]
    served = indexes.root / "pypi" / "files" / "six-1.17.0-py3-none-any.whl"
    import hashlib

    assert wheels["six"][0]["hashes"]["sha256"] == hashlib.sha256(served.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", ["pylock.a.b.toml", "lock.toml", "pylock-bench.toml"])
def test_export_lock_needs_a_pep751_name(tmp_path, capsys, name):
    assert main(["snapshot", "--export-lock", str(tmp_path / name)]) == 1
    assert "not a PEP 751 lock file name (remedy: name it pylock.toml or pylock.<name>.toml" in capsys.readouterr().err


def test_reproduce_from_a_mirror_directory_is_identical(golden, tmp_path, capsys):
    gold, _lock, indexes = golden
    code, out = _reproduce(tmp_path, gold, "--mirror", str(indexes.root / "pypi" / "files"))
    report = json.loads(capsys.readouterr().out)
    assert (code, report["identical"]) == (0, True), (report["unrecreated"], report["diff"]["findings"])
    assert report["installed"] == {"filelock": "mirror", "six": "mirror"}
    assert (out / "src" / "lib" / "lib.py").read_text() == "X = 2\n"
    assert (out / "src" / "lib" / "local.txt").read_text() == "mine\n"


def test_a_wheel_the_mirror_lacks_is_named_with_what_to_do(golden, tmp_path, capsys):
    gold, _lock, indexes = golden
    mirror = tmp_path / "partial"
    mirror.mkdir()
    (mirror / "six-1.17.0-py3-none-any.whl").write_bytes((indexes.root / "pypi/files/six-1.17.0-py3-none-any.whl").read_bytes())
    code, _out = _reproduce(tmp_path, gold, "--mirror", str(mirror))
    report = json.loads(capsys.readouterr().out)
    assert code == 1 and report["identical"] is False
    (gone,) = report["unrecreated"]
    assert gone["what"] == "filelock 3.20.0" and gone["why"].startswith(f"the mirror {mirror} has it any more")
    assert "filelock-3.20.0-py3-none-any.whl sha256:" in gone["remedy"] and "--mirror DIR" in gone["remedy"]
    assert "filelock 3.20.0: no longer installed" in [f["message"] for f in report["diff"]["findings"]]


def test_refusals_come_before_anything_is_made(golden, tmp_path, capsys):
    gold, _lock, _ = golden
    (tmp_path / "again" / "venv").mkdir(parents=True)
    (tmp_path / "again" / "venv" / "x").write_text("")
    assert _reproduce(tmp_path, gold)[0] == 1
    assert "--venv " in capsys.readouterr().err and not (tmp_path / "again" / "src").exists()
    (gold / "bench.capture.json").unlink()
    assert _reproduce(tmp_path, gold)[0] == 1
    assert "has no capture" in capsys.readouterr().err
