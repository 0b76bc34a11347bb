"""Issue 19 item 3: what a golden and a run record may store.

Secrets are found by what they sit next to (a secret-named key or option, an HTTP header, a URL
password), not only by their shape. The run record keeps the command line redacted; a diff that adds
a credential is not stored (the checkout gets a problem naming file and line, and reproduce says it
cannot re-create it); an untracked file with a secret `key = value` line is skipped; an unowned
`.pth` file with a credential is not copied into capture.json. A golden with a benign patch and a
benign untracked file (that merely look like secrets to a careless scanner) still reproduces byte
for byte."""

from __future__ import annotations

import json
import sys

import pytest

from megacpp_env import git
from megacpp_env.cli import main
from megacpp_env.cmdline import redact_argv
from megacpp_env.redact import REDACTED, content_secret_reason, diff_secret_reason
from megacpp_env.repro.capture_tree import capture_checkout
from megacpp_env.repro.objects import ObjectStore
from megacpp_env.repro.trees import recreate
from megacpp_env.snapshot.collectors.checkouts import inspect_one
from megacpp_env.snapshot.collectors.envvars import Scrubber
from megacpp_env.worktree import content
from tests.fixtures.git_repos import FILE_OK, make_repo, write_files

SECRET = "Zq8pW3xR7vN2mK5t"  # planted everywhere below; must appear in nothing stored


def _stored(root) -> bytes:
    """Every byte written under ``root`` (the golden directory, objects included)."""
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


# ---- the run record ---------------------------------------------------------------------------


ARGV_CASES = [
    ["--api-key=" + SECRET],
    ["--password", SECRET],
    ["https://user:" + SECRET + "@example.invalid/x"],
    ["-H", "Authorization: Bearer " + SECRET],
    ["--hf-token", SECRET, "--lr", "0.1"],
    ["--header=Cookie: session=" + SECRET],
    ["-H", "X-Api-Key: " + SECRET],
    ["--db-passwd=" + SECRET],
    ["postgresql://bob:" + SECRET + "@db.invalid:5432/x"],
    ["--secret", SECRET],
]


@pytest.mark.parametrize("argv", ARGV_CASES, ids=lambda a: a[0][:14])
def test_redact_argv_removes_the_secret_and_keeps_the_rest(argv):
    out = redact_argv(["train.py", *argv])
    assert SECRET not in " ".join(out)
    assert out[0] == "train.py" and len(out) == len(argv) + 1
    if "--lr" in argv:
        assert out[-2:] == ["--lr", "0.1"]


@pytest.mark.parametrize(
    "argv",
    [["-u", "bench.py", "--steps", "10"], ["--password-file"], ["--tokenizer", "gpt2"], ["--no-auth", "x.py"],
     ["docker", "login", "--password-stdin", "-u", "bob"], ["docker", "run", "-p", "8080:80", "img"],
     ["python", "x.py", "--sort-key", "name"], ["docker", "login", "registry.example.com"]],
)  # fmt: skip  # a switch named like a secret (--no-auth, --password-stdin) takes no value
def test_redact_argv_keeps_ordinary_arguments(argv):
    assert redact_argv(argv) == argv


@pytest.fixture
def golden(tmp_path, monkeypatch, snap_venv):
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    gold = tmp_path / "golden"
    assert main(["snapshot", "--spec", str(tmp_path / "none.yaml"), "--python", str(snap_venv.python),
                 "--golden", "bench", "--golden-dir", str(gold)]) == 0  # fmt: skip
    return gold


def test_the_run_record_keeps_no_secret_of_the_command_line(golden, tmp_path, capsys):
    seen = tmp_path / "argv.json"
    argv = [a for case in ARGV_CASES for a in case]
    cmd = [sys.executable, "-c", f"import json, sys; json.dump(sys.argv[1:], open({str(seen)!r}, 'w'))", *argv]
    assert main(["run", "--spec", str(golden / "none.yaml"), "--golden", "bench", "--golden-dir", str(golden),
                 "--json", "--", *cmd]) == 0  # fmt: skip
    assert json.loads(seen.read_text()) == argv  # the command itself got every argument as typed
    out = capsys.readouterr().out
    record = (golden / "bench.runs.jsonl").read_text()
    assert SECRET not in record and SECRET not in out and REDACTED in record
    assert SECRET.encode() not in _stored(golden)


# The shapes issue 31 found stored verbatim, each as the command it sits in (run as arguments of one
# command: the record is what is judged, not what runs).
ISSUE_31_SHAPES = [
    ["curl", "-u", "alice:" + SECRET], ["mysql", "-p" + SECRET], ["sshpass", "-p", SECRET, "ssh", "h"],
    ["docker", "login", "-p", "dckr_pat_" + SECRET + "abcd"], ["wandb", "login", "9f" * 20],
    ["--key", "sk_live_" + SECRET], ["--pw", SECRET], ["aws", "configure", "set", "aws_secret_access_key", SECRET],
    ['{"password": "' + SECRET + '"}'], ["--token", "-" + SECRET],
]  # fmt: skip


def test_the_run_record_keeps_none_of_the_issue_31_shapes(golden, tmp_path, capsys):
    argv = [a for case in ISSUE_31_SHAPES for a in case]
    cmd = [sys.executable, "-c", "pass", *argv]
    assert main(["run", "--spec", str(golden / "none.yaml"), "--golden", "bench", "--golden-dir", str(golden),
                 "--json", "--", *cmd]) == 0  # fmt: skip
    out = capsys.readouterr().out
    record = (golden / "bench.runs.jsonl").read_text()
    for secret in (SECRET, "9f" * 20):
        assert secret not in record and secret not in out
        assert secret.encode() not in _stored(golden)


# ---- the checkout capture ---------------------------------------------------------------------


@pytest.fixture
def work(tmp_path):
    origin = tmp_path / "origin"
    make_repo(origin, {"cfg.py": "X = 1\n", "conf/app.ini": "[db]\nhost = h\n"})
    clone = tmp_path / "work" / "proj"
    git.run_git(["clone", "--quiet", str(origin), str(clone)], config=FILE_OK)
    return clone


def _capture(work, tmp_path):
    store = ObjectStore.beside(tmp_path / "golden")
    entry = inspect_one(work, None, None, Scrubber({}))
    return capture_checkout(str(work), entry, store), store


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("cfg.py", 'X = 1\nHF = "hf_' + SECRET + 'abcd"\n'),
        ("conf/app.ini", "[db]\nhost = h\npassword = " + SECRET + "\n"),
        ("cfg.py", 'X = 1\nHEADERS = {"Authorization": "Bearer ' + SECRET + '"}\n'),
        ("cfg.py", 'X = 1\nDSN = "postgresql://bob:' + SECRET + '@db/x"\n'),
        ("conf/app.ini", "[db]\nhost = h\naws_secret_access_key = " + SECRET + "\n"),
    ],
)
def test_a_diff_that_adds_a_secret_is_not_stored_and_reproduce_says_so(work, tmp_path, path, text):
    write_files(work, {path: text})
    cap, store = _capture(work, tmp_path)
    assert cap.diff is None and f"its uncommitted diff holds a credential ({path}:" in cap.problems[-1]
    assert SECRET.encode() not in _stored(tmp_path / "golden")
    dest = tmp_path / "again" / "proj"
    dest.parent.mkdir()
    (failed,) = recreate(cap, dest, store, {})
    assert "holds a credential" in failed.why and not dest.exists()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("settings.ini", "[db]\nuser = bob\npassword = " + SECRET + "\n"),
        ("aws.cfg", "[default]\naws_secret_access_key = " + SECRET + "\n"),
        ("request.http", "GET /x HTTP/1.1\nAuthorization: Bearer " + SECRET + "\n"),
        ("db.yaml", "db:\n  user: bob\n  password: " + SECRET + "\n"),
        ("conf.json", '{\n  "api_key": "' + SECRET + '1"\n}\n'),
        ("run.sh", "export DB_PASSWORD=" + SECRET + "\n"),
        ("client.toml", 'client_secret = "' + SECRET + '"\n'),
        ("inline.json", '{"name": "x", "api_key": "' + SECRET + '1"}\n'),  # a pair inside a line
        ("call.cfg", "connect(host=h, password=" + SECRET + ")\n"),
    ],
)
def test_an_untracked_file_with_a_secret_key_value_is_skipped(work, tmp_path, name, text):
    write_files(work, {name: text})
    cap, _store = _capture(work, tmp_path)
    (skipped,) = cap.skipped
    assert skipped.path == name and "its content holds a credential (line " in skipped.reason
    assert SECRET.encode() not in _stored(tmp_path / "golden")


BENIGN_PATCH = (
    'import os\nX = 2\npassword = os.environ["DB_PASSWORD"]\napi_key = None\npad_token = "<pad>"\n'
    'tokenizer = "gpt2"\nmax_tokens = 4096\nsort_key = "version"\nHEADERS = {"Authorization": f"Bearer {token}"}\n'
)
BENIGN_UNTRACKED = "db:\n  password: ${DB_PASSWORD}\n  token: <token>\ntokenizer: gpt2\nmax_tokens: 100\n"


def test_a_benign_patch_and_untracked_file_are_stored_and_recreated_byte_for_byte(work, tmp_path):
    write_files(work, {"cfg.py": BENIGN_PATCH, "conf/local.yaml": BENIGN_UNTRACKED})
    cap, store = _capture(work, tmp_path)
    assert cap.problems == () and cap.skipped == () and cap.diff is not None
    assert diff_secret_reason(content.read(work).diff()) == ""
    assert content_secret_reason(BENIGN_UNTRACKED, path="conf/local.yaml") == ""
    dest = tmp_path / "again" / "proj"
    dest.parent.mkdir()
    assert recreate(cap, dest, store, {}) == []
    assert content.read(dest).diff() == content.read(work).diff()
    assert (dest / "cfg.py").read_bytes() == BENIGN_PATCH.encode()
    assert (dest / "conf/local.yaml").read_bytes() == BENIGN_UNTRACKED.encode()


# ---- unowned .pth files -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "line", ["/opt/ghp_" + SECRET + "abcdefgh/lib", "https://bob:" + SECRET + "@h.invalid/simple", "/x/hf_" + SECRET]
)
def test_an_unowned_pth_file_with_a_credential_is_not_copied(tmp_path, monkeypatch, snap_venv, line, capsys):
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    (snap_venv.site / "local_paths.pth").write_text(f"{tmp_path}\n{line}\n")
    gold = tmp_path / "golden"
    assert main(["snapshot", "--spec", str(tmp_path / "none.yaml"), "--python", str(snap_venv.python),
                 "--golden", "bench", "--golden-dir", str(gold)]) == 0  # fmt: skip
    capture = json.loads((gold / "bench.capture.json").read_text())
    assert SECRET.encode() not in _stored(gold)
    assert capture["path_entries"] == []
    assert any("local_paths.pth: line 2 holds a credential" in p for p in capture["problems"])


def test_a_benign_unowned_pth_file_is_copied(tmp_path, monkeypatch, snap_venv):
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    (snap_venv.site / "local_paths.pth").write_text(f"{tmp_path}/src\n")
    gold = tmp_path / "golden"
    assert main(["snapshot", "--spec", str(tmp_path / "none.yaml"), "--python", str(snap_venv.python),
                 "--golden", "bench", "--golden-dir", str(gold)]) == 0  # fmt: skip
    (entry,) = json.loads((gold / "bench.capture.json").read_text())["path_entries"]
    assert entry["file"] == "local_paths.pth" and entry["lines"] == [f"{tmp_path}/src"]


def test_a_golden_with_a_benign_patch_and_untracked_file_reproduces_identically(tmp_path, monkeypatch, snap_venv,
                                                                                 capsys):  # fmt: skip
    """The whole verb: snapshot --golden, then reproduce from the wheels directory, proved identical."""
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    origin = tmp_path / "origin"
    make_repo(origin, {"cfg.py": "X = 1\n"})
    src = tmp_path / "src" / "proj"
    git.run_git(["clone", "--quiet", str(origin), str(src)], config=FILE_OK)
    write_files(src, {"cfg.py": BENIGN_PATCH, "conf/local.yaml": BENIGN_UNTRACKED})
    gold = tmp_path / "golden"
    assert main(["snapshot", "--spec", str(tmp_path / "none.yaml"), "--python", str(snap_venv.python),
                 "--paths", str(src), "--golden", "bench", "--golden-dir", str(gold)]) == 0  # fmt: skip
    capsys.readouterr()
    out = tmp_path / "again"
    code = main(["reproduce", "bench", "--golden-dir", str(gold), "--venv", str(out / "venv"), "--checkouts",
                 str(out / "src"), "--mirror", str(tmp_path / "wheels"), "--json"])  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert (code, report["identical"]) == (0, True), (report["unrecreated"], report["diff"]["findings"])
    assert (out / "src" / "proj" / "cfg.py").read_bytes() == BENIGN_PATCH.encode()
    assert (out / "src" / "proj" / "conf" / "local.yaml").read_bytes() == BENIGN_UNTRACKED.encode()


@pytest.mark.parametrize("target", ["/home/u/ghp_" + SECRET + "abcdefgh", "https://bob:" + SECRET + "@h.invalid/x"])
def test_an_untracked_symlink_whose_target_holds_a_secret_is_skipped(work, tmp_path, target):
    (work / "link").symlink_to(target)
    cap, _store = _capture(work, tmp_path)
    (skipped,) = cap.skipped
    assert skipped.path == "link" and "a symbolic link that looks like a credential" in skipped.reason
    assert SECRET.encode() not in _stored(tmp_path / "golden")


def test_a_provenance_record_holding_a_secret_is_not_stored(work, tmp_path):
    from megacpp_env.worktree.provenance import PROVENANCE_NAME

    (work / ".git" / "info" / "exclude").write_text(PROVENANCE_NAME + "\n")
    (work / PROVENANCE_NAME).write_text(json.dumps({"repo": "https://bob:" + SECRET + "@h.invalid/x.git"}))
    cap, _store = _capture(work, tmp_path)
    assert cap.provenance is None and [s.path for s in cap.skipped] == [PROVENANCE_NAME]
    assert SECRET.encode() not in _stored(tmp_path / "golden")
