"""Field-level validation for the spec: typed readers that name the key path and line on failure.

Every string that can reach a Dockerfile, a shell command or a label passes ``safe_string``:
control characters (newlines included), a trailing backslash and unbalanced quotes are refused
here, at load time. This is the injection boundary; renderers still quote every value.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import PurePosixPath
from typing import Any, TypeVar

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from megacpp_env import layout
from megacpp_env.chars import dangerous_char, describe_char
from megacpp_env.errors import SpecError
from megacpp_env.redact import credential_reason, env_credential_reason
from megacpp_env.spec import envpolicy
from megacpp_env.spec.codes import DUPLICATE, INVALID, MISSING_KEY, UNKNOWN_KEY, UNSAFE, WRONG_TYPE
from megacpp_env.spec.model import ImageRef
from megacpp_env.spec.yamlsrc import join_key

T = TypeVar("T")

COMMIT_RE = re.compile(r"[0-9a-f]{40}")
NAME_RE = re.compile(r"[a-z][a-z0-9_]*")
SLUG_RE = layout.SLUG_RE
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MODULE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
SM_ARCH_RE = re.compile(r"sm_[0-9]{2,3}[af]?")
ARCH_LIST_RE = re.compile(r"[0-9]+\.[0-9]+[af]?(\+PTX)?(;[0-9]+\.[0-9]+[af]?(\+PTX)?)*")
APT_PACKAGE_RE = re.compile(r"[a-z0-9][a-z0-9+.-]+(=[A-Za-z0-9.+~:-]+)?")
APT_REPO_RE = re.compile(r"ppa:[a-z0-9][a-z0-9.+-]*/[a-z0-9][a-z0-9.+-]*")
APT_OPTION_RE = re.compile(r"[A-Za-z][A-Za-z0-9:_-]*=[A-Za-z0-9._/:-]+")
PACKAGE_NAME_RE = re.compile(r"([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])")
URL_RE = re.compile(r"(https?|git|ssh|file)://[^\s'\"\\]+")
SCP_URL_RE = re.compile(r"[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[A-Za-z0-9._/~-]+")
_IMAGE_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_RE = re.compile(
    rf"(?P<name>(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{_IMAGE_COMPONENT}(?:/{_IMAGE_COMPONENT})*)"
    r"(?::(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[a-f0-9]{64}))?"
)
CODE_RE = re.compile(r"[A-Z]{2,3}[0-9]{3}")  # a finding code: TC005, SP002, SUP001


# -- patterns for the JSON Schema (ECMA-262 and Python alike: no named groups, no inline flags) ------
# What `check` reads with packaging, written as patterns an editor can run. tests/test_spec_schema.py
# holds each against packaging itself (it accepts what packaging accepts).
def _ci(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" for c in word)


_S = "[-_.]?"
VERSION_PATTERN = (
    r"\s*[vV]?(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*"
    rf"(?:{_S}(?:{'|'.join(_ci(w) for w in ('alpha', 'a', 'beta', 'b', 'preview', 'pre', 'c', 'rc'))}){_S}[0-9]*)?"
    rf"(?:-[0-9]+|{_S}(?:{'|'.join(_ci(w) for w in ('post', 'rev', 'r'))}){_S}[0-9]*)?"
    rf"(?:{_S}{_ci('dev')}{_S}[0-9]*)?"
    r"(?:\+[a-zA-Z0-9]+(?:[-_.][a-zA-Z0-9]+)*)?\s*"
)  # PEP 440, as packaging.version.Version parses it
_CLAUSE = r"(?:===\s*[^,;\s()]+|(?:~=|==|!=|<=|>=|<|>)\s*[^,;\s()<>=!~][^,;\s()]*)"  # === takes any text
# a PEP 440 specifier set (SpecifierSet skips empty items); in a requirement, only a trailing comma
SPECIFIER_PATTERN = rf"\s*(?:,\s*)*{_CLAUSE}\s*(?:,\s*(?:{_CLAUSE}\s*)?)*"
_REQ_SPECIFIERS = rf"\s*{_CLAUSE}\s*(?:,\s*{_CLAUSE}\s*)*(?:,\s*)?"
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?"  # packaging: \b[a-zA-Z0-9][a-zA-Z0-9._-]*\b
REQUIREMENT_PATTERN = (
    rf"\s*{_NAME}\s*(?:\[\s*(?:{_NAME}\s*(?:,\s*{_NAME}\s*)*)?\])?\s*"
    rf"(?:\(\s*(?:{_REQ_SPECIFIERS})?\s*\)|{_REQ_SPECIFIERS})?\s*(?:;.*)?"
)  # PEP 508 without a URL (the spec refuses direct URL requirements)
URL_PATTERN = "(?:https?|git|ssh|file)://[^\\s'\"\\\\]+"  # URL_RE
MAX_STRING = 4096


class Skip(Exception):
    """A part of the document could not be read: its error is recorded (``Reader.errors``), and what
    holds it is not built; the loader reads on with the next part."""


class Reader:
    """Reads typed values out of the parsed document, raising SpecError with file, line and key path.

    The loader reads on after an error: ``build`` reads each field of a record on its own and records
    what fails (``errors``), ``attempt`` does so for one value, and a part that fails is left out
    (``Skip``) with the names of the broken entries kept (``broken``), so that a reference to one
    is not reported again as unknown. ``load_spec`` raises ``SpecErrors`` with all of them at the end.
    """

    def __init__(self, file: str, lines: Mapping[str, int]) -> None:
        self.file = file
        self.lines = lines
        self.errors: list[SpecError] = []
        self.broken: set[str] = set()  # "toolchains.NAME": entries that failed, by key

    def record(self, exc: SpecError) -> None:
        if not any((e.line, e.key, e.detail) == (exc.line, exc.key, exc.detail) for e in self.errors):
            self.errors.append(exc)

    def attempt(self, read: Callable[[], T], default: T) -> T:
        """``read()``; on a spec error, the error is recorded and ``default`` returned."""
        try:
            return read()
        except SpecError as exc:
            self.record(exc)
        except Skip:
            pass
        return default

    def build(self, cls: Callable[..., T], **values: Any) -> T:
        """``cls(**values)`` where each callable value is read on its own: every field that fails is
        recorded, then the record is skipped (``Skip``) when any did."""
        out: dict[str, Any] = {}
        failed = False
        for name, value in values.items():
            if not callable(value):
                out[name] = value
                continue
            try:
                out[name] = value()
            except SpecError as exc:
                self.record(exc)
                failed = True
            except Skip:
                failed = True
        if failed:
            raise Skip
        return cls(**out)

    @staticmethod
    def need(value: T | None) -> T:
        """A value read before (``attempt``): a part that failed skips what needs it, without a new error."""
        if value is None:
            raise Skip
        return value

    def line(self, key: str) -> int:
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key.rpartition(".")[0] if "." in key else ""
        return self.lines.get("", 0)

    def fail(self, key: str, message: str, remedy: str = "", *, code: str = INVALID) -> SpecError:
        return SpecError(message, file=self.file, line=self.line(key), key=key, remedy=remedy, code=code)

    # -- structure -------------------------------------------------------------------------
    def mapping(
        self,
        value: Any,
        key: str,
        *,
        allowed: Iterable[str] = (),
        required: Iterable[str] = (),
        partial: bool = False,
    ) -> dict[str, Any]:
        """A mapping: every unsafe or unknown key and every missing required key is recorded; a missing
        one skips the mapping (``partial``: its other keys are still read, by the caller)."""
        if not isinstance(value, dict):
            raise self.fail(key or "<root>", f"expected a mapping, got {describe(value)}", code=WRONG_TYPE)
        for k in value:
            self.attempt(functools.partial(self.safe, k, join_key(key, k), what="unsafe key"), "")
        allowed_set = set(allowed)
        for k in value if allowed_set else ():
            if k not in allowed_set:
                hint = difflib.get_close_matches(k, sorted(allowed_set), n=1)
                remedy = f"did you mean {hint[0]!r}?" if hint else f"allowed keys: {', '.join(sorted(allowed_set))}"
                self.record(self.fail(join_key(key, k), "unknown key", remedy, code=UNKNOWN_KEY))
        missing = [k for k in required if k not in value]
        for k in missing:
            self.record(self.fail(key or "<root>", f"missing required key {k!r}", code=MISSING_KEY))
        if missing and not partial:
            raise Skip
        return value

    def seq(self, value: Any, key: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list, got {describe(value)}", code=WRONG_TYPE)
        return value

    def str_list(self, value: Any, key: str, check: Callable[[str, str], str] | None = None) -> tuple[str, ...]:
        """A list of strings, each checked on its own (every bad item is recorded)."""
        items: list[str] = []
        failed = False
        for i, v in enumerate(self.seq(value, key)):
            item = self.attempt(functools.partial(self._item, v, join_key(key, i), check), None)
            failed = failed or item is None
            items.append(item or "")
        seen: set[str] = set()
        for i, item in enumerate(items):
            if item and item in seen:
                self.record(self.fail(join_key(key, i), f"duplicate entry {item!r}", code=DUPLICATE))
                failed = True
            seen.add(item)
        if failed:
            raise Skip
        return tuple(items)

    def _item(self, value: Any, key: str, check: Callable[[str, str], str] | None) -> str:
        text = self.string(value, key)
        return check(text, key) if check else text

    def env_map(self, value: Any, key: str) -> dict[str, str]:
        """Environment variables: valid names, none that runs code in every process
        (``spec.envpolicy``), no credential in a value (``redact``: secret names, tokens, URLs)."""
        out: dict[str, str] = {}
        failed = False
        for name, val in self.mapping(value, key).items():
            text = self.attempt(functools.partial(self._env_value, name, val, join_key(key, name)), None)
            failed = failed or text is None
            out[name] = text or ""
        if failed:
            raise Skip
        return dict(sorted(out.items()))

    def _env_value(self, name: str, value: Any, key: str) -> str:
        if not ENV_NAME_RE.fullmatch(name):
            raise self.fail(key, f"invalid environment variable name {name!r}")
        text = self.string(value, key, allow_empty=True)
        problem, remedy = envpolicy.refusal(name, text)
        if problem:
            raise self.fail(key, problem, remedy, code=UNSAFE)
        secret = env_credential_reason(name, text)
        if secret:
            raise self.fail(
                key,
                f"looks like a credential ({secret})",
                "keep secrets out of the spec and the image: pass them at run time or as a build secret",
                code=UNSAFE,
            )
        return text

    # -- scalars ---------------------------------------------------------------------------
    def string(self, value: Any, key: str, *, allow_empty: bool = False) -> str:
        if isinstance(value, bool) or not isinstance(value, str):
            remedy = f'quote it: "{value}"' if isinstance(value, (bool, int, float)) else ""
            raise self.fail(key, f"expected a string, got {describe(value)}", remedy, code=WRONG_TYPE)
        if not value and not allow_empty:
            raise self.fail(key, "must not be empty")
        return self.safe(value, key)

    def safe(self, value: str, key: str, *, what: str = "unsafe value") -> str:
        problem = unsafe_reason(value)
        if problem.startswith("looks like a credential"):
            raise self.fail(
                key,
                f"{what}: {problem}",
                "keep secrets out of the spec: use a build secret or the environment",
                code=UNSAFE,
            )
        if problem:
            raise self.fail(
                key, f"{what}: {problem}", "values reach Dockerfiles, shells and labels verbatim", code=UNSAFE
            )
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {describe(value)}", code=WRONG_TYPE)
        return value

    def integer(self, value: Any, key: str, *, minimum: int = 0, maximum: int = 1 << 20) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {describe(value)}", code=WRONG_TYPE)
        if not minimum <= value <= maximum:
            raise self.fail(key, f"expected an integer in [{minimum}, {maximum}], got {value}")
        return value

    def number(self, value: Any, key: str, *, low: float, high: float, low_open: bool = False) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(key, f"expected a number, got {describe(value)}", code=WRONG_TYPE)
        f = float(value)
        if math.isnan(f) or f > high or f < low or (low_open and f == low):
            bracket = "(" if low_open else "["
            raise self.fail(key, f"expected a number in {bracket}{low}, {high}], got {value}")
        return f

    def choice(self, value: Any, key: str, choices: Iterable[str]) -> str:
        s = self.string(value, key)
        options = list(choices)
        if s not in options:
            hint = difflib.get_close_matches(s, options, n=1)
            remedy = f"did you mean {hint[0]!r}?" if hint else f"one of: {', '.join(options)}"
            raise self.fail(key, f"unknown value {s!r}", remedy)
        return s

    def pattern(self, value: Any, key: str, regex: re.Pattern[str], what: str, remedy: str = "") -> str:
        s = self.string(value, key)
        if not regex.fullmatch(s):
            raise self.fail(key, f"expected {what}, got {s!r}", remedy)
        return s

    # -- domain values -----------------------------------------------------------------------
    def parsed(
        self, value: Any, key: str, parse: Callable[[str], object], invalid: type[ValueError], what: str, remedy: str
    ) -> str:
        """A string that ``parse`` (one of packaging's classes) accepts; its ``invalid`` error is a spec error."""
        s = self.string(value, key)
        try:
            parse(s)
        except invalid:
            raise self.fail(key, f"invalid {what} {s!r}", remedy) from None
        return s

    def version(self, value: Any, key: str) -> str:
        return self.parsed(value, key, Version, InvalidVersion, "version", 'write a version such as "13.2"')

    def specifier(self, value: Any, key: str) -> str:
        return self.parsed(value, key, SpecifierSet, InvalidSpecifier, "version specifier", 'write e.g. ">=4.4.2"')

    def requirement(self, value: str, key: str) -> str:
        try:
            req = Requirement(value)
        except InvalidRequirement as exc:
            raise self.fail(key, f"invalid requirement {value!r}: {exc}".split("\n")[0]) from None
        if req.url:
            raise self.fail(key, "direct URL requirements are not allowed", "declare a source under `sources:` instead")
        return value

    def commit(self, value: Any, key: str) -> str:
        return self.pattern(
            value,
            key,
            COMMIT_RE,
            "a 40-hex commit SHA",
            "pin the full SHA: `git rev-parse <ref>` in a checkout",
        )

    def url(self, value: Any, key: str, *, schemes: tuple[str, ...] = ("https", "http", "git", "ssh", "file")) -> str:
        s = self.string(value, key)
        scheme = s.split("://", 1)[0] if "://" in s else ("ssh" if SCP_URL_RE.fullmatch(s) else "")
        if not (URL_RE.fullmatch(s) or SCP_URL_RE.fullmatch(s)) or scheme not in schemes:
            wanted = ", ".join(f"{x}://" for x in schemes)
            raise self.fail(key, f"expected a URL ({wanted}), got {s!r}")
        authority = s.split("://", 1)[1].split("/", 1)[0] if "://" in s else s.split(":", 1)[0]
        userinfo = authority.rpartition("@")[0]
        if userinfo and (scheme != "ssh" or ":" in userinfo):
            raise self.fail(
                key, "credentials in a URL", "keep secrets out of the spec: use a netrc, keyring or env", code=UNSAFE
            )
        return s

    def inside_repo(self, value: Any, key: str) -> str:
        """A relative path that stays inside the spec's directory: no absolute path, no ``~``, no ``..``."""
        s = self.string(value, key)
        parts = PurePosixPath(s).parts
        if s.startswith(("/", "~", "\\")) or ".." in parts or "\\" in s:
            raise self.fail(
                key, f"{s!r} leaves the repository", "give a path relative to stack.yaml's directory", code=UNSAFE
            )
        return s

    def image(self, value: Any, key: str) -> ImageRef:
        s = self.string(value, key)
        m = IMAGE_RE.fullmatch(s)
        if not m:
            raise self.fail(key, f"invalid image reference {s!r}", "write name:tag or name:tag@sha256:<64 hex>")
        if not m.group("tag") and not m.group("digest"):
            raise self.fail(key, f"image reference {s!r} has neither a tag nor a digest", "add an explicit :tag")
        return ImageRef(name=m.group("name"), tag=m.group("tag") or "", digest=m.group("digest") or "")


def unsafe_reason(value: str) -> str:
    """Why ``value`` must not reach a rendered file, a shell or a label ('' when it may): too long, a
    character ``megacpp_env.chars`` refuses (controls, bidi and other format characters, separators,
    odd spaces), a trailing backslash, an unbalanced quote, or a credential (``megacpp_env.redact``)."""
    if len(value) > MAX_STRING:
        return f"longer than {MAX_STRING} characters"
    ch = dangerous_char(value)
    if ch is not None:
        return f"control character {describe_char(ch)}"
    if value.endswith("\\"):
        return "trailing backslash (line continuation)"
    for quote in ("'", '"', "`"):
        if value.count(quote) % 2:
            return f"unbalanced {quote} quote"
    secret = credential_reason(value)
    if secret:
        return f"looks like a credential ({secret})"
    return ""


def describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}"
