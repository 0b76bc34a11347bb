"""No secret reaches a snapshot: env values, index URLs (env and config files), git remotes,
``direct_url.json``. Secrets are planted for real and the output is searched for them."""

from __future__ import annotations

import json

from megacpp_env import git
from megacpp_env.cli import main
from megacpp_env.snapshot import envvars
from tests.fixtures.git_repos import make_repo

SECRETS = {
    "HF_TOKEN": "hf_plantedHuggingFaceToken0001",
    "AWS_SECRET_ACCESS_KEY": "awsPlantedSecretAccessKey0002",
    "WANDB_API_KEY": "wandbPlantedApiKey0003",
}
INDEX_TOKEN = "idxPlantedToken0004"
UV_TOKEN = "uvPlantedToken0005"
REMOTE_TOKEN = "ghp_plantedRemoteToken0006"
CONF_TOKEN = "confPlantedToken0007"
DIRECT_URL_TOKEN = "directUrlPlantedToken0008"
ALL = [*SECRETS.values(), INDEX_TOKEN, UV_TOKEN, REMOTE_TOKEN, CONF_TOKEN, DIRECT_URL_TOKEN]


def test_planted_secrets_appear_nowhere(tmp_path, monkeypatch, capsys, snap_venv):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", f"https://user:{INDEX_TOKEN}@pkgs.example.invalid/simple")
    monkeypatch.setenv("UV_INDEX_URL", f"https://__token__:{UV_TOKEN}@uv.example.invalid/simple/")
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nindex-url = https://ci:{CONF_TOKEN}@conf.example.invalid/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.setenv("MEGACPP_ENV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    repo = tmp_path / "checkout"
    make_repo(repo, {"a.txt": "a\n"})
    git.run_git(["remote", "add", "origin", f"https://x-access-token:{REMOTE_TOKEN}@git.example.invalid/r.git"], repo)
    dist_info = next(snap_venv.site.glob("demo_pkg-*.dist-info"))
    (dist_info / "direct_url.json").write_text(
        json.dumps(
            {"url": f"https://bot:{DIRECT_URL_TOKEN}@files.example.invalid/demo_pkg-1.0.whl", "archive_info": {}}
        )
    )
    out = tmp_path / "snap.json"
    rc = main(
        [
            "snapshot",
            "--spec",
            str(tmp_path / "none.yaml"),
            "--python",
            str(snap_venv.python),
            "-o",
            str(out),
            "--paths",
            str(repo),
        ]
    )
    printed = capsys.readouterr()
    assert rc == 0
    rc = main(
        [
            "snapshot",
            "--spec",
            str(tmp_path / "none.yaml"),
            "--python",
            str(snap_venv.python),
            "--json",
            "--paths",
            str(repo),
        ]
    )
    printed_json = capsys.readouterr()
    text = out.read_text()
    for secret in ALL:
        for where, blob in (
            ("file", text),
            ("stdout", printed.out + printed_json.out),
            ("stderr", printed.err + printed_json.err),
        ):
            assert secret not in blob, f"{secret} leaked into {where}"
    doc = json.loads(text)
    env = doc["facts"]["env"]["variables"]
    assert env["HF_TOKEN"] == env["WANDB_API_KEY"] == envvars.REDACTED
    assert "AWS_SECRET_ACCESS_KEY" not in env  # not allowlisted at all
    assert env["PIP_EXTRA_INDEX_URL"] == "https://pkgs.example.invalid/simple"
    assert doc["facts"]["env"]["index_config"][str(conf)] == ["https://conf.example.invalid/simple"]
    assert doc["facts"]["checkouts"][str(repo)]["remotes"] == {"origin": "https://git.example.invalid/r.git"}
    assert doc["facts"]["python"]["distributions"]["demo-pkg"]["direct_url"]["url"] == (
        "https://files.example.invalid/demo_pkg-1.0.whl"
    )


def test_secret_names():
    for name in (
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "WANDB_API_KEY",
        "AWS_SECRET_ACCESS_KEY",
        "PGPASSWORD",
        "NCCL_AUTH_KEY",
        "GITHUB_PAT_KEY",
        "MY_CREDENTIALS",
        "OPENAI_APIKEY",
        "SESSION_COOKIE",
    ):
        assert envvars.is_secret_name(name), name
    for name in ("CUDA_VISIBLE_DEVICES", "TORCH_CUDA_ARCH_LIST", "NCCL_IB_HCA", "PIP_CERT", "OMP_NUM_THREADS"):
        assert not envvars.is_secret_name(name), name


def test_url_credentials_and_secret_query_values_are_stripped():
    strip = envvars.strip_url_credentials
    assert strip("https://u:p4ssw0rd@h.example/x y git+ssh://git@h/r.git") == "https://h.example/x y git+ssh://h/r.git"
    assert strip("https://h.example/s?token=abc123&page=2") == "https://h.example/s?token=<redacted>&page=2"
    assert strip("no urls here") == "no urls here"


def test_scrubber_replaces_remembered_values_anywhere():
    scrub = envvars.Scrubber({"SOME_TOKEN": "tok-123456", "PATH": "/bin"})
    assert scrub.clean_tree({"k": ["a tok-123456 b"], "tok-123456": 1}) == {"k": ["a <redacted> b"], "<redacted>": 1}
