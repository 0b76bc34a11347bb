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
from tests.fixtures.secrets import KNOWN_FORMATS, PASSWORD_CARRIERS, TOKEN_CARRIERS, fill, passwords, tokens

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)
HEX40 = st.integers(0, 2**64).map(lambda seed: random.Random(seed).randbytes(20).hex())  # a wandb key


def _leaks(argv: list[str], secret: str) -> bool:
    out = redact_argv(argv)
    assert len(out) == len(argv)
    return secret in " ".join(out)


@SETTINGS
@given(carrier=st.sampled_from(sorted(PASSWORD_CARRIERS)), secret=passwords(), nested=st.booleans())
def test_a_password_next_to_a_convention_is_never_kept(carrier, secret, nested) -> None:
    argv = fill(PASSWORD_CARRIERS[carrier], secret)
    if nested:  # the same command line inside `bash -c "..."`
        argv = ["bash", "-c", shlex.join(argv)]
    assert not _leaks(argv, secret), (carrier, argv, redact_argv(argv))


@SETTINGS
@given(
    carrier=st.sampled_from(sorted(TOKEN_CARRIERS)),
    secret=st.one_of(tokens(), HEX40, tokens().flatmap(lambda t: st.sampled_from(KNOWN_FORMATS).map(lambda f: f.format(S=t)))),
)  # fmt: skip
def test_a_generated_value_next_to_a_convention_is_never_kept(carrier, secret) -> None:
    argv = fill(TOKEN_CARRIERS[carrier], secret)
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
