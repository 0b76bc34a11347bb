"""What a built image holds beyond the locks, read inside it for its SBOM: the Debian packages dpkg records
(``dpkg-query``: dpkg's own reading of its status database) with the licenses their copyright files declare,
split into the base image's and the apt layers' by the base image's own dpkg database; the licenses each
Python distribution declares; and the OS (``/etc/os-release``). Never prints.

Everything the image answers is untrusted: its JSON is bounded and typed, each package name, version and
architecture must be of the form dpkg allows, and every text that reaches the SBOM is checked
(``licenses``) before use; anything else is a ToolError naming the image.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from megacpp_env import docker, layout
from megacpp_env.chars import dangerous_char, describe_char
from megacpp_env.errors import ToolError
from megacpp_env.records import json_object
from megacpp_env.sbom.licenses import COPYRIGHT_LIMIT, Licenses, deb_licenses, python_licenses

# dpkg-query's own escapes (\t, \n): one line per package.
DPKG_FORMAT = r"${Package}\t${Version}\t${Architecture}\t${db:Status-Status}\n"
GONE = frozenset({"not-installed", "config-files"})  # states in which a package's files are not on disk

# Runs in the image's venv: argv[1] the dpkg-query format, argv[2] {part: site directory} of distributions
# installed outside the venv (a toolchain's prefix), argv[3] the most bytes of one copyright file read.
# Prints the OS release file, dpkg's listing (null without dpkg-query), each listed package's copyright
# file (null: none; "": over the limit) and each distribution's license metadata.
CONTENTS_SCRIPT = r"""
import importlib.metadata as m, json, subprocess, sys
LIMIT = int(sys.argv[3])
def text(path, limit):
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    return data.decode("utf-8", "replace") if len(data) <= limit else ""
def debs():
    try:
        p = subprocess.run(["dpkg-query", "-W", "-f", sys.argv[1]], capture_output=True, text=True, errors="replace")
    except FileNotFoundError:
        return None
    if p.returncode != 0:
        sys.exit("dpkg-query: " + p.stderr[-500:])
    return [line.split("\t") for line in p.stdout.splitlines()]
def dists(part, path):
    out = []
    for d in (m.distributions(path=[path]) if path else m.distributions()):
        md = d.metadata
        classifiers = [c for c in (md.get_all("Classifier") or []) if c.startswith("License")]
        out.append([md["Name"] or "", d.version or "", part, md.get("License-Expression") or "",
                    md.get("License") or "", sorted(classifiers)])
    return out
rows = debs()
names = sorted({r[0] for r in rows or [] if r and "/" not in r[0] and r[0] not in ("", ".", "..")})
found = dists("", None)
for part, path in sorted(json.loads(sys.argv[2]).items()):
    found += dists(part, path)
print(json.dumps({
    "os": text("/etc/os-release", 65536) or text("/usr/lib/os-release", 65536),
    "debs": rows,
    "copyrights": {n: text(f"/usr/share/doc/{n}/copyright", LIMIT) for n in names},
    "dists": sorted(found),
}))
"""

_NAME = re.compile(r"[a-z0-9][a-z0-9+.-]*")  # Debian policy 5.6.1
_VERSION = re.compile(r"[0-9A-Za-z.+~:-]+")  # policy 5.6.12 ([epoch:]upstream[-revision])
_ARCH = re.compile(r"[a-z0-9-]+")
_STATUS = re.compile(r"[a-z-]+")
_OS_ID = re.compile(r"[a-z0-9._-]+")  # os-release(5)


@dataclass(frozen=True, kw_only=True, slots=True)
class DebPackage:
    name: str
    version: str
    arch: str
    status: str = "installed"
    layer: str = ""  # "base": as in the base image; "apt": added or changed by the apt layers; "": not split
    licenses: Licenses = field(default_factory=Licenses)


@dataclass(frozen=True, kw_only=True, slots=True)
class DistLicenses:
    name: str
    version: str
    part: str  # "" the venv; else the toolchain part whose prefix holds it ("cuda")
    licenses: Licenses


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageContents:
    """The image's OS, its Debian packages (``dpkg`` False: no dpkg-query in it) and its distributions'
    licenses; ``layers`` says why the packages are not split by layer, when they are not."""

    os_id: str = ""
    os_version: str = ""
    os_name: str = ""
    dpkg: bool = True
    packages: tuple[DebPackage, ...] = ()
    dists: tuple[DistLicenses, ...] = ()
    layers: str = ""


def deb_rows(what: str, rows: object) -> list[tuple[str, str, str, str]] | None:
    """dpkg-query's rows as the image gave them (None: no dpkg-query), each checked: (name, version, arch,
    status) of the forms dpkg allows. Packages whose files are gone (``GONE``) are left out."""
    if rows is None:
        return None
    if not isinstance(rows, list):
        raise ToolError(f"{what}: unexpected output (dpkg's listing is not a list)")
    out = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == 4 and all(isinstance(v, str) for v in row)):
            raise ToolError(f"{what}: unexpected output (a dpkg row is not four strings)")
        name, version, arch, status = row
        checks = ((_NAME, name), (_VERSION, version), (_ARCH, arch), (_STATUS, status))
        bad = next((value for pattern, value in checks if not pattern.fullmatch(value)), None)
        if bad is not None:
            raise ToolError(f"{what}: unexpected output (dpkg lists {_shown(bad)}, not of the form dpkg allows)")
        if status not in GONE:
            out.append((name, version, arch, status))
    return out


def _shown(value: str) -> str:
    """A value from the image, safe to print: its first refused character described, else its repr."""
    ch = dangerous_char(value)
    return f"a value with {describe_char(ch)}" if ch is not None else repr(value[:80])


def read_contents(
    image: str, *, base: str, platform: str = "", prefixes: Mapping[str, str] | None = None
) -> ImageContents:
    """Read ``image``'s contents (``CONTENTS_SCRIPT`` in its venv's Python), and split its Debian packages by
    the dpkg database of ``base`` when that image is in the local store."""
    what = f"reading the contents of {image}"
    argv = ["-c", CONTENTS_SCRIPT, DPKG_FORMAT, json.dumps(dict(prefixes or {})), str(COPYRIGHT_LIMIT)]
    proc = docker.run_in_image(image, argv, platform=platform, entrypoint=f"{layout.IMAGE_VENV}/bin/python")
    if proc.returncode != 0:
        raise ToolError(f"{what} failed: {_shown((proc.stderr or proc.stdout).strip()[-300:])}")
    found = json_object(proc.stdout, what, ToolError)
    rows = deb_rows(what, found.get("debs"))
    base_rows, layers = _base_rows(base, platform) if rows else (None, "")
    copyrights = _copyrights(what, found.get("copyrights"))
    packages = tuple(
        DebPackage(
            name=name, version=version, arch=arch, status=status,
            layer=("" if base_rows is None else "base" if (name, version, arch) in base_rows else "apt"),
            licenses=deb_licenses(name, copyrights.get(name)),
        )
        for name, version, arch, status in sorted(rows or [])
    )  # fmt: skip
    os_id, os_version, os_name = _os_release(what, found.get("os"))
    return ImageContents(
        os_id=os_id, os_version=os_version, os_name=os_name, dpkg=rows is not None, packages=packages,
        dists=_dists(what, found.get("dists")), layers=layers,
    )  # fmt: skip


def _base_rows(base: str, platform: str) -> tuple[set[tuple[str, str, str]] | None, str]:
    """(name, version, arch) of every package the base image's dpkg lists, or None and why it was not read."""
    if not base or not docker.image_exists(base):
        return None, f"not split by layer: the base image {base or '(unknown)'} is not in the local store"
    what = f"reading the dpkg database of the base image {base}"
    proc = docker.run_in_image(base, ["-W", "-f", DPKG_FORMAT], platform=platform, entrypoint="dpkg-query")
    if proc.returncode != 0:
        raise ToolError(f"{what} failed: {_shown((proc.stderr or proc.stdout).strip()[-300:])}")
    rows = deb_rows(what, [line.split("\t") for line in proc.stdout.splitlines()]) or []
    return {(name, version, arch) for name, version, arch, _ in rows}, ""


def _copyrights(what: str, value: object) -> dict[str, str | None]:
    if not isinstance(value, dict) or not all(isinstance(v, str | None) for v in value.values()):
        raise ToolError(f"{what}: unexpected output (copyrights)")
    return {str(k): v for k, v in value.items()}


def _dists(what: str, rows: object) -> tuple[DistLicenses, ...]:
    if not isinstance(rows, list):
        raise ToolError(f"{what}: unexpected output (dists)")
    out = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == 6 and isinstance(row[5], list)):
            raise ToolError(f"{what}: unexpected output (a distribution row)")
        name, version, part, expression, license_field, classifiers = row
        if not all(isinstance(v, str) for v in (name, version, part, expression, license_field, *classifiers)):
            raise ToolError(f"{what}: unexpected output (a distribution field is not a string)")
        ch = next((c for t in (name, version, part) if (c := dangerous_char(t)) is not None), None)
        if ch is not None:
            raise ToolError(f"{what}: control character {describe_char(ch)} in a distribution's name or version")
        licenses = python_licenses(expression, license_field, classifiers)
        out.append(DistLicenses(name=name, version=version, part=part, licenses=licenses))
    return tuple(out)


def _os_release(what: str, text: object) -> tuple[str, str, str]:
    """(ID, VERSION_ID or VERSION_CODENAME, PRETTY_NAME) of os-release(5); "" for each one absent or unfit."""
    if text is None:
        return "", "", ""
    if not isinstance(text, str):
        raise ToolError(f"{what}: unexpected output (os-release)")
    fields = dict(_assignments(text.splitlines()))
    os_id = fields.get("ID", "")
    version = fields.get("VERSION_ID") or fields.get("VERSION_CODENAME", "")
    return (
        os_id if _OS_ID.fullmatch(os_id) else "",
        version if _VERSION.fullmatch(version) or _OS_ID.fullmatch(version) else "",
        fields.get("PRETTY_NAME", "") if len(fields.get("PRETTY_NAME", "")) <= 200 else "",
    )


def _assignments(lines: Iterable[str]) -> Iterable[tuple[str, str]]:
    for line in lines:
        key, sep, value = line.strip().partition("=")
        if not sep or not key.isidentifier():
            continue
        try:
            words = shlex.split(value)
        except ValueError:
            continue
        if len(words) == 1 and dangerous_char(words[0]) is None:
            yield key, words[0]


def image_prefixes(cuda_pypi: bool, cuda_version: str) -> dict[str, str]:
    """{part: site directory} of distributions a target installs outside the venv (CUDA wheels from PyPI)."""
    return {"cuda": layout.image_cuda_prefix(cuda_version)} if cuda_pypi and cuda_version else {}


def dist_index(contents: ImageContents) -> dict[tuple[str, str, str], Licenses]:
    """(canonical name, version, part) -> licenses; and (canonical name, "", part) for a match by name."""
    from packaging.utils import canonicalize_name

    out: dict[tuple[str, str, str], Licenses] = {}
    for d in contents.dists:
        out[(canonicalize_name(d.name), d.version, d.part)] = d.licenses
        out.setdefault((canonicalize_name(d.name), "", d.part), d.licenses)
    return out
