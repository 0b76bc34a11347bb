"""Which characters may appear in a value that reaches a rendered file, a shell, a label, a file name
or a requirements line: the one classifier, by Unicode category rather than a hand-kept list.

Refused: every control (Cc: C0, DEL, C1 such as U+009B CSI), every format character (Cf: bidi
embeddings, overrides and isolates U+202A-202E/U+2066-2069, zero-width joiners, U+FEFF, soft hyphen),
line and paragraph separators (Zl, Zp), surrogates (Cs), private-use (Co) and unassigned (Cn) code
points, and every space other than U+0020 (Zs: no-break and ideographic spaces look like a space
but do not split words). Stdlib only.
"""

from __future__ import annotations

import unicodedata

REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def dangerous_char(text: str) -> str | None:
    """The first character of ``text`` that must not reach an output, or None."""
    if text.isascii():
        return next((c for c in text if c < " " or c == "\x7f"), None)
    for ch in text:
        category = unicodedata.category(ch)
        if category in REFUSED_CATEGORIES or (category == "Zs" and ch != " "):
            return ch
    return None


def describe_char(ch: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``, or ``'\\n' (U+000A)`` for a character without a name."""
    name = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X} {name}" if name else f"{ch!r} (U+{ord(ch):04X})"
