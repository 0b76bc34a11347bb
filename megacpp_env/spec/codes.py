"""The codes of the spec's own errors (``SP...``), found by the loader, and of its suppressions
(``SUP...``), found when ``check`` applies them: each with its documentation for ``explain``.

Every error the loader finds is a ``SpecError`` with one of these codes; ``findings_of`` turns the
loader's ``SpecErrors`` (every error of one document) into findings.
"""

from __future__ import annotations

from megacpp_env.errors import SpecError
from megacpp_env.findings import CodeDoc, Finding

FILE = "SP001"
UNKNOWN_KEY = "SP002"
MISSING_KEY = "SP003"
WRONG_TYPE = "SP004"
INVALID = "SP005"
UNKNOWN_NAME = "SP006"
UNSAFE = "SP007"
DUPLICATE = "SP008"
VERSION = "SP009"
UNUSED_SUPPRESSION = "SUP001"
UNKNOWN_CODE = "SUP002"

_SPEC = "spec (every verb that reads stack.yaml; `megacpp-env check` lists every error of the file)"
_FIX = "cannot be suppressed: the spec does not load until it is fixed"

CODES = (
    CodeDoc(
        code=FILE,
        severity="error",
        summary="stack.yaml can be read and is one YAML document",
        family=_SPEC,
        doc="The file exists, is a regular file under 1 MiB, is UTF-8, and parses as one YAML document with "
        "string keys and no duplicate keys, alias bombs or recursive aliases.",
        example="stack.yaml:3: error SP001: invalid YAML: mapping values are not allowed here",
        silence=_FIX,
    ),
    CodeDoc(
        code=UNKNOWN_KEY,
        severity="error",
        summary="every key is one the schema knows",
        family=_SPEC,
        doc="A mapping holds only the keys of its section (docs/SPEC.md; `megacpp-env schema`). A misspelt "
        "key would otherwise be ignored silently; the remedy names the closest known key.",
        example="targets:\n  gb10:\n    platfroms: [linux/arm64]\n"
        "-> stack.yaml:5: error SP002 targets.gb10.platfroms: unknown key (remedy: did you mean 'platforms'?)",
        silence=_FIX,
    ),
    CodeDoc(
        code=MISSING_KEY,
        severity="error",
        summary="every required key is there",
        family=_SPEC,
        doc="Each section names its required keys (a source's repo and commit, a target's platforms, "
        "base_image and toolchain, ...).",
        example="sources:\n  vllm:\n    repo: https://github.com/vllm-project/vllm.git\n"
        "-> stack.yaml:2: error SP003 sources.vllm: missing required key 'commit'",
        silence=_FIX,
    ),
    CodeDoc(
        code=WRONG_TYPE,
        severity="error",
        summary="every value has its key's type",
        family=_SPEC,
        doc="A string where a string belongs (YAML reads 13.2 as a number and yes as a boolean: quote them), "
        "a list, a mapping, a boolean, an integer or a number where the schema says so.",
        example="toolchains:\n  cuda13:\n    python: 3.13\n"
        '-> error SP004 toolchains.cuda13.python: expected a string, got float 3.13 (remedy: quote it: "3.13")',
        silence=_FIX,
    ),
    CodeDoc(
        code=INVALID,
        severity="error",
        summary="every value is valid for its key",
        family=_SPEC,
        doc="Versions and specifiers parse (PEP 440), requirements parse (PEP 508, no direct URLs), commits "
        "are 40-hex SHAs, URLs have an allowed scheme, image references have a tag or a digest, names and "
        "enumerations match, numbers lie in their range.",
        example="sources:\n  vllm:\n    commit: main\n"
        "-> error SP005 sources.vllm.commit: expected a 40-hex commit SHA, got 'main' "
        "(remedy: pin the full SHA: `git rev-parse <ref>` in a checkout)",
        silence=_FIX,
    ),
    CodeDoc(
        code=UNKNOWN_NAME,
        severity="error",
        summary="every name refers to an entry that exists",
        family=_SPEC,
        doc="A target's toolchain, sources, artifacts and indexes, an alignment's targets, a source's needs "
        "and fetches name entries of their sections. An entry that itself fails to load is not reported "
        "again where it is named.",
        example="targets:\n  gb10:\n    toolchain: cuda-13\n"
        "-> error SP006 targets.gb10.toolchain: unknown toolchain 'cuda-13' (remedy: did you mean 'cuda13'?)",
        silence=_FIX,
    ),
    CodeDoc(
        code=UNSAFE,
        severity="error",
        summary="no value can break out of where it is written",
        family=_SPEC,
        doc="Values reach Dockerfiles, shells and labels: control characters, bidi and zero-width characters, "
        "a trailing backslash, unbalanced quotes, credentials (in values, URLs and environment variables), "
        "variables that run code in every process, and paths that leave the repository are refused.",
        example="sources:\n  vllm:\n    repo: https://user:token@github.com/vllm-project/vllm.git\n"
        "-> error SP007 sources.vllm.repo: credentials in a URL",
        silence=_FIX,
    ),
    CodeDoc(
        code=DUPLICATE,
        severity="error",
        summary="no entry is given twice or contradicts another",
        family=_SPEC,
        doc="A list item twice, a YAML key twice, a package pinned to two indexes, two overrides of one "
        "package, a fetch both pinned and unpinned.",
        example="targets:\n  gb10:\n    features: [te_nvfp4, te_nvfp4]\n"
        "-> error SP008 targets.gb10.features[1]: duplicate entry 'te_nvfp4'",
        silence=_FIX,
    ),
    CodeDoc(
        code=VERSION,
        severity="error",
        summary="the spec's schema_version is the one this tool reads",
        family=_SPEC,
        doc="schema_version names the layout of the file; a spec written for another layout is refused "
        "rather than misread.",
        example="schema_version: 2\n-> error SP009 schema_version: unsupported schema_version 2 "
        "(remedy: this tool reads 1)",
        silence=_FIX,
    ),
    CodeDoc(
        code=UNUSED_SUPPRESSION,
        severity="warning",
        summary="every suppression silences a finding",
        family="suppressions (megacpp-env check, doctor)",
        doc="`ignore: {CODE: reason}` under a target or a source silences the findings of CODE reported there. "
        "One that silences nothing (the finding is fixed, or it is reported elsewhere) would hide the next "
        "one: remove it. Reported only by a run that checks that code (`check` for rules, `doctor` for "
        "its own codes).",
        example="targets:\n  gb10:\n    ignore:\n      TC005: nvidia/cuda cannot be pinned from here\n"
        "-> (once gb10's base image is pinned) warning SUP001 targets.gb10.ignore.TC005: "
        "the suppression of TC005 silences nothing (remedy: remove it)",
        silence="cannot be suppressed: remove the suppression it names",
    ),
    CodeDoc(
        code=UNKNOWN_CODE,
        severity="error",
        summary="a suppression names a code that exists",
        family="suppressions (megacpp-env check)",
        doc="A misspelt code in `ignore:` would silence nothing; the remedy names the closest code "
        "(`megacpp-env explain --list` lists them all).",
        example="targets:\n  gb10:\n    ignore:\n      TC050: why\n"
        "-> error SUP002 targets.gb10.ignore.TC050: no finding has the code TC050 (remedy: did you mean 'TC005'?)",
        silence="cannot be suppressed: correct the code",
    ),
)


def findings_of(exc: SpecError) -> list[Finding]:
    """Every error of a spec that did not load, as findings (one, when it is not a ``SpecErrors``)."""
    errors = getattr(exc, "errors", None) or (exc,)
    return [
        Finding(
            code=e.code or FILE,
            severity="error",
            message=e.detail,
            file=e.file,
            line=e.line,
            key=e.key,
            remedy=e.remedy,
        )
        for e in errors
    ]
