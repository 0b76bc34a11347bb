"""Licenses as distributions declare them (megacpp_env/sbom/licenses.py): a Python distribution's metadata, a
Debian package's machine-readable copyright file; unknown, with the reason, where none is declared in a form read
here. The copyright files under tests/data/copyright/ are the smoke image's own (Debian forky), and the result is
held to python-debian's reading of them (``debian.copyright``)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from debian.copyright import Copyright, NotMachineReadableError

from megacpp_env.sbom.licenses import COPYRIGHT_LIMIT, MAX_NAME, Licenses, deb822, deb_licenses, python_licenses

COPYRIGHTS = Path(__file__).parent / "data" / "copyright"
MIT = "License :: OSI Approved :: MIT License"
BSD = "License :: OSI Approved :: BSD License"


@pytest.mark.parametrize(
    ("expression", "field", "classifiers", "expected"),
    [
        ("mit OR apache-2.0", "", [], Licenses(expression="MIT OR Apache-2.0")),  # canonicalized (packaging)
        ("Apache-2.0", "BSD", [MIT], Licenses(expression="Apache-2.0")),  # the expression wins
        ("MIT-ish", "", [], Licenses(names=("MIT-ish",))),  # not SPDX: the declared text, as a name
        ("", "MIT", [MIT], Licenses(expression="MIT")),  # a License field that is an SPDX expression
        ("", "BSD", [BSD], Licenses(names=("BSD",))),
        ("", "Apache  Software\tLicense", [], Licenses(names=("Apache Software License",))),
        ("", "", [BSD], Licenses(names=("BSD License",))),
        ("", "UNKNOWN", [MIT, BSD, "License :: OSI Approved"], Licenses(names=("BSD License", "MIT License"))),
        ("", "Copyright (c) 2020 X\n\nPermission is hereby granted", [MIT], Licenses(names=("MIT License",))),
        ("", "Copyright (c) 2020 X\n\nPermission is hereby granted", [],
         Licenses(unknown="its License field is a text of 2 lines, with no License-Expression or classifier")),
        ("", "", ["Programming Language :: Python"],
         Licenses(unknown="no License-Expression, License or license classifier in its metadata")),
        ("", "", [], Licenses(unknown="no License-Expression, License or license classifier in its metadata")),
        ("MIT\x1b[2J", "", [], Licenses(unknown="its License-Expression is not one printable line")),
        ("", "M" * (MAX_NAME + 1), [MIT], Licenses(names=("MIT License",))),  # too long for a name
        ("", "MIT\u202e", [], Licenses(unknown=f"its License field is not one printable line of at most {MAX_NAME} "
                                          "characters, and no classifier")),
    ],
)  # fmt: skip
def test_python_licenses(expression, field, classifiers, expected) -> None:
    assert python_licenses(expression, field, classifiers) == expected


def test_cyclonedx_entries() -> None:
    assert Licenses(expression="MIT").cyclonedx() == [{"expression": "MIT", "acknowledgement": "declared"}]
    assert Licenses(names=("GPL-2+", "Expat")).cyclonedx() == [
        {"license": {"name": "GPL-2+", "acknowledgement": "declared"}},
        {"license": {"name": "Expat", "acknowledgement": "declared"}},
    ]
    assert Licenses(unknown="why").cyclonedx() == []


def _python_debian(text: str) -> set[str] | None:
    """The synopses python-debian reads from the header and the Files paragraphs (None: not machine-readable)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            parsed = Copyright(text.splitlines(keepends=True), strict=False)
        except NotMachineReadableError:
            return None
    found = {p.license.synopsis for p in parsed.all_files_paragraphs() if p.license}
    return found | ({parsed.header.license.synopsis} if parsed.header.license else set())


@pytest.mark.parametrize("name", sorted(p.name for p in COPYRIGHTS.iterdir()))
def test_the_smoke_images_copyright_files_read_as_python_debian_reads_them(name) -> None:
    text = (COPYRIGHTS / name).read_text(encoding="utf-8")
    ours, theirs = deb_licenses(name, text), _python_debian(text)
    if theirs is None:
        assert ours == Licenses(unknown=f"/usr/share/doc/{name}/copyright is not machine-readable (no copyright-format "
                                "1.0 Format header)")  # fmt: skip
    else:
        assert set(ours.names) == theirs and not ours.unknown and not ours.expression


def test_what_the_copyright_files_say() -> None:
    licenses = {p.name: deb_licenses(p.name, p.read_text(encoding="utf-8")) for p in COPYRIGHTS.iterdir()}
    assert licenses["apt"].names == ("BSD-3-clause", "Expat", "GPL-2+", "GPL-2+ and curl")  # Debian's names, as written
    assert licenses["zlib1g"].names == ("Zlib",)  # an http:// Format URL is the same format
    assert licenses["tzdata"].names == ("public-domain",)
    assert licenses["python3.13"].unknown.endswith("is not machine-readable (no copyright-format 1.0 Format header)")


HEADER = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, Licenses(unknown="no /usr/share/doc/p/copyright")),
        ("", Licenses(unknown=f"/usr/share/doc/p/copyright is empty or larger than {COPYRIGHT_LIMIT} bytes")),
        ("Copyright 2020 X\nGPL\n", Licenses(unknown="/usr/share/doc/p/copyright is not machine-readable (no "
                                             "copyright-format 1.0 Format header)")),
        # the header's own License; a stand-alone License paragraph (the text of one named above) adds none
        (HEADER + "License: GPL-2+\n\nFiles: *\nCopyright: X\nLicense: MIT\n\nLicense: Unused\n Text.\n",
         Licenses(names=("GPL-2+", "MIT"))),
        (HEADER + "\nFiles: *\nCopyright: X\nLicense:   GPL-2+   or   Artistic\n text of it\n",
         Licenses(names=("GPL-2+ or Artistic",))),
        (HEADER + "# a comment\n\n\nfiles: *\ncopyright: X\nLICENSE: MIT\n", Licenses(names=("MIT",))),  # any case
        ("Format-Specification: http://svn.debian.org/wsvn/dep/web/deps/dep5.mdwn?rev=135\n\nFiles: *\nLicense: BSD\n",
         Licenses(names=("BSD",))),  # the DEP-5 drafts
        (HEADER + "\nFiles: *\nCopyright: X\n",
         Licenses(unknown="/usr/share/doc/p/copyright is machine-readable but names no license in its header or Files "
                          "paragraphs")),
        (HEADER + "\nFiles: *\nLicense: MIT\x1b]0;x\x07\n",
         Licenses(unknown=f"a License synopsis in /usr/share/doc/p/copyright is not one printable line of at most "
                          f"{MAX_NAME} characters")),
        (HEADER + "\nFiles: *\nLicense: " + "G" * (MAX_NAME + 1) + "\n",
         Licenses(unknown=f"a License synopsis in /usr/share/doc/p/copyright is not one printable line of at most "
                          f"{MAX_NAME} characters")),
    ],
)  # fmt: skip
def test_deb_licenses(text, expected) -> None:
    assert deb_licenses("p", text) == expected


def test_deb822_paragraphs() -> None:
    text = "A: 1\n b\n\t c\n\n\n# x\nB:2\nnot a field\nC d: 3\n \n"
    assert deb822(text) == [{"a": "1\n b\n\t c"}, {"b": "2"}]
