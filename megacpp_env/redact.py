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
