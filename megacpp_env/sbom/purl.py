"""Package URLs (purl: github.com/package-url/purl-spec) of what the SBOM lists: PyPI distributions, pinned
git sources (``pkg:github/OWNER/REPO@SHA``, else ``pkg:generic/NAME@SHA?vcs_url=git+URL@SHA``) and Debian
packages (``pkg:deb/VENDOR/NAME@VERSION?arch=ARCH``).

Written here, not with packageurl-python: a dependency of the tool is a dependency of every image (the
image installs the tool into its venv with ``--no-deps``, so every lock carries ``layout.TOOL_REQUIREMENTS``
and ``pip check`` runs there), and what is needed is the encoding of these four types. tests/test_sbom_purl.py
holds it to packageurl-python: the same string as ``PackageURL(...).to_string()`` and the same fields back
from ``PackageURL.from_string``, on generated names, versions and URLs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import quote, unquote, urlsplit

from megacpp_env.spec.fields import SCP_URL_RE

_LOWERCASE = frozenset({"github", "pypi"})  # types whose namespace and name are case-insensitive (lowercased)


def _encode(text: str) -> str:
    """Percent-encode as packageurl-python does: everything but unreserved characters, ``/`` and ``:``."""
    return quote(text, safe="/:")


def purl(
    kind: str, name: str, version: str = "", *, namespace: str = "", qualifiers: Mapping[str, str] | None = None
) -> str:
    """``pkg:KIND/NAMESPACE/NAME@VERSION?QUALIFIERS``: each part encoded, qualifiers sorted, empty ones left out.
    A ``/`` in the name is a caller's bug (the name is one path segment)."""
    if "/" in name or not name:
        raise ValueError(f"a purl name is one non-empty segment, got {name!r}")
    if kind in _LOWERCASE:
        name, namespace = name.lower(), namespace.lower()
    if kind == "pypi":
        name = name.replace("_", "-")
    out = f"pkg:{kind}/" + "".join(f"{_encode(seg)}/" for seg in namespace.split("/") if seg) + _encode(name)
    if version:
        out += f"@{_encode(version)}"
    pairs = sorted((key.lower(), value) for key, value in (qualifiers or {}).items() if value)
    if pairs:
        out += "?" + "&".join(f"{key}={_encode(value)}" for key, value in pairs)
    return out


def pypi_purl(name: str, version: str) -> str:
    return purl("pypi", name, version)


_GITHUB_PART = re.compile(r"[A-Za-z0-9._-]+")


def github_repo(url: str) -> tuple[str, str] | None:
    """(owner, repository) of a repository URL on github.com (https, http, git, ssh or scp form), else None."""
    if SCP_URL_RE.fullmatch(url):
        host, path = url.split("@", 1)[1].split(":", 1)
    else:
        parts = urlsplit(url)
        if parts.scheme not in ("https", "http", "git", "ssh"):
            return None
        host, path = parts.hostname or "", parts.path
    if host.lower() not in ("github.com", "www.github.com"):
        return None
    segments = [seg for seg in path.strip("/").split("/") if seg]
    if len(segments) != 2:
        return None
    owner, repo = segments[0], segments[1].removesuffix(".git")
    return (owner, repo) if _GITHUB_PART.fullmatch(owner) and _GITHUB_PART.fullmatch(repo) else None


def vcs_url(url: str, commit: str) -> str:
    """The purl ``vcs_url`` qualifier: ``git+<URL>@<commit>`` (an scp-form URL as ``ssh://``)."""
    if SCP_URL_RE.fullmatch(url):
        user_host, path = url.split(":", 1)
        url = f"ssh://{user_host}/{path.lstrip('/')}"
    return f"{url if url.startswith('git+') else 'git+' + url}@{commit}"


def source_purl(name: str, repo: str, commit: str) -> str:
    """A pinned source: ``pkg:github/OWNER/REPO@SHA`` on GitHub, else ``pkg:generic/NAME@SHA`` with its VCS URL."""
    found = github_repo(repo)
    if found:
        return purl("github", found[1], commit, namespace=found[0])
    return purl("generic", name, commit, qualifiers={"vcs_url": vcs_url(repo, commit)})


def deb_purl(vendor: str, name: str, version: str, arch: str) -> str:
    """A Debian package: ``pkg:deb/VENDOR/NAME@VERSION?arch=ARCH`` (the vendor is os-release's ID)."""
    return purl("deb", name, version, namespace=vendor, qualifiers={"arch": arch})


_DEB = re.compile(r"pkg:deb/(?:(?P<vendor>[^/?#@]+)/)?(?P<name>[^/?#@]+)@(?P<version>[^?#]+)(?:\?(?P<q>[^#]*))?")


def parse_deb_purl(text: str) -> tuple[str, str, str, str] | None:
    """(vendor, name, version, arch) of a Debian package URL as ``deb_purl`` writes it, else None."""
    m = _DEB.fullmatch(text)
    if not m:
        return None
    quals = dict(pair.partition("=")[::2] for pair in (m["q"] or "").split("&") if pair)
    return unquote(m["vendor"] or ""), unquote(m["name"]), unquote(m["version"]), unquote(quals.get("arch", ""))
