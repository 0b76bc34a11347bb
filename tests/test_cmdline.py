"""What a stored command line keeps (issue 31, defect 9): a secret is found by what it sits next to, the
program and flag conventions (``-u``, ``-p``, ``login``, ``configure set``), quoted values and JSON, in
many siblings of each shape the issue names (hypothesis draws the secret, and the shape from a table of
carriers). The allowlisted build variables (``CFLAGS``, ``CMAKE_ARGS``, ``NVCC_FLAGS``) and git remotes
are checked the same way through ``redact``; ``run --golden --record`` end to end in
tests/test_repro_secrets.py."""

from __future__ import annotations

import json
import random
import shlex

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from megacpp_env.cmdline import redact_argv
from megacpp_env.redact import REDACTED, env_value_redaction, strip_url_credentials
from tests.fixtures.secrets import passwords, tokens

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)
HEX40 = st.integers(0, 2**64).map(lambda seed: random.Random(seed).randbytes(20).hex())  # a wandb key

# carrier -> argv with {S} where the secret goes (a password: any characters but quotes and spaces)
PASSWORD_CARRIERS = {
    "curl -u": ["curl", "-u", "alice:{S}", "https://h.example/x"],
    "curl -u attached": ["curl", "-ualice:{S}", "https://h.example/x"],
    "curl --user=": ["curl", "--user=alice:{S}", "https://h.example/x"],
    "curl --proxy-user": ["curl", "-x", "http://p:3128", "--proxy-user", "bob:{S}", "https://h.example"],
    "wget --password": ["wget", "--user=bob", "--password={S}", "https://h.example/f"],
    "wget --http-password": ["wget", "--http-password", "{S}", "https://h.example/f"],
    "mysql -p": ["mysql", "-h", "db", "-u", "root", "-p{S}", "shop"],
    "mysqldump -p": ["/usr/bin/mysqldump", "-p{S}", "--all-databases"],
    "mariadb --password=": ["mariadb", "--password={S}"],
    "sshpass -p": ["sshpass", "-p", "{S}", "ssh", "user@host"],
    "sshpass -pX": ["sshpass", "-p{S}", "scp", "a", "host:b"],
    "docker login -p": ["docker", "login", "-u", "bob", "-p", "{S}", "registry.example.com"],
    "docker login --password": ["docker", "login", "--password", "{S}", "-u", "bob"],
    "podman login -p": ["sudo", "podman", "login", "-p", "{S}", "quay.io"],
    "helm registry login": ["helm", "registry", "login", "r.example", "-u", "u", "-p", "{S}"],
    "--pw": ["tool", "--pw", "{S}"],
    "--pwd=": ["tool", "--pwd={S}"],
    "--passwd": ["tool", "--passwd", "{S}"],
    "--pass": ["tool", "--pass", "{S}"],
    "--secret": ["tool", "--client-secret", "{S}"],
    "--creds": ["skopeo", "copy", "--src-creds", "u:{S}", "docker://a", "docker://b"],
    "aws configure set": ["aws", "configure", "set", "aws_secret_access_key", "{S}"],
    "aws configure set --profile": ["aws", "configure", "set", "--profile", "p", "aws_session_token", "{S}"],
    "git config": ["git", "config", "--global", "user.password", "{S}"],
    "npm config set": ["npm", "config", "set", "//registry.npmjs.org/:_authToken", "{S}"],
    "JSON -d": ["curl", "-d", '{{"user": "bob", "password": "{S}"}}', "https://h.example"],
    "JSON nested": ["tool", "--data", '{{"db": {{"host": "h", "passwd": "{S}"}}}}'],
    "JSON alone": ["tool", '{{"api_key": "{S}"}}'],
    "python dict": ["tool", "--opts", "{{'secret': '{S}', 'x': 1}}"],
    "--token -VALUE": ["tool", "--token", "-{S}"],
    "--password -VALUE": ["tool", "--password", "-{S}"],
    "redis-cli -a": ["redis-cli", "-h", "h", "-a", "{S}", "ping"],
    "zip -P": ["zip", "-P", "{S}", "out.zip", "file"],
    "7z -p": ["7z", "a", "-p{S}", "out.7z", "dir"],
    "openssl -passin": ["openssl", "rsa", "-in", "k.pem", "-passin", "pass:{S}"],
    "smbclient -U": ["smbclient", "//h/share", "-U", "bob%{S}"],
    "ldapsearch -w": ["ldapsearch", "-x", "-D", "cn=admin", "-w", "{S}"],
    "sqlcmd -P": ["sqlcmd", "-S", "h", "-U", "sa", "-P", "{S}"],
    "twine -p": ["twine", "upload", "-u", "__token__", "-p", "{S}", "dist/*"],
    "mongosh -p": ["mongosh", "-u", "u", "-p", "{S}"],
    "env assignment": ["env", "PGPASSWORD={S}", "psql", "-h", "db"],
    "MYSQL_PWD": ["MYSQL_PWD={S}", "mysql"],
    "header": ["curl", "-H", "Authorization: Basic {S}", "https://h.example"],
    "custom header": ["curl", "-H", "X-Auth-Token: {S}", "https://h.example"],
}
# carriers where only a generated-looking value is a credential (a token drawn for it)
TOKEN_CARRIERS = {
    "--key": ["python", "pay.py", "--key", "{S}"],
    "--key=": ["python", "pay.py", "--key={S}"],
    "--api-key": ["tool", "--api-key", "{S}"],
    "wandb login": ["wandb", "login", "{S}"],
    "wandb login --relogin": ["wandb", "login", "--relogin", "{S}"],
    "hf login": ["huggingface-cli", "login", "--token", "{S}"],
    "poetry config": ["poetry", "config", "pypi-token.pypi", "{S}"],
}
KNOWN_FORMATS = ["dckr_pat_{S}", "sk_live_{S}", "sk_test_{S}", "rk_live_{S}", "ghp_{S}", "hf_{S}"]


def _fill(template: list[str], secret: str) -> list[str]:
    return [part.replace("{{", "\0").replace("}}", "\1").replace("{S}", secret).replace("\0", "{").replace("\1", "}")
            for part in template]  # fmt: skip


def _leaks(argv: list[str], secret: str) -> bool:
    out = redact_argv(argv)
    assert len(out) == len(argv)
    return secret in " ".join(out)


@SETTINGS
@given(carrier=st.sampled_from(sorted(PASSWORD_CARRIERS)), secret=passwords(), nested=st.booleans())
def test_a_password_next_to_a_convention_is_never_kept(carrier, secret, nested) -> None:
    argv = _fill(PASSWORD_CARRIERS[carrier], secret)
    if nested:  # the same command line inside `bash -c "..."`
        argv = ["bash", "-c", shlex.join(argv)]
    assert not _leaks(argv, secret), (carrier, argv, redact_argv(argv))


@SETTINGS
@given(
    carrier=st.sampled_from(sorted(TOKEN_CARRIERS)),
    secret=st.one_of(tokens(), HEX40, tokens().flatmap(lambda t: st.sampled_from(KNOWN_FORMATS).map(lambda f: f.format(S=t)))),
)  # fmt: skip
def test_a_generated_value_next_to_a_convention_is_never_kept(carrier, secret) -> None:
    argv = _fill(TOKEN_CARRIERS[carrier], secret)
    assert not _leaks(argv, secret), (carrier, argv, redact_argv(argv))


@pytest.mark.parametrize(
    "argv",
    [
        ["curl", "-u", "alice", "https://h.example"],  # no password given: curl prompts
        ["mysql", "-p", "shop"],  # -p alone prompts; the next word is the database
        ["docker", "run", "-p", "8080:80", "-u", "1000", "img"],
        ["docker", "login", "registry.example.com", "-u", "bob", "--password-stdin"],
        ["python", "train.py", "--key", "loss", "--sort-key", "name", "--tokenizer", "gpt2"],
        ["git", "config", "user.name", "Bob"],
        ["aws", "configure", "set", "region", "eu-west-1"],
        ["7z", "x", "-p", "a.7z"],
        ["curl", "-d", '{"user": "bob", "lang": "en"}', "https://h.example"],
        ["bash", "-c", "make -j8 && ./run --steps 10"],
        ["python", "-m", "pytest", "-k", "login and not slow", "--maxfail=1"],
    ],
)
def test_ordinary_command_lines_are_kept_as_typed(argv) -> None:
    assert redact_argv(argv) == argv


# ---- allowlisted variables: a preceding flag swallows nothing --------------------------------------

DEFINE_NAMES = ["MY_PASSWORD", "LICENSE_KEY", "DB_PW", "API_TOKEN", "AUTH_SECRET", "SERVICE_CREDENTIALS", "PGPASS"]
DEFINE_SHAPES = ["-D{N}={S}", '-D{N}="{S}"', "-D{N}='{S}'", "--{n}={S}", "--{n} {S}", "{N}={S}"]
FLAG_RUNS = st.lists(st.sampled_from(["-O2", "-g", "-DNDEBUG", "-fPIC", "--verbose", "-Wall", "-DX=1", "-std=c++17",
                                      "-I/usr/include", "-DCMAKE_BUILD_TYPE=Release", "--threads 4"]), max_size=4)  # fmt: skip


@SETTINGS
@given(
    var=st.sampled_from(["CFLAGS", "CXXFLAGS", "CMAKE_ARGS", "NVCC_FLAGS", "LDFLAGS"]),
    name=st.sampled_from(DEFINE_NAMES),
    shape=st.sampled_from(DEFINE_SHAPES),
    before=FLAG_RUNS,
    after=FLAG_RUNS,
    secret=passwords(),
)
def test_a_define_in_an_allowlisted_variable_loses_its_secret(var, name, shape, before, after, secret) -> None:
    define = shape.format(N=name, n=name.lower().replace("_", "-"), S=secret)
    value = " ".join([*before, define, *after])
    assert secret not in env_value_redaction(var, value).text, value


def test_the_flags_around_a_define_are_kept() -> None:
    out = env_value_redaction("CFLAGS", '-O2 -DMY_PASSWORD=hunter2 -g -DLICENSE_KEY="abc def" -DDB_PW=x1 -fPIC').text
    assert out == f'-O2 -DMY_PASSWORD={REDACTED} -g -DLICENSE_KEY="{REDACTED}" -DDB_PW={REDACTED} -fPIC'


# ---- git remotes: a generated scp user ---------------------------------------------------------------

SCP_USERS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=24, max_size=24).filter(
    lambda u: any(len(run) >= 5 for run in "".join(c if c not in "aeiouy" else " " for c in u).split())
)  # random letters: a run of 5 consonants is in nearly every draw, as in random user names


@SETTINGS
@given(user=st.one_of(SCP_USERS, tokens()), form=st.sampled_from(["{u}@github.com:org/r.git", "ssh://{u}@h.example/r"]))
def test_a_generated_user_in_a_remote_is_removed(user, form) -> None:
    assert user not in strip_url_credentials(form.format(u=user))


@pytest.mark.parametrize("remote", ["git@github.com:org/r.git", "deploy-bot-runner@h.example:r",
                                    "jenkins@ci.example:repos/x.git"])  # fmt: skip
def test_a_plain_user_in_a_remote_is_kept(remote) -> None:
    assert strip_url_credentials(remote) == remote


def test_the_record_of_a_json_argument_is_still_json() -> None:
    (out,) = redact_argv(['{"password": "hunter2", "n": 1}'])
    assert json.loads(out) == {"password": REDACTED, "n": 1}
