"""The error hierarchy and the exit codes the one top-level handler maps it to.

Exit codes (documented in README.md):
  0  success, nothing found
  1  findings or a user error (bad spec, stale file, drift, refused operation)
  2  usage error (argparse)
  3  a bug in megacpp-env (an unexpected exception)
  130 interrupted (^C)
  bisect-check: 0 the environment is the golden's, 125 it is not (git bisect: skip), 128 its own
  error (git bisect: abort), so that no failure of the check marks a commit bad
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_BUG = 3
EXIT_INTERRUPTED = 130
EXIT_ABORT_BISECT = 128


class MegacppEnvError(Exception):
    """Base of every error megacpp-env raises on purpose. Its str() is shown to the user as is."""

    exit_code = EXIT_FINDINGS


class SpecError(MegacppEnvError, ValueError):
    """stack.yaml (or another spec-like input) is malformed or violates the schema.

    The message is one line: ``FILE:LINE: KEY.PATH: what is wrong[ (remedy)]``.
    """

    def __init__(
        self, message: str, *, file: str = "", line: int = 0, key: str = "", remedy: str = "", code: str = ""
    ) -> None:
        self.file = file
        self.line = line
        self.key = key
        self.detail = message
        self.remedy = remedy
        self.code = code  # the spec's error code (SP001...: ``explain CODE``), where one applies
        where = file
        if line:
            where = f"{where}:{line}" if where else f"line {line}"
        parts = [p for p in (where, key) if p]
        text = ": ".join([*parts, message])
        if remedy:
            text = f"{text} (remedy: {remedy})"
        super().__init__(one_line(text))


class SpecErrors(SpecError):
    """Every error found in one spec: the loader reads on after an error, so one run reports them all.
    It reads as its first error (and how many more there are); ``errors`` holds each one."""

    def __init__(self, errors: list[SpecError] | tuple[SpecError, ...]) -> None:
        first = errors[0]
        super().__init__(
            first.detail, file=first.file, line=first.line, key=first.key, remedy=first.remedy, code=first.code
        )
        self.errors = tuple(errors)
        if len(errors) > 1:
            more = len(errors) - 1
            self.args = (f"{self.args[0]} (and {more} more error{'s' if more > 1 else ''}: "
                         "`megacpp-env check` lists them all)",)  # fmt: skip


class UsageError(SpecError):
    """The command line names something that does not exist (a target, a source, a rule code): exit 2,
    like argparse's own usage errors, with a did-you-mean when a known name is close."""

    exit_code = EXIT_USAGE


def did_you_mean(name: str, known: list[str] | tuple[str, ...]) -> str:
    """``did you mean 'check'?`` for the closest known name, else ``known: a, b, c`` (at most 20)."""
    import difflib

    by_folded = {k.casefold(): k for k in known}  # "tc05" is close to "TC005"
    close = difflib.get_close_matches(name.casefold(), list(by_folded), n=1, cutoff=0.6)
    if close:
        return f"did you mean {by_folded[close[0]]!r}?"
    shown = ", ".join(list(known)[:20]) + (", ..." if len(known) > 20 else "")
    return f"known: {shown or 'none'}"


def unknown_name(what: str, name: str, known: list[str] | tuple[str, ...], *, file: str = "") -> UsageError:
    """The usage error for a ``what`` (target, source, rule code) the command line names and nothing has."""
    return UsageError(f"unknown {what} {name!r}", file=file, remedy=did_you_mean(name, known))


def one_line(text: str) -> str:
    """Escape every non-printable character so a message stays on one line whatever the input held."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


class FormatError(SpecError):
    """A file megacpp-env reads (a lock, an overlay manifest, a provenance record, a snapshot, the
    acknowledgement file) is malformed. ``key`` is the context path inside the document
    (``packages[3].wheels[0].hashes``); the message is one line: ``FILE: KEY.PATH: what is wrong``.
    """


class InputError(SpecError):
    """A file or path the user gave cannot be used: unreadable, not UTF-8, too large, a directory
    where a file is needed. ``file`` names it; ``detail`` says what is wrong (format readers re-raise
    it as their own ``FormatError``)."""


class ToolError(MegacppEnvError, RuntimeError):
    """An external tool (git, docker, uv, nvidia-smi) failed or is missing."""


class ToolNotFoundError(ToolError, FileNotFoundError):
    """An external tool is not on PATH."""


class StaleError(MegacppEnvError):
    """A generated file (rendered Dockerfile, lock) does not match its inputs."""


class VerificationError(MegacppEnvError):
    """A checkout, overlay, image or installed file is not what it should be."""


class RefusedError(MegacppEnvError):
    """The tool refuses an operation that would lose data or act on an unverifiable tree."""


class Terminated(BaseException):
    """SIGTERM or SIGHUP reached the program: ``cli.entry`` turns them into this, as Python turns SIGINT
    into ``KeyboardInterrupt``, so what is running unwinds the same way (a git or build child in a
    process group of its own is killed and reaped, a temporary file removed, ``run``'s benchmark gets
    the signal) and the program exits 128 + the signal's number, as a shell reports it. Not an
    ``Exception``: nothing that handles errors swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
