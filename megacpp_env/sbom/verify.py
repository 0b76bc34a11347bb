"""The image against its SBOM (``verify-image``): every installed distribution listed at its version, one
installed from an archive with a sha256 the SBOM lists, a listed one's files as its RECORD says, and every
Debian package dpkg records in the image listed at its version and architecture (one added, removed or
changed is a finding). The SBOM (baked, or ``--sbom FILE``) and what the image answers are untrusted:
each is validated before use. Never prints.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from megacpp_env import docker, layout
from megacpp_env.chars import dangerous_char, describe_char
from megacpp_env.errors import FormatError, RefusedError, ToolError
from megacpp_env.fsutil import read_regular_text
from megacpp_env.records import Table, json_object
from megacpp_env.sbom.contents import DPKG_FORMAT, deb_rows
from megacpp_env.sbom.document import unlisted
from megacpp_env.sbom.purl import parse_deb_purl

IMAGE_SBOM = "/usr/share/megacpp-env/sbom.cdx.json"  # where build bakes the SBOM into the image
SBOM_LABEL = f"{layout.LABEL_PREFIX}.sbom-sha256"  # the sha256 of that file
BUILT_LABEL = f"{layout.LABEL_PREFIX}.content-sha256"  # every image build makes carries it
BAD_FILES_SHOWN = 3

# Runs in the image's venv: every distribution with its version, the sha256 of the archive it was installed
# from (PEP 610 direct_url.json, when installed from a file or URL), and the files that disagree with its
# RECORD; the baked SBOM's text (argv[1], or null when it is absent); and dpkg's listing of the Debian
# packages (dpkg-query with the format argv[2]; null when the image has no dpkg-query).
IMAGE_SCRIPT = r"""
import base64, hashlib, importlib.metadata as m, json, os, subprocess, sys
def b64(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()
def archive(d):
    try:
        info = json.loads(d.read_text("direct_url.json") or "{}").get("archive_info") or {}
    except ValueError:
        return ""
    return (info.get("hashes") or {}).get("sha256") or str(info.get("hash", "")).removeprefix("sha256=")
def bad(d):
    out = []
    for f in d.files or []:
        if f.hash is None or f.hash.mode != "sha256":
            continue
        path = str(d.locate_file(f))
        if not os.path.isfile(path) or b64(path) != f.hash.value:
            out.append(str(f))
    return sorted(out)
dists = [[d.metadata["Name"], d.version, archive(d), bad(d)] for d in m.distributions()]
sbom = open(sys.argv[1], encoding="utf-8").read() if os.path.isfile(sys.argv[1]) else None
try:
    p = subprocess.run(["dpkg-query", "-W", "-f", sys.argv[2]], capture_output=True, text=True, errors="replace")
    debs = [line.split("\t") for line in p.stdout.splitlines()] if p.returncode == 0 else "failed"
except FileNotFoundError:
    debs = None
print(json.dumps({"dists": sorted(dists), "sbom": sbom, "debs": debs}))
"""


Dist = tuple[str, str, str, list[str]]  # name, version, archive sha256, files that disagree with RECORD


@dataclass(frozen=True, kw_only=True, slots=True)
class SbomCheck:
    """What ``check_image`` found: the SBOM it used (baked or a file) and each disagreement, named."""

    image: str
    source: str  # the baked path, or the --sbom FILE
    checked: int  # installed distributions compared
    os_checked: int = 0  # Debian packages compared
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "source": self.source, "checked": self.checked, "os_checked": self.os_checked,
            "problems": list(self.problems),
        }  # fmt: skip

    def summary(self) -> str:
        if self.ok:
            return (
                f"sbom: the {self.checked} distributions in {self.image} match the SBOM {self.source}, "
                f"and so do its {self.os_checked} Debian packages\n"
            )
        return "".join(f"verify-image: {self.image}: {p}\n" for p in self.problems)


def check_image(image: str, *, platform: str = "", sbom_file: Path | None = None) -> SbomCheck:
    """Compare ``image`` with its SBOM: the one baked at ``IMAGE_SBOM`` (its sha256 must match the
    ``SBOM_LABEL``), or ``sbom_file``. Every installed distribution must be listed with its version;
    one installed from an archive must have a sha256 the SBOM lists for it; a listed distribution's
    files must agree with its RECORD. Every Debian package dpkg records must be listed at its version and
    architecture, and every one listed must be installed (``os_problems``)."""
    given = _parse(_read_file(sbom_file), str(sbom_file)) if sbom_file is not None else None
    dists, baked, debs = _inspect(image, platform)
    source, problems = str(sbom_file), list[str]()
    if given is None:
        source, (given, problems) = IMAGE_SBOM, _baked(image, baked, docker.image_labels(image))
    sbom = given
    installed = [(name, version) for name, version, _, _ in dists]
    problems += [f"{line} is installed but not in the SBOM {source}" for line in unlisted(sbom, installed)]
    problems += _disagreements(sbom, dists, source)
    problems += os_problems(sbom, debs, source)
    return SbomCheck(
        image=image, source=source, checked=len(dists), os_checked=len(debs or ()), problems=tuple(problems)
    )


Deb = tuple[str, str, str, str]  # name, version, architecture, dpkg status


def os_problems(sbom: Mapping[str, Any], debs: list[Deb] | None, source: str) -> list[str]:
    """The image's Debian packages (``debs``; None: it has no dpkg-query) against the SBOM's: one installed
    but not listed, listed but not installed, or installed at another version than listed, each named. An
    SBOM made without the image (no ``operating-system`` component) lists none: one problem, unless the
    image has no dpkg either."""
    listed = sbom_debs(sbom, source)
    if listed is None:
        if not debs:
            return []
        return [
            f"the SBOM {source} lists no OS packages (it was made without the image): the image's {len(debs)} "
            "Debian packages are unchecked (make one that lists them: megacpp-env sbom TARGET --image IMAGE "
            "--output FILE)"
        ]
    installed = {(name, arch): version for name, version, arch, _ in debs or ()}
    out = []
    for name, arch in sorted(installed.keys() | listed.keys()):
        have, want = installed.get((name, arch)), listed.get((name, arch))
        if want is None:
            out.append(f"Debian package {name} {have} ({arch}) is installed but not in the SBOM {source}")
        elif have is None:
            out.append(f"Debian package {name} {want} ({arch}) is in the SBOM {source} but not installed")
        elif have != want:
            out.append(f"Debian package {name} ({arch}) is {have} in the image, {want} in the SBOM {source}")
    return out


def sbom_debs(sbom: Mapping[str, Any], source: str) -> dict[tuple[str, str], str] | None:
    """(name, architecture) -> version of every Debian package the SBOM lists (by purl), or None when it has
    no ``operating-system`` component (its OS packages were not read). A ``pkg:deb/`` purl that is not of the
    form ``purl.deb_purl`` writes is a FormatError naming it."""
    comps = sbom.get("components", [])
    if not any(c.get("type") == "operating-system" for c in comps):
        return None
    out: dict[tuple[str, str], str] = {}
    for i, comp in enumerate(comps):
        text = str(comp.get("purl", ""))
        if not text.startswith("pkg:deb/"):
            continue
        parsed = parse_deb_purl(text)
        if parsed is None or not all(parsed[1:]) or any(dangerous_char(v) is not None for v in parsed):
            raise FormatError(
                f"{source}: components[{i}].purl: not a Debian package URL (pkg:deb/VENDOR/NAME@VERSION?arch=ARCH)"
            )
        out[(parsed[1], parsed[3])] = parsed[2]
    return out


def _baked(image: str, text: object, labels: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The baked SBOM, and a problem when its sha256 is not the one its label records."""
    if not isinstance(text, str):
        raise RefusedError(_missing(image, labels))
    digest, label = hashlib.sha256(text.encode()).hexdigest(), labels.get(SBOM_LABEL, "")
    if digest == label:
        return _parse(text, f"{image}:{IMAGE_SBOM}"), []
    return _parse(text, f"{image}:{IMAGE_SBOM}"), [
        f"the baked SBOM {IMAGE_SBOM} has sha256 {digest}, its label {SBOM_LABEL} says {label or '(none)'}"
    ]


def _missing(image: str, labels: Mapping[str, str]) -> str:
    made = "built by megacpp-env" if BUILT_LABEL in labels else f"not built by megacpp-env (no {BUILT_LABEL} label)"
    return (
        f"{image}: no SBOM baked at {IMAGE_SBOM} ({made}): rebuild it with `megacpp-env build TARGET`, or check it "
        f"against a file: verify-image {image} --sbom FILE (make it with: megacpp-env sbom TARGET --output FILE)"
    )


def _read_file(path: Path) -> str:
    if not path.is_file():
        raise RefusedError(f"--sbom {path}: no such file (make it with: megacpp-env sbom TARGET --output FILE)")
    return read_regular_text(path)


_HEX_HASH = re.compile(r"[0-9a-fA-F]{32}|[0-9a-fA-F]{40}|[0-9a-fA-F]{64}|[0-9a-fA-F]{96}|[0-9a-fA-F]{128}")


def _parse(text: str, where: str) -> dict[str, Any]:
    """An SBOM from outside (an image, a ``--sbom`` file), validated before any of it is used: JSON (a
    document nested too deeply is refused, not a crash), ``bomFormat`` CycloneDX, and every field
    ``check_image`` reads in the type and form the CycloneDX 1.6 schema gives it (``validate_sbom``).
    Fields it does not read are not judged. A ``FormatError`` names the file and the key path."""
    doc = json_object(text, where, FormatError)
    if doc.get("bomFormat") != "CycloneDX" or not isinstance(doc.get("components"), list):
        raise FormatError(f"{where}: not a CycloneDX SBOM (bomFormat, components)")
    validate_sbom(doc, where)
    return doc


def validate_sbom(doc: Mapping[str, Any], where: str) -> None:
    """The fields of ``doc`` that ``check_image`` reads, checked as the CycloneDX 1.6 schema has them
    (a bounded walk of those fields only; tests/test_sbom_hostile.py compares its verdicts with the
    schema's, run by cyclonedx-python-lib): ``specVersion`` a string; each component a table with a
    string ``type`` and ``name``, and, where present (null is not absent), a string ``version``,
    ``purl`` and ``bom-ref``; ``externalReferences`` tables with a string ``type`` and ``url``;
    ``hashes`` tables with a string ``alg`` and a hex ``content``. Every string read is free of control
    and invisible characters (``records.Table``: it may be printed)."""
    top = Table.root(doc, where)
    top.text("specVersion")
    for comp in top.tables("components"):
        comp.text("type")
        comp.text("name")
        for key in ("version", "purl", "bom-ref"):
            if key in comp.data:
                comp.text(key)
        _hashes(comp)
        for ref in _present_tables(comp, "externalReferences"):
            ref.text("type")
            ref.text("url")
            _hashes(ref)


def _present_tables(table: Table, key: str) -> list[Table]:
    """The tables of the optional array ``key`` (none when absent; null is not absent)."""
    if key in table.data and table.data[key] is None:
        table.fail("expected an array of tables, got null", key)
    return table.tables(key)


def _hashes(table: Table) -> None:
    for entry in _present_tables(table, "hashes"):
        entry.text("alg")
        if not _HEX_HASH.fullmatch(entry.text("content")):
            entry.fail("expected a hex digest of 32, 40, 64, 96 or 128 digits", "content")


def _inspect(image: str, platform: str) -> tuple[list[Dist], object, list[Deb] | None]:
    """The image's distributions, its baked SBOM's text (``None`` when absent) and its Debian packages
    (``None``: no dpkg-query in it)."""
    argv = [f"{layout.IMAGE_VENV}/bin/python", "-c", IMAGE_SCRIPT, IMAGE_SBOM, DPKG_FORMAT]
    proc = docker.run_in_image(image, argv, platform=platform)
    what = f"listing the distributions in {image}"
    if proc.returncode != 0:
        raise ToolError(f"{what} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")
    try:
        found = json.loads(proc.stdout)
    except ValueError as exc:
        raise ToolError(f"{what}: unreadable output ({exc})") from None
    except RecursionError:
        raise ToolError(f"{what}: unreadable output (nested too deeply)") from None
    if not isinstance(found, dict) or not isinstance(found.get("dists"), list):
        raise ToolError(f"{what}: unexpected output")
    if isinstance(found.get("debs"), str):
        raise ToolError(f"listing the Debian packages in {image} failed")
    return (
        _dists(image, found["dists"]),
        found.get("sbom"),
        deb_rows(f"listing the Debian packages in {image}", found.get("debs")),
    )


def _dists(image: str, rows: list[Any]) -> list[Dist]:
    """The image's answer, checked as untrusted input: each row four fields, strings (and a list of
    strings), none holding a character that breaks a line or hides text (they are printed)."""
    what, out = f"listing the distributions in {image}", list[Dist]()
    for row in rows:
        if not (isinstance(row, list) and len(row) == 4 and isinstance(row[3], list)):
            raise ToolError(f"{what}: unexpected output")
        name, version, archive, bad = row
        texts = [name, version, archive, *bad]
        if not all(isinstance(t, str) for t in texts):
            raise ToolError(f"{what}: unexpected output (a field is not a string)")
        ch = next((c for t in texts if (c := dangerous_char(t)) is not None), None)
        if ch is not None:
            raise ToolError(f"{what}: control character {describe_char(ch)} in its output")
        out.append((name, version, archive, list(bad)))
    return out


def _disagreements(sbom: Mapping[str, Any], dists: Iterable[Dist], source: str) -> list[str]:
    hashes: dict[tuple[str, str], set[str]] = {}
    for c in sbom.get("components", []):
        if str(c.get("purl", "")).startswith("pkg:pypi/"):
            key = (canonicalize_name(str(c.get("name", ""))), str(c.get("version", "")))
            refs = c.get("externalReferences", [])
            hashes.setdefault(key, set()).update(
                h["content"] for r in refs for h in r.get("hashes", []) if h["alg"] == "SHA-256"
            )
    out = []
    for name, version, archive, bad in dists:
        listed = hashes.get((canonicalize_name(name), version))
        if listed and archive and archive not in listed:
            out.append(
                f"{name} {version} was installed from an archive with sha256 {archive}, not one the SBOM {source} lists"
            )
        if listed is not None and bad:
            more = f" and {len(bad) - BAD_FILES_SHOWN} more" if len(bad) > BAD_FILES_SHOWN else ""
            out.append(f"{name} {version}: {', '.join(bad[:BAD_FILES_SHOWN])}{more} differ from its RECORD")
    return out
