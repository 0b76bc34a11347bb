"""The one Jinja environment for every rendered file: sandboxed, ``StrictUndefined``, cached.

Every value that lands in a rendered file must pass one of the quoting filters below. The
environment's ``finalize`` hook enforces it: a ``{{ value }}`` that was not quoted raises instead of
being written. Values that could break out of a line (newlines, NUL, other control characters) are
refused at spec load time; the filters refuse them again, so no template path can smuggle one in.

Filters (pick the one for the Dockerfile context the value lands in):
  ``sh``     a POSIX shell word (``shlex.quote``), for shell-form ``RUN`` lines;
  ``dq``     a double-quoted Dockerfile word (``ENV``/``LABEL``/``ARG`` values): ``\\``, ``"`` and
             ``$`` escaped, so the Dockerfile's own variable expansion never fires;
  ``word``   a bare token for paths/names/refs in ``FROM``/``COPY``/``ARG`` names; only
             ``[A-Za-z0-9._/:@+=-]`` (and ``${TARGETARCH}``-free) characters are accepted;
  ``text``   free text for ``#`` comments: anything printable on one line.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from megacpp_env.chars import dangerous_char, describe_char
from megacpp_env.errors import MegacppEnvError

_WORD = re.compile(r"[A-Za-z0-9._/:@+=-]+")


class Quoted(str):
    """A string that went through a quoting filter; the only kind ``finalize`` lets through."""

    __slots__ = ()


class TemplateValueError(MegacppEnvError, ValueError):
    """A value cannot be placed safely in a rendered file (or a template is broken): exit 1, one line."""


def _one_line(value: object, filter_name: str) -> str:
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined raises here, naming the missing variable
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise TemplateValueError(f"|{filter_name}: expected a string or number, got {type(value).__name__}")
    text = str(value)
    ch = dangerous_char(text)
    if ch is not None:
        raise TemplateValueError(f"|{filter_name}: control character {describe_char(ch)} in {text!r}")
    return text


def quote_sh(value: object) -> Quoted:
    return Quoted(shlex.quote(_one_line(value, "sh")))


def quote_dq(value: object) -> Quoted:
    text = _one_line(value, "dq")
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return Quoted(f'"{escaped}"')


def quote_word(value: object) -> Quoted:
    text = _one_line(value, "word")
    if not _WORD.fullmatch(text):
        raise TemplateValueError(f"|word: {text!r} is not a plain token ([A-Za-z0-9._/:@+=-])")
    return Quoted(text)


def quote_text(value: object) -> Quoted:
    return Quoted(_one_line(value, "text"))


def _finalize(value: Any) -> Any:
    if isinstance(value, Quoted) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise TemplateValueError(f"unquoted value {value!r} in a template: pass it through |sh, |dq, |word or |text")


def _raise(message: str) -> None:
    raise TemplateValueError(message)


@functools.cache
def environment(templates: Path) -> SandboxedEnvironment:
    """The cached environment for one templates directory (one per process per directory)."""
    env = SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(templates)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        finalize=_finalize,
    )
    env.filters.update(sh=quote_sh, dq=quote_dq, word=quote_word, text=quote_text)
    env.globals["raise"] = _raise
    return env


def render_template(templates: Path, name: str, context: dict[str, Any]) -> str:
    """Render ``name`` from ``templates`` with ``context``; template errors raise ``TemplateValueError``."""
    try:
        return environment(templates.resolve()).get_template(name).render(context)
    except jinja2.TemplateError as exc:
        raise TemplateValueError(f"{name}: {exc}") from exc
