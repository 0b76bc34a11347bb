"""No secret reaches a snapshot: env values, index URLs (env and config files), git remotes,
``direct_url.json``. Secrets are planted for real and the output is searched for them."""

from __future__ import annotations

import json

from megacpp_env import git
from megacpp_env.cli import main
from megacpp_env.redact import REDACTED, is_secret_name, strip_url_credentials
from megacpp_env.snapshot.collectors import envvars
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
    assert env["HF_TOKEN"] == env["WANDB_API_KEY"] == REDACTED
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
        assert is_secret_name(name), name
    for name in ("CUDA_VISIBLE_DEVICES", "TORCH_CUDA_ARCH_LIST", "NCCL_IB_HCA", "PIP_CERT", "OMP_NUM_THREADS"):
        assert not is_secret_name(name), name


def test_url_credentials_and_secret_query_values_are_stripped():
    strip = strip_url_credentials
    assert strip("https://u:p4ssw0rd@h.example/x y git+ssh://git@h/r.git") == "https://h.example/x y git+ssh://h/r.git"
    # fail closed: every query value goes, not only those under a secret-looking key
    assert strip("https://h.example/s?token=abc123&page=2") == "https://h.example/s?token=<redacted>&page=<redacted>"
    assert strip("no urls here") == "no urls here"


def test_scrubber_replaces_remembered_values_anywhere():
    scrub = envvars.Scrubber({"SOME_TOKEN": "tok-123456", "PATH": "/bin"})
    assert scrub.clean_tree({"k": ["a tok-123456 b"], "tok-123456": 1}) == {"k": ["a <redacted> b"], "<redacted>": 1}


# ---- generated secrets, planted for real in every carrier (issue 12, class 6) ------------------------

import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from urllib.parse import quote  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from megacpp_env.snapshot.collect import take_snapshot  # noqa: E402
from megacpp_env.snapshot.document import write_snapshot  # noqa: E402
from tests.fixtures.secrets import free_text, passwords, plants, tokens, url_passwords  # noqa: E402


def _toml(text: str) -> str:
    return json.dumps(text)  # a JSON string is a valid TOML basic string for these characters


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    batch=st.lists(plants(), min_size=10, max_size=20, unique_by=lambda p: p.name),
    conf_pw=url_passwords(),
    uv_pw=passwords(),
    remote_pw=passwords().filter(lambda s: " " not in s),
    scp_pw=passwords().filter(lambda s: " " not in s),
    direct_tok=tokens(),
    swept=free_text(),
)
def test_generated_secrets_reach_no_part_of_the_snapshot(
    tmp_path, snap_venv, snap_options, batch, conf_pw, uv_pw, remote_pw, scp_pw, direct_tok, swept
):
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    environ = dict(snap_options().environ)
    environ.update({p.name: p.value for p in batch})
    pip_conf = work / "pip.conf"
    pip_conf.write_text(f"[global]\nindex-url = https://ci:{conf_pw}@conf.example/simple\n", encoding="utf-8")
    uv_toml = work / "uv.toml"
    uv_toml.write_text(f"index-url = {_toml(f'https://u:{uv_pw}@uv.example/simple')}\n", encoding="utf-8")
    broken = work / "xdg" / "uv" / "uv.toml"
    broken.parent.mkdir(parents=True)
    broken.write_text("extra-index-url = 5\n[[index]]\nurl = 7\n", encoding="utf-8")
    environ.update(
        {
            "PIP_CONFIG_FILE": str(pip_conf),
            "UV_CONFIG_FILE": str(uv_toml),
            "XDG_CONFIG_HOME": str(work / "xdg"),
            "HOME": str(work),
            "MY_SERVICE_CRED": swept,  # not recorded itself; must be swept from wherever else it shows up
        }
    )
    repo = work / "checkout"
    make_repo(repo, {"a.txt": "a\n"})
    git.run_git(["remote", "add", "origin", f"https://x-access-token:{remote_pw}@git.example/r.git"], repo)
    git.run_git(["remote", "add", "scp", f"deploy:{scp_pw}@git.example:org/r.git"], repo)
    git.run_git(["remote", "add", "swept", f"https://git.example/{quote(swept, safe='')}/r.git"], repo)
    dist_info = next(snap_venv.site.glob("demo_pkg-*.dist-info"))
    (dist_info / "direct_url.json").write_text(
        json.dumps(
            {"url": f"https://files.example/t/{direct_tok}/demo_pkg-1.0.whl?sig={direct_tok}", "subdirectory": swept}
        )
    )
    snap = take_snapshot(snap_options(environ=environ, paths=(repo,)))
    out = work / "snap.json"
    write_snapshot(snap, out)
    text = out.read_text(encoding="utf-8")
    escaped = json.dumps(json.loads(text), ensure_ascii=True)
    secrets = [p.secret for p in batch] + [conf_pw, uv_pw, remote_pw, scp_pw, direct_tok, swept]
    for secret in secrets:
        for blob in (text, escaped, snap.to_json()):
            assert secret not in blob, secret
    env = snap.facts["env"]
    assert set(env["variables"]) >= {p.name for p in batch if p.name}  # recorded, redacted: not dropped
    assert env["index_config"][str(broken)] == {"error": "unreadable: ValueError"}
    assert isinstance(env["index_config"][str(pip_conf)], list)  # a space in the password splits it, as pip does
    assert env["index_config"][str(uv_toml)] == ["https://uv.example/simple"]


def test_a_malformed_uv_toml_does_not_wipe_the_env_section(tmp_path, snap_options):
    """``extra-index-url = 5`` raised TypeError inside the env collector: the whole ``env`` area became
    an error. Now the file is recorded as unreadable and everything else stays."""
    bad = tmp_path / "uv.toml"
    for content in ("extra-index-url = 5\n", "index = 5\n", "[[index]]\nurl = 7\n", "index-url = [1]\n", "pip = 3\n",
                    "\xff\xfe", "index-url = \"x\"\n" * 2, "[pip]\nindex-url = 1\n"):  # fmt: skip
        bad.write_bytes(content.encode("latin-1"))
        environ = {**snap_options().environ, "UV_CONFIG_FILE": str(bad), "HF_HOME": "/opt/hf"}
        env = take_snapshot(snap_options(environ=environ)).facts["env"]
        assert "error" not in env, content
        assert env["variables"]["HF_HOME"] == "/opt/hf"
        recorded = env["index_config"][str(bad)]
        assert recorded["error"].startswith("unreadable: "), content
        assert len(recorded) == 1


def test_pwd_is_not_a_secret_and_does_not_change_the_digest(tmp_path, snap_options):
    """PWD was treated as a secret-bearing value: every path under the working directory became
    ``<redacted>`` and the digest depended on where the snapshot was taken (class 11)."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    a = take_snapshot(snap_options(environ={**snap_options().environ, "PWD": str(cwd), "OLDPWD": str(tmp_path)}))
    b = take_snapshot(snap_options(environ={**snap_options().environ, "PWD": "/", "OLDPWD": "/tmp"}))
    assert REDACTED not in json.dumps(a.facts["python"])
    assert a.digest == b.digest


def test_the_tools_own_settings_are_not_drift(tmp_path, snap_options):
    """MEGACPP_ENV_CACHE_DIR (where the tool caches) made an unchanged venv drift (class 11)."""
    base = {k: v for k, v in snap_options().environ.items() if not k.startswith("MEGACPP_")}
    a = take_snapshot(
        snap_options(environ={**base, "MEGACPP_ENV_CACHE_DIR": str(tmp_path / "c1"), "MEGACPP_ENV_SPEC": "/a"})
    )
    b = take_snapshot(
        snap_options(environ={**base, "MEGACPP_ENV_CACHE_DIR": str(tmp_path / "c2"), "MEGACPP_ENV_UV": "/x/uv"})
    )
    assert "MEGACPP_ENV_CACHE_DIR" not in a.facts["env"]["variables"]
    assert a.digest == b.digest
