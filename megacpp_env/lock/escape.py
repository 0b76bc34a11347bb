"""Every string a lock, a spec, an acknowledgement file or a git ref holds is hostile where the lock
reports print it (``lock diff``, ``gate``, ``lock``): a pull request controls all of them. This module
is the one place that makes such a string safe for an output, in three shapes:

* ``plain``: for text output (a terminal, a CI log): credentials removed (``redact``: URL userinfo,
  query values, well-known tokens), and every character ``chars`` refuses (controls, bidi overrides,
  zero-width and format characters, line separators, unusual spaces) shown as its escape (``\\n``,
  ``\\u202e``), so a value stays on its line and reads in its real order.
* ``code``: for GitHub-flavoured markdown, the same text as one code span. Inside a code span GFM
  parses nothing: no emphasis, link, autolink, image, raw HTML, entity, and GitHub turns no
  ``@mention``, ``#ref`` or commit SHA into a link there. The fence is one backtick longer than the
  longest run inside, a leading or trailing backtick is padded, and in a table cell ``|`` is escaped
  so the cell stays one cell (GFM removes exactly that backslash again). A value longer than ``limit`` is cut (``…``).
* ``fenced``: a fenced code block (a check's log), its fence longer than any backtick run inside.

JSON needs no escaping (``json.dumps`` escapes controls); ``scrub`` removes credentials from every
string of a JSON value.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from megacpp_env.chars import REFUSED_CATEGORIES
from megacpp_env.redact import strip_url_credentials

VALUE_LIMIT = 300  # characters of one value in markdown; the text and JSON formats keep it whole
ELLIPSIS = "…"
_BACKTICKS = re.compile(r"`+")


def _shown_char(ch: str) -> str:
    if " " <= ch < "\x7f":
        return ch
    category = unicodedata.category(ch)
    if category in REFUSED_CATEGORIES or (category == "Zs" and ch != " "):
        return ch.encode("unicode_escape").decode("ascii")
    return ch


def visible(text: str) -> str:
    """``text`` with every character that could hide, reorder or break a line shown as its escape."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(_shown_char(c) for c in text)


def plain(text: object) -> str:
    """A value for text output: credentials removed, invisible and line-breaking characters escaped."""
    return visible(strip_url_credentials(str(text)))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + ELLIPSIS


def code(text: object, *, cell: bool = False, limit: int = VALUE_LIMIT) -> str:
    """One GFM code span holding ``text`` (made ``plain``, cut at ``limit``); ``cell``: in a table row,
    where GFM splits cells at every ``|`` before it parses code spans, and unescapes ``\\|`` after."""
    body = _cut(plain(text), limit)
    if cell:
        body = body.replace("|", "\\|")
    if not body:
        return "` `"  # an empty span would be two literal backticks; one space is shown as nothing
    longest = max((len(m) for m in _BACKTICKS.findall(body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body[0] == "`" or body[-1] == "`" or (body[0] == " " and body[-1] == " ") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def fenced(text: str, *, limit: int = 4000, width: int = 500) -> list[str]:
    """A fenced code block of the end of ``text``: its lines made ``plain`` and cut at ``width``
    characters, as many of the last ones as fit in ``limit`` bytes; the fence is longer than any
    backtick run inside, so no line closes it."""
    kept: list[str] = []
    size = 0
    for line in reversed(text.splitlines()):
        shown = _cut(plain(line), width)
        size += len(shown.encode()) + 1
        if size > limit:
            kept.append(ELLIPSIS)
            break
        kept.append(shown)
    kept.reverse()
    longest = max((len(m) for line in kept for m in _BACKTICKS.findall(line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence + "text", *kept, fence]


def scrub(value: Any) -> Any:
    """A JSON value with credentials removed from every string (keys included)."""
    if isinstance(value, str):
        return strip_url_credentials(value)
    if isinstance(value, dict):
        return {scrub(k): scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v) for v in value]
    return value
