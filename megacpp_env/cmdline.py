"""A command line as it may be stored (``run --record``, a golden's command, ``reproduce``): every
argument judged by what a secret sits next to, not only by its shape (``megacpp_env.redact`` is the one
detector of shapes and secret-named keys; this module adds the conventions of command lines).

Next to what a secret sits:
- a secret-named option: ``--password X``, ``--api-key=X``, ``--pw X``, ``--token -X`` (a value may start
  with ``-``; only ``--word`` or a two-character ``-x`` is taken for the next option); ``--key X`` when X
  looks generated. A switch named like one (``--password-stdin``, ``--no-auth``) takes no value;
- a header flag: ``-H "Authorization: ..."``;
- a program's own flags (``CONVENTIONS``): ``curl -u user:PASS``, ``mysql -pPASS``, ``sshpass -p PASS``,
  ``docker login -p X``, ``redis-cli -a X``, ``zip -P X``, ``openssl -passin pass:X`` ...;
- a word: after ``login``, a positional that looks generated (``wandb login <40 hex>``); after a setter
  (``set``, ``config``, ``configure`` ...), the value after a secret-named key
  (``aws configure set aws_secret_access_key X``, ``git config user.password X``);
- everything ``redact`` finds in an argument: URL passwords, token formats, ``key=value`` and quoted
  keys (``'{"password": "x"}'``); an argument that is itself a shell command (``bash -c "curl -u a:b
  ..."``) is split and judged as a command line.

Fails closed: where in doubt, an argument is replaced. Stdlib only; never prints.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from megacpp_env.redact import REDACTED, is_secret_name, is_token_like, is_trivial, key_class, redact

# A header whose whole value is a credential (``-H "Authorization: Bearer x"``, ``Cookie: ...``).
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
_HEADER_FLAGS = frozenset({"-H", "--header", "--headers"})
# Words of an option that make it a switch (it takes no value), whatever else it is named.
_SWITCH_WORDS = frozenset({"stdin", "prompt", "ask", "no", "interactive"})
# Words after which a secret-named bare key is followed by its value.
_SETTERS = frozenset({"set", "config", "configure", "config:set", "put", "add", "modify", "login", "secret"})
_KEY_WORDS = re.compile(r"[A-Za-z][a-z]*|[0-9]+")
_BARE_KEY = re.compile(r"[A-Za-z0-9_./:@-]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, kw_only=True, slots=True)
class Convention:
    """One program's flags whose value is a credential. ``after``: a word that must come first (docker's
    ``-p`` is a port, but not after ``login``); ``kind``: ``value`` (the next argument), ``attached``
    (``-pPASS`` only: the flag alone prompts), ``both``, ``userinfo`` (``user:PASS``: the part after the
    separator)."""

    programs: frozenset[str]
    flags: tuple[str, ...]
    kind: str
    after: str = ""
    separator: str = ":"


def _c(programs: str, flags: str, kind: str, **kw: str) -> Convention:
    return Convention(programs=frozenset(programs.split()), flags=tuple(flags.split()), kind=kind, **kw)


CONVENTIONS = (
    _c("curl", "-u --user -U --proxy-user", "userinfo"),
    _c("wget", "--user --http-user --proxy-user", "userinfo"),
    _c("skopeo", "--creds --src-creds --dest-creds", "userinfo"),
    _c("smbclient rpcclient", "-U --user", "userinfo", separator="%"),
    _c("mysql mysqldump mysqladmin mysqlimport mysqlshow mysqlcheck mariadb mariadb-dump", "-p", "attached"),
    _c("sshpass", "-p", "both"),
    _c("docker podman nerdctl buildah helm oras crane regctl skopeo", "-p", "both", after="login"),
    _c("twine", "-p", "both"),
    _c("mongo mongosh mongodump mongorestore mongoexport mongoimport", "-p", "both"),
    _c("redis-cli keydb-cli", "-a", "both"),
    _c("zip unzip", "-P", "both"),
    _c("7z 7za 7zr rar unrar", "-p", "attached"),
    _c("sqlcmd bcp osql isql", "-P", "both"),
    _c("ldapsearch ldapadd ldapmodify ldapdelete ldapwhoami ldappasswd ldapcompare", "-w", "both"),
    _c("openssl", "-passin -passout -pass -k -password", "value"),
    _c("psql pg_dump pg_restore", "-W", "attached"),
)
_WRAPPERS = frozenset({"sudo", "doas", "env", "nohup", "time", "nice", "exec", "command", "timeout", "stdbuf"})


@dataclass(kw_only=True, slots=True)
class _Seen:
    """What came before the argument being judged."""

    programs: set[str] = field(default_factory=set)  # base names of the positional arguments so far
    words: set[str] = field(default_factory=set)  # the positional words so far (subcommands)

    def see(self, arg: str) -> None:
        if arg and not arg.startswith("-") and "=" not in arg:
            self.programs.add(arg.rsplit("/", 1)[-1])
            self.words.add(arg.lower())

    def conventions(self) -> list[Convention]:
        return [c for c in CONVENTIONS if c.programs & self.programs and (not c.after or c.after in self.words)]


def redact_argv(argv: Sequence[str], *, depth: int = 0) -> list[str]:
    """``argv`` as it may be stored (see the module docstring); as many arguments as given."""
    out: list[str] = []
    seen = _Seen()
    pending = ""  # what the previous argument said the next one is
    for arg in argv:
        if pending and _takes(arg, pending):
            out.append(_hidden(arg, pending))
            pending = ""
            continue
        text, pending = _judge(arg, seen, depth)
        out.append(text)
        seen.see(arg)
    return out


def _takes(arg: str, pending: str) -> bool:
    """Whether ``arg`` is the value ``pending`` announced: anything but the next option (``--word`` or
    ``-x``); a header flag takes anything."""
    return pending == "header" or not (arg.startswith("--") or re.fullmatch(r"-[A-Za-z]", arg))


def _hidden(arg: str, pending: str) -> str:
    if pending == "header":
        return _header(arg)
    if pending.startswith("userinfo"):
        user, sep, secret = arg.partition(pending.removeprefix("userinfo") or ":")
        return f"{redact(user).text}{sep}{REDACTED}" if sep and secret else redact(arg).text
    if pending == "generated":
        return REDACTED if _generated(arg) else redact(arg).text
    return arg if is_trivial(arg) else REDACTED


def _judge(arg: str, seen: _Seen, depth: int) -> tuple[str, str]:
    """(the argument as stored, what it says the next one is)."""
    if arg in _HEADER_FLAGS:
        return arg, "header"
    for conv in seen.conventions():
        judged = _convention(arg, conv)
        if judged is not None:
            return judged
    flag, eq, value = arg.partition("=")
    if arg.startswith("-") and not eq:
        return redact(arg).text, _option_takes(arg.lstrip("-"))
    if eq and flag.startswith("-"):
        return _option_value(flag, value), ""
    return _positional(arg, seen, depth)


def _positional(arg: str, seen: _Seen, depth: int) -> tuple[str, str]:
    name, eq, value = arg.partition("=")
    if eq and _NAME.fullmatch(name) and is_secret_name(name) and not is_trivial(value):
        return f"{name}={REDACTED}", ""  # `PGPASSWORD=x psql`: the whole argument is the value
    text = _text(arg, depth)
    if text != arg:
        return text, ""  # a credential of its own (a token format, a URL password)
    if "login" in seen.words and _generated(arg):
        return REDACTED, ""  # `wandb login <40 hex>`
    if seen.words & _SETTERS and _BARE_KEY.fullmatch(arg) and _names_a_secret(arg):
        return arg, "value"  # `aws configure set aws_secret_access_key VALUE`
    return text, ""


def _convention(arg: str, conv: Convention) -> tuple[str, str] | None:
    """``arg`` judged by one program's convention (None: not one of its flags)."""
    kind = "userinfo" + conv.separator if conv.kind == "userinfo" else "value"
    for flag in conv.flags:
        if arg == flag and conv.kind != "attached":
            return arg, kind
        if arg.startswith(flag + "=") or (arg.startswith(flag) and len(arg) > len(flag) == 2):
            rest = arg[len(flag) :]
            eq = "=" if rest.startswith("=") else ""
            return flag + eq + _hidden(rest[len(eq) :], kind), ""
    return None


def _option_takes(name: str) -> str:
    """What ``--name`` (no ``=``) says its next argument is: ``value`` (a password or token option),
    ``generated`` (``--key``: when it looks generated), or nothing (a switch, any other option)."""
    words = [w.lower() for w in _KEY_WORDS.findall(name)]
    if not words or _SWITCH_WORDS & set(words):
        return ""
    if key_class(name):
        return "value"
    return "generated" if words[-1] in ("key", "keys") else ""


def _option_value(flag: str, value: str) -> str:
    name = flag.lstrip("-")
    if flag in _HEADER_FLAGS:
        return f"{flag}={_header(value)}"
    if key_class(name) and not is_trivial(value) and not _SWITCH_WORDS & {w.lower() for w in _KEY_WORDS.findall(name)}:
        return f"{flag}={REDACTED}"
    if _option_takes(name) == "generated" and _generated(value):
        return f"{flag}={REDACTED}"
    return f"{flag}={_text(value, 0)}" if value else redact(flag + "=").text


def _names_a_secret(arg: str) -> bool:
    """A dotted or pathed key with a secret-named part: ``user.password``, ``//registry/:_authToken``,
    ``pypi-token.pypi``."""
    return any(key_class(part) for part in re.split(r"[./:@]", arg) if part)


def _generated(value: str) -> bool:
    """A value that reads as a generated credential: token-like (hex of 32+ included), a known token
    format, or 8+ characters mixing letters and digits."""
    if is_token_like(value) or redact(value).text != value:
        return True
    return len(value) >= 8 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _header(value: str) -> str:
    name, colon, rest = value.partition(":")
    if colon and (name.strip().lower() in _SECRET_HEADERS or key_class(name.strip())) and rest.strip():
        return f"{name}: {REDACTED}"
    return redact(value).text


def _text(arg: str, depth: int) -> str:
    """Any other argument: what ``redact`` finds; one that is a shell command line itself (``bash -c
    "..."``) judged as a command line too, then joined again (``shlex``)."""
    found = redact(arg).text
    if depth >= 3 or not any(c.isspace() for c in arg):
        return found
    try:
        words = shlex.split(arg)
    except ValueError:
        return found
    judged = redact_argv(words, depth=depth + 1)
    return found if judged == words else shlex.join(judged)
