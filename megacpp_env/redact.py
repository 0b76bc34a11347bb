"""Secret redaction shared by every module that may print or record a URL or an environment value.

Stdlib only: imported by the git wrapper, checkouts and the snapshot collectors alike.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "<redacted>"
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "PRIVATE", "COOKIE", "SESSION")
_SECRET_PARTS = frozenset({"KEY", "APIKEY", "PASS", "PWD", "SIGNATURE", "SIG"})
URL_RE = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>[^\s'\"<>,;]+)")


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    if any(word in upper for word in _SECRET_WORDS):
        return True
    parts = set(re.split(r"[^A-Z0-9]+", upper))
    return bool(parts & _SECRET_PARTS) or any(p.endswith("KEY") and len(p) > 3 for p in parts)


def _strip_url(match: re.Match[str]) -> str:
    url = f"{match['scheme']}://{match['rest']}"
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2]
        query = parts.query
        if query:
            pairs = [(k, REDACTED if is_secret_name(k) else v) for k, v in parse_qsl(query, keep_blank_values=True)]
            query = urlencode(pairs, safe="<>")
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return f"{match['scheme']}://{REDACTED}"


def strip_url_credentials(text: str) -> str:
    """Remove userinfo (``user:token@``) and secret-looking query values from every URL in ``text``."""
    if "://" not in text:
        return text
    return URL_RE.sub(_strip_url, text)


# ---- files --------------------------------------------------------------------------------------

# Names of files that hold credentials by convention (ssh keys, netrc, registry and cloud logins).
_CREDENTIAL_FILES = frozenset(
    {
        ".netrc", "_netrc", ".pypirc", ".npmrc", ".git-credentials", ".env", ".envrc", ".pgpass",
        ".dockercfg", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "credentials", "kubeconfig",
    }
)  # fmt: skip
_CREDENTIAL_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".ppk", ".gpg", ".asc", ".kdbx")
_CREDENTIAL_CONTENT = re.compile(
    rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----"
    rb"|\b(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|glpat-[A-Za-z0-9_-]{16,}"
    rb"|xox[abposr]-[A-Za-z0-9-]{8,}|(?:AKIA|ASIA)[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{16,}"
    rb"|npm_[A-Za-z0-9]{20,}|pypi-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{20,})"
    rb"|[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:'\"]+:[^\s/@'\"]+@"
)


def credential_file_reason(rel: str, data: bytes) -> str:
    """Why a file (path ``rel``, content ``data``) looks like it holds a credential; '' when it does not.
    By name (``.netrc``, ``id_rsa``, ``*.pem``, a secret-bearing word such as ``token.txt``) or by
    content (a private key, a well-known token shape, a URL with a password)."""
    name = rel.rsplit("/", 1)[-1]
    lower = name.lower()
    if lower in _CREDENTIAL_FILES or lower.endswith(_CREDENTIAL_SUFFIXES) or lower.startswith(".env."):
        return f"its name ({name}) is a credential file's"
    if is_secret_name(name.split(".", 1)[0] if not name.startswith(".") else name[1:]):
        return f"its name ({name}) holds a secret-bearing word"
    found = _CREDENTIAL_CONTENT.search(data)
    if found is not None:
        return "its content holds a credential (a private key, a token or a URL with a password)"
    return ""
