"""The ``Scrubber``: every secret value of the process environment, remembered so the final snapshot
document can be swept for any that slipped through another path (a git remote, a ``direct_url.json``,
a path). Its own module: ``snapshot.context`` (which every collector sees) and ``envvars`` (which
records the variables) both need it, and neither may import the other."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote

from megacpp_env.redact import REDACTED, env_value_redaction, redact

_MIN_SECRET_LEN = 6
_PATH_VALUE = re.compile(r"[~/][\w./~+-]*")


def _variants(secret: str) -> set[str]:
    """A secret as it may be spelled elsewhere: itself, percent-decoded and -encoded, and the pieces
    of a ``user:password`` pair."""
    out = {secret, unquote(secret), quote(secret, safe="")}
    out.update(secret.split(":"))
    return {s for s in out if len(s) >= _MIN_SECRET_LEN}


class Scrubber:
    """Remembers secret values; ``clean`` redacts every credential and replaces any remembered secret.

    Every value of the process environment that ``redact`` judges secret (a secret-bearing name, or a
    credential inside the value) is remembered, so a secret planted in the environment is swept from
    every other place it reaches (a git remote, a ``direct_url.json``, a path)."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        found: set[str] = set()
        for name, value in environ.items():
            if name in ("PWD", "OLDPWD") or _PATH_VALUE.fullmatch(value):
                continue  # a directory is not a secret; sweeping it would make documents depend on it
            for secret in env_value_redaction(name, value).secrets:
                found |= _variants(secret)
        self._secrets = sorted(found, key=len, reverse=True)
        self._lock = threading.Lock()

    def remember(self, secrets: Iterable[str]) -> None:
        new: set[str] = set()
        for secret in secrets:
            new |= _variants(secret)
        with self._lock:
            if new - set(self._secrets):
                self._secrets = sorted({*self._secrets, *new}, key=len, reverse=True)

    def clean(self, text: str) -> str:
        found = redact(text)
        if found.secrets:
            self.remember(found.secrets)
        text = found.text
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def clean_tree(self, obj: Any) -> Any:
        return map_strings(obj, self.clean)


def map_strings(obj: Any, fn: Callable[[str], str]) -> Any:
    """A copy of a JSON tree with ``fn`` applied to every string, mapping keys included (lists and
    tuples become lists; other values are kept)."""
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, Mapping):
        return {fn(str(k)): map_strings(v, fn) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [map_strings(v, fn) for v in obj]
    return obj
