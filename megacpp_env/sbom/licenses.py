"""Licenses as the distributions themselves declare them, never guessed: where none is declared in a form
read here, the license is *unknown* and the SBOM says why.

- A Python distribution: its ``License-Expression`` (PEP 639), canonicalized by ``packaging.licenses``; else a
  one-line ``License`` field (an SPDX expression when it is one, else its text as a name); else its
  ``License ::`` classifiers (their last segment, e.g. ``MIT License``).
- A Debian package: ``/usr/share/doc/NAME/copyright`` when it is machine-readable (DEP-5, copyright-format
  1.0): the synopsis (first line) of the ``License`` field of its header and of each ``Files`` paragraph,
  kept in Debian's own vocabulary (``GPL-2+``, ``Expat``): they are not SPDX identifiers, and mapping them
  would be a guess. A copyright file in free form gives no license.

The deb822 paragraphs are split here (a few lines: blank-line separated, ``Field: value``, continuation
lines indented); tests/test_sbom_licenses.py holds the result to python-debian's ``debian.copyright`` on
real copyright files. Stdlib and ``packaging`` only; every value that reaches the SBOM is checked for
characters that must not be printed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from megacpp_env.chars import dangerous_char

MAX_NAME = 200  # a declared license longer than this is a text, not a name
COPYRIGHT_LIMIT = 1 << 20  # bytes of one copyright file read from an image
ACK = "declared"  # CycloneDX 1.6 licenseAcknowledgement: what the distribution says, not a conclusion


@dataclass(frozen=True, kw_only=True, slots=True)
class Licenses:
    """What a distribution declares: one SPDX ``expression``, or ``names`` in its own vocabulary, or neither,
    with ``unknown`` saying why."""

    expression: str = ""
    names: tuple[str, ...] = ()
    unknown: str = ""

    def cyclonedx(self) -> list[dict[str, Any]]:
        """The component's ``licenses`` (empty when unknown)."""
        if self.expression:
            return [{"expression": self.expression, "acknowledgement": ACK}]
        return [{"license": {"name": name, "acknowledgement": ACK}} for name in self.names]


def _unknown(why: str) -> Licenses:
    return Licenses(unknown=why)


def _clean(value: str) -> str | None:
    """``value`` as one printable line (inner runs of spaces kept), or None when it cannot be one."""
    text = " ".join(value.split())
    return text if text and len(text) <= MAX_NAME and dangerous_char(text) is None else None


def _spdx(value: str) -> str:
    """The canonical SPDX expression ``value`` is, or "" when it is none."""
    from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression

    try:
        return str(canonicalize_license_expression(value))
    except InvalidLicenseExpression:
        return ""


def python_licenses(expression: str, license_field: str, classifiers: Iterable[str]) -> Licenses:
    """A Python distribution's licenses from its metadata (see the module's docstring)."""
    if expression.strip():
        clean = _clean(expression)
        return _declared(clean) if clean is not None else _unknown("its License-Expression is not one printable line")
    field = license_field.strip()
    lines = [line for line in field.splitlines() if line.strip()]
    one_line = len(lines) == 1 and field.upper() != "UNKNOWN"
    clean = _clean(field) if one_line else None
    if clean is not None:
        return _declared(clean)
    names = sorted({name for c in classifiers if (name := _classifier(c))})
    if names:
        return Licenses(names=tuple(names))
    if one_line:
        return _unknown(
            f"its License field is not one printable line of at most {MAX_NAME} characters, and no classifier"
        )
    if len(lines) > 1:
        return _unknown(f"its License field is a text of {len(lines)} lines, with no License-Expression or classifier")
    return _unknown("no License-Expression, License or license classifier in its metadata")


def _declared(text: str) -> Licenses:
    """A declared license: its canonical SPDX expression when it is one, else the text as a name."""
    spdx = _spdx(text)
    return Licenses(expression=spdx) if spdx else Licenses(names=(text,))


def _classifier(classifier: str) -> str | None:
    """``License :: OSI Approved :: MIT License`` -> ``MIT License``; a classifier naming no license -> None."""
    parts = [p.strip() for p in classifier.split("::")]
    if len(parts) < 2 or parts[0] != "License" or parts[-1] == "OSI Approved":
        return None
    return _clean(parts[-1])


# ---- Debian ------------------------------------------------------------------------------------------


def deb822(text: str) -> list[dict[str, str]]:
    """The paragraphs of a deb822 text: field names lowercased, a value's continuation lines kept (joined
    with newlines, leading whitespace as written). Comment lines (``#``) are skipped; a line that is no
    field and no continuation is ignored."""
    paragraphs: list[dict[str, str]] = []
    current: dict[str, str] = {}
    key = ""
    for line in text.splitlines():
        if not line.strip():
            if current:
                paragraphs.append(current)
            current, key = {}, ""
        elif line.startswith("#"):
            continue
        elif line[0] in " \t":
            if key:
                current[key] += "\n" + line
        else:
            name, sep, value = line.partition(":")
            key = name.strip().lower() if sep and name.strip() and " " not in name.strip() else ""
            if key:
                current[key] = value.strip()
    if current:
        paragraphs.append(current)
    return paragraphs


def machine_readable(header: dict[str, str]) -> bool:
    """The first paragraph names the machine-readable format (copyright-format 1.0, or the DEP-5 drafts)."""
    spec = header.get("format", header.get("format-specification", "")).lower()
    return "copyright-format/1.0" in spec or "dep5" in spec or "dep-5" in spec


def deb_licenses(package: str, text: str | None) -> Licenses:
    """A Debian package's licenses from its copyright file's ``text`` (None: there is none; "": it was over
    ``COPYRIGHT_LIMIT``)."""
    where = f"/usr/share/doc/{package}/copyright"
    if text is None:
        return _unknown(f"no {where}")
    if not text:
        return _unknown(f"{where} is empty or larger than {COPYRIGHT_LIMIT} bytes")
    paragraphs = deb822(text)
    if not paragraphs or not machine_readable(paragraphs[0]):
        return _unknown(f"{where} is not machine-readable (no copyright-format 1.0 Format header)")
    declared = [paragraphs[0], *(p for p in paragraphs[1:] if "files" in p)]
    synopses = {p["license"].split("\n", 1)[0].strip() for p in declared if "license" in p}
    names = {_clean(s) for s in synopses if s}
    if None in names:
        return _unknown(f"a License synopsis in {where} is not one printable line of at most {MAX_NAME} characters")
    if not names:
        return _unknown(f"{where} is machine-readable but names no license in its header or Files paragraphs")
    return Licenses(names=tuple(sorted(n for n in names if n)))
