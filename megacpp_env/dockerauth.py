"""Registry credentials, read the way Docker reads them. Never prints a secret, never logs one.

``$DOCKER_CONFIG/config.json`` (default ``~/.docker/config.json``):

* ``credHelpers``: ``{"<registry>": "<name>"}`` runs ``docker-credential-<name> get`` for that registry;
* else ``credsStore``: ``"<name>"``, one helper for every registry (its answer "credentials not
  found" falls through to ``auths``);
* else ``auths``: ``{"<registry>": {"auth": base64("user:password")}}`` (or ``username``/``password``,
  or ``identitytoken``, an OAuth refresh token).

Docker Hub is stored under ``https://index.docker.io/v1/``; other registries under their host, with
or without a scheme. A helper name must be a plain identifier (letters, digits, ``._-``): the
config file must not name a program to run by path. A helper gets the server on stdin and answers
``{"Username": ..., "Secret": ...}`` on stdout; ``Username: <token>`` marks an identity token.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megacpp_env.errors import InputError, ToolError
from megacpp_env.fsutil import read_text_input
from megacpp_env.records import json_object

DOCKER_HUB_KEY = "https://index.docker.io/v1/"
HUB_NAMES = ("docker.io", "index.docker.io", "registry-1.docker.io")
HELPER_TIMEOUT_S = 30.0
MAX_CONFIG_BYTES = 4 << 20
_HELPER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_NOT_FOUND = "credentials not found"


class CredentialsError(ToolError):
    """The Docker config or a credential helper could not be used."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Credentials:
    """What ``docker login`` stored for one registry. ``repr`` hides the secret."""

    username: str
    secret: str = field(repr=False)
    source: str  # where they came from, for messages: never the secret
    identity_token: bool = False  # the secret is an OAuth refresh token

    def basic(self) -> str:
        raw = f"{self.username}:{self.secret}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")


def config_path() -> Path:
    directory = os.environ.get("DOCKER_CONFIG", "")
    return Path(directory) / "config.json" if directory else Path.home() / ".docker" / "config.json"


def load(registry: str, *, path: Path | None = None) -> Credentials | None:
    """The credentials stored for ``registry`` (``host[:port]``, ``docker.io`` for Docker Hub), or None."""
    path = path or config_path()
    doc = _config(path)
    if doc is None:
        return None
    keys = _keys(registry)
    helpers = _table(doc, "credHelpers", path)
    for key in keys:
        if key in helpers:
            return _from_helper(helpers[key], keys[0], path, f"credHelpers.{key}")
    store = doc.get("credsStore")
    if store is not None:
        found = _from_helper(store, keys[0], path, "credsStore")
        if found is not None:
            return found
    auths = _table(doc, "auths", path)
    for key, entry in auths.items():
        if _normalise(key) in keys:
            return _from_auths(entry, path, f"auths.{key}")
    return None


def _config(path: Path) -> dict[str, Any] | None:
    if not path.exists() and not path.is_symlink():
        return None
    try:
        text = read_text_input(path, limit=MAX_CONFIG_BYTES)
    except InputError as exc:
        raise CredentialsError(f"{path}: {exc.detail}") from None
    return json_object(text, str(path), CredentialsError, remedy="fix or remove it")


def _table(doc: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise CredentialsError(f"{path}: {key}: expected an object")
    return value


def _keys(registry: str) -> tuple[str, ...]:
    """The names ``registry`` may be stored under, normalised; the first is what a helper is asked."""
    if registry in HUB_NAMES:
        return (DOCKER_HUB_KEY, *HUB_NAMES)
    return (registry, f"https://{registry}", f"http://{registry}")


def _normalise(key: str) -> str:
    """``https://h/v1/`` and ``h`` name one registry (Docker Hub keeps its full URL)."""
    if key == DOCKER_HUB_KEY:
        return key
    host = key.removeprefix("https://").removeprefix("http://").partition("/")[0]
    return DOCKER_HUB_KEY if host in HUB_NAMES else host


def _from_auths(entry: Any, path: Path, key: str) -> Credentials | None:
    if not isinstance(entry, dict):
        raise CredentialsError(f"{path}: {key}: expected an object")
    source = f"{path} {key}"
    token = entry.get("identitytoken")
    if isinstance(token, str) and token:
        return Credentials(username="<token>", secret=token, source=source, identity_token=True)
    auth = entry.get("auth")
    if isinstance(auth, str) and auth:
        try:
            user, sep, secret = base64.b64decode(auth, validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise CredentialsError(f"{path}: {key}.auth: not base64 of 'user:password'") from None
        if not sep:
            raise CredentialsError(f"{path}: {key}.auth: not base64 of 'user:password'")
        return _checked(user, secret, source, path, key)
    name, password = entry.get("username"), entry.get("password")
    if isinstance(name, str) and isinstance(password, str) and name:
        return _checked(name, password, source, path, key)
    return None


def _checked(user: str, secret: str, source: str, path: Path, key: str) -> Credentials:
    if not all(c.isprintable() for c in user + secret) or ":" in user:
        raise CredentialsError(f"{path}: {key}: the user name or password holds a control character or ':'")
    return Credentials(username=user, secret=secret, source=source)


def _from_helper(name: Any, server: str, path: Path, key: str) -> Credentials | None:
    if not isinstance(name, str) or not _HELPER_RE.match(name):
        raise CredentialsError(
            f"{path}: {key}: a credential helper must be a plain name (letters, digits, '._-'), "
            f"got {str(name)[:60]!r}; refusing to run it"
        )
    program = shutil.which(f"docker-credential-{name}")
    source = f"docker-credential-{name}"
    if program is None:
        raise CredentialsError(
            f"{path}: {key}: {source} is not on PATH (remedy: install it, or remove {key} from the config)"
        )
    try:
        proc = subprocess.run(  # a program found on PATH by a checked name; no shell
            [program, "get"], input=server.encode(), capture_output=True, timeout=HELPER_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise CredentialsError(f"{source} get: no answer within {HELPER_TIMEOUT_S:g} s") from None
    except OSError as exc:
        raise CredentialsError(f"{source} get: cannot run it: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        if _NOT_FOUND in proc.stdout.decode("utf-8", "replace").lower():
            return None
        # its output is not shown: it may hold a secret
        raise CredentialsError(f"{source} get failed (exit {proc.returncode}) for {server}")
    return _helper_answer(proc.stdout, source)


def _helper_answer(out: bytes, source: str) -> Credentials:
    try:
        doc = json.loads(out)
    except (ValueError, RecursionError):
        raise CredentialsError(f"{source} get: its answer is not JSON") from None
    if not isinstance(doc, dict):
        raise CredentialsError(f"{source} get: its answer is not a JSON object")
    user, secret = doc.get("Username"), doc.get("Secret")
    if not isinstance(user, str) or not isinstance(secret, str) or not secret:
        raise CredentialsError(f"{source} get: its answer has no Username and Secret")
    if user == "<token>":
        return Credentials(username=user, secret=secret, source=source, identity_token=True)
    if not all(c.isprintable() for c in user + secret) or ":" in user:
        raise CredentialsError(f"{source} get: the user name or secret holds a control character or ':'")
    return Credentials(username=user, secret=secret, source=source)
