"""A CycloneDX 1.6 SBOM of one target's image on one platform, made only from what the tool knows
exactly: every distribution of the committed locks (the venv's and the toolchain's) with the sha256
of each file it may install, every pinned source with its repository, commit and overlay digest,
the pinned artifact sets, and the base image by digest.

Deterministic: no timestamp; the serial number is derived from the content, so the same inputs give
the same bytes. Never prints (``commands/sbom.py`` does).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from megacpp_env import __version__, docker, layout
from megacpp_env.chars import dangerous_char, describe_char
from megacpp_env.errors import FormatError, RefusedError, ToolError
from megacpp_env.fsutil import canonical_json, check_output_path, read_regular_text, sha256_file, write_output
from megacpp_env.lock.pylock import LockedPackage, read_pylock
from megacpp_env.records import Table
from megacpp_env.spec import Spec, Target
from megacpp_env.spec.model import ArtifactSet, Source

SPEC_VERSION = "1.6"
SCHEMA = "http://cyclonedx.org/schema/bom-1.6.schema.json"
PROP = "megacpp-env"  # property names: megacpp-env:<key>


def _prop(key: str, value: str) -> dict[str, str]:
    return {"name": f"{PROP}:{key}", "value": value}


def overlay_digest(directory: Path) -> str:
    """sha256 of an overlay directory: every file's path (relative, sorted) and sha256."""
    files = sorted(p for p in directory.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    listing = {p.relative_to(directory).as_posix(): sha256_file(p) for p in files}
    return hashlib.sha256(canonical_json(listing).encode()).hexdigest()


def _package(pkg: LockedPackage, lock: str, part: str) -> dict[str, Any]:
    ref = f"pkg:pypi/{pkg.name}@{pkg.version}"
    out: dict[str, Any] = {
        "type": "library",
        "bom-ref": f"{ref}?lock={part}" if part else ref,
        "name": pkg.name,
        "version": pkg.version,
        "purl": ref,
        "externalReferences": [
            {"type": "distribution", "url": a.url, "hashes": [{"alg": "SHA-256", "content": a.sha256}]}
            for a in pkg.artifacts
            if a.sha256
        ],
        "properties": [_prop("lock", lock), *([_prop("marker", pkg.marker)] if pkg.marker else [])],
    }
    if pkg.index:
        out["properties"].append(_prop("index", pkg.index))
    return out


def _source(spec: Spec, src: Source) -> dict[str, Any]:
    props = [_prop("commit", src.commit), _prop("install", src.install)]
    if src.overlay:
        props += [
            _prop("overlay", src.overlay),
            _prop("overlay-sha256", overlay_digest(layout.overlay_dir(spec.root, src.overlay))),
        ]
    return {
        "type": "library",
        "bom-ref": f"source:{src.name}",
        "name": src.name,
        "version": src.commit,
        "externalReferences": [{"type": "vcs", "url": src.repo, "comment": f"pinned commit {src.commit}"}],
        "properties": props,
    }


def _artifact_set(art: ArtifactSet) -> dict[str, Any]:
    return {
        "type": "data",
        "bom-ref": f"artifacts:{art.name}",
        "name": art.name,
        "externalReferences": [{"type": "distribution", "url": art.url}],
        "properties": [_prop("env", art.env)]
        + [_prop(f"checksums-sha256:{d}", sha) for d, sha in sorted(art.dirs.items())],
    }


def _base(target: Target, platform: str) -> dict[str, Any]:
    image = target.base_images[platform]
    return base_component(str(image), image.digest)


def base_component(ref: str, digest: str, image_id: str = "") -> dict[str, Any]:
    """The base image: ``ref`` as the Dockerfile names it, by manifest ``digest`` when it is pinned, else
    by the local ``image_id`` (``docker image inspect``) the build really used, when known."""
    name, tag = ref.partition("@")[0], ""
    if ":" in name.rsplit("/", 1)[-1]:
        name, tag = name.rsplit(":", 1)
    version = digest or image_id
    out: dict[str, Any] = {
        "type": "container",
        "bom-ref": "base-image",
        "name": name,
        "version": version or tag or "latest",
        "properties": [_prop("ref", ref), *([_prop("image-id", image_id)] if image_id else [])],
    }
    if version.startswith("sha256:"):
        out["hashes"] = [{"alg": "SHA-256", "content": version.removeprefix("sha256:")}]
    return out


def with_base(sbom: Mapping[str, Any], ref: str, image_id: str) -> dict[str, Any]:
    """``sbom`` with the base image the build used: ``ref`` (its FROM) and the image id it resolved to."""
    digest = ref.partition("@")[2]
    base = base_component(ref, digest, image_id)
    body = {k: v for k, v in sbom.items() if k not in ("$schema", "serialNumber")}
    body["components"] = [base if c.get("bom-ref") == "base-image" else c for c in body["components"]]
    return _sealed(body)


def built_sbom(sbom: Mapping[str, Any], base_ref: str) -> str:
    """The text of ``sbom`` with the base image a build used: ``base_ref`` and the id of the image it names in
    the local store (none when a remote builder pulled it: the pinned digest, if any, stays)."""
    try:
        image_id = docker.image_id(base_ref)
    except ToolError:
        image_id = ""
    return render_sbom(with_base(sbom, base_ref, image_id))


def _sealed(body: dict[str, Any]) -> dict[str, Any]:
    """The document with its schema and a serial number derived from its content."""
    serial = uuid.UUID(bytes=hashlib.sha256(canonical_json(body).encode()).digest()[:16], version=5)
    return {"$schema": SCHEMA, "serialNumber": serial.urn, **body}


def _installers() -> list[dict[str, Any]]:
    """What the image's venv holds besides the locks and the sources: the tool itself (from its own
    source, --no-deps) and the venv's pip (ensurepip of the toolchain's Python, version not pinned)."""
    return [
        {"type": "application", "bom-ref": "tool:megacpp-env", "name": "megacpp-env", "version": __version__,
         "properties": [_prop("origin", "the tool's own source, installed --no-deps")]},
        {"type": "library", "bom-ref": "venv:pip", "name": "pip",
         "properties": [_prop("origin", "ensurepip of the toolchain's Python (python -m venv)")]},
    ]  # fmt: skip


def _locks(spec: Spec, target: Target, platform: str) -> list[tuple[Path, str]]:
    paths = [(layout.lock_path(spec.root, target.name, platform), "")]
    paths += [(layout.toolchain_lock_path(spec.root, target.name, p, platform), p) for p in layout.TOOLCHAIN_PARTS]
    return [(path, part) for path, part in paths if path.is_file()]


def image_sbom(spec: Spec, target: Target, platform: str) -> dict[str, Any]:
    """The SBOM (a JSON-able dict) of ``target``'s image for ``platform``."""
    venv_lock = layout.lock_path(spec.root, target.name, platform)
    if not venv_lock.is_file():
        raise RefusedError(
            f"{target.name} {platform}: no lock ({venv_lock.relative_to(spec.root).as_posix()}): an SBOM lists "
            f"only what is locked (run: megacpp-env lock resolve {target.name})"
        )
    components: list[dict[str, Any]] = []
    for path, part in _locks(spec, target, platform):
        lock = read_pylock(path)
        rel = path.relative_to(spec.root).as_posix()
        components += [_package(p, rel, part) for p in sorted(lock.packages, key=lambda p: p.name)]
    components += [_source(spec, s) for s in target.sources]
    components += [_artifact_set(spec.artifacts[name]) for name in target.artifacts]
    components.append(_base(target, platform))
    components += _installers()
    image = {
        "type": "container",
        "bom-ref": "image",
        "name": f"{spec.project}/{target.name}",
        "properties": [_prop("target", target.name), _prop("platform", platform), _prop("spec-sha256", spec.digest())],
    }
    body: dict[str, Any] = {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "version": 1,
        "metadata": {
            "tools": {"components": [{"type": "application", "name": "megacpp-env", "version": __version__}]},
            "component": image,
        },
        "components": components,
        "dependencies": [{"ref": "image", "dependsOn": [c["bom-ref"] for c in components]}],
    }
    return _sealed(body)


def render_sbom(sbom: dict[str, Any]) -> str:
    return json.dumps(sbom, indent=2, sort_keys=True) + "\n"


def target_sbom(spec: Spec, name: str, platform: str | None, output: Path | None) -> str:
    """``sbom TARGET``: the target's SBOM for ``platform`` (default: its first), rendered; written
    atomically to ``output`` when given (then the text returned is empty)."""
    target = spec.target(name)
    chosen = platform or target.platforms[0]
    if chosen not in target.platforms:
        raise RefusedError(f"--platform {chosen}: {target.name} builds {', '.join(target.platforms)}")
    text = render_sbom(image_sbom(spec, target, chosen))
    if output is None:
        return text
    write_output(check_output_path(output, example="sbom.cdx.json"), text.encode())
    return ""


def unlisted(sbom: Mapping[str, Any], installed: Iterable[tuple[str, str]]) -> list[str]:
    """``name version`` of every installed distribution the SBOM does not list: a locked one must match
    name and version; a pinned source, the tool and the venv's pip match by name (their versions come
    from their own build)."""
    exact = {(canonicalize_name(n), v) for n, v in installed_names(sbom)}
    by_name = {
        canonicalize_name(str(c["name"]))
        for c in sbom.get("components", [])
        if str(c.get("bom-ref", "")).startswith(("source:", "tool:", "venv:"))
    }
    return sorted(
        f"{name} {version}"
        for name, version in installed
        if (canonicalize_name(name), version) not in exact and canonicalize_name(name) not in by_name
    )


def installed_names(sbom: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(name, version) of every locked distribution the SBOM lists (what an image may contain)."""
    return {
        (c["name"], c["version"]) for c in sbom.get("components", []) if str(c.get("purl", "")).startswith("pkg:pypi/")
    }


# ---- the image against its SBOM (verify-image) -------------------------------------------------------

IMAGE_SBOM = "/usr/share/megacpp-env/sbom.cdx.json"  # where build bakes the SBOM into the image
SBOM_LABEL = f"{layout.LABEL_PREFIX}.sbom-sha256"  # the sha256 of that file
BUILT_LABEL = f"{layout.LABEL_PREFIX}.content-sha256"  # every image build makes carries it
BAD_FILES_SHOWN = 3

# Runs in the image's venv: every distribution with its version, the sha256 of the archive it was installed
# from (PEP 610 direct_url.json, when installed from a file or URL), and the files that disagree with its
# RECORD; and the baked SBOM's text (argv[1], or null when it is absent).
IMAGE_SCRIPT = r"""
import base64, hashlib, importlib.metadata as m, json, os, sys
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
print(json.dumps({"dists": sorted(dists), "sbom": sbom}))
"""


Dist = tuple[str, str, str, list[str]]  # name, version, archive sha256, files that disagree with RECORD


@dataclass(frozen=True, kw_only=True, slots=True)
class SbomCheck:
    """What ``check_image`` found: the SBOM it used (baked or a file) and each disagreement, named."""

    image: str
    source: str  # the baked path, or the --sbom FILE
    checked: int  # installed distributions compared
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "source": self.source, "checked": self.checked, "problems": list(self.problems)}

    def summary(self) -> str:
        if self.ok:
            return f"sbom: the {self.checked} distributions in {self.image} match the SBOM {self.source}\n"
        return "".join(f"verify-image: {self.image}: {p}\n" for p in self.problems)


def check_image(image: str, *, platform: str = "", sbom_file: Path | None = None) -> SbomCheck:
    """Compare ``image`` with its SBOM: the one baked at ``IMAGE_SBOM`` (its sha256 must match the
    ``SBOM_LABEL``), or ``sbom_file``. Every installed distribution must be listed with its version;
    one installed from an archive must have a sha256 the SBOM lists for it; a listed distribution's
    files must agree with its RECORD."""
    given = _parse(_read_file(sbom_file), str(sbom_file)) if sbom_file is not None else None
    dists, baked = _inspect(image, platform)
    source, problems = str(sbom_file), list[str]()
    if given is None:
        source, (given, problems) = IMAGE_SBOM, _baked(image, baked, docker.image_labels(image))
    sbom = given
    installed = [(name, version) for name, version, _, _ in dists]
    problems += [f"{line} is installed but not in the SBOM {source}" for line in unlisted(sbom, installed)]
    problems += _disagreements(sbom, dists, source)
    return SbomCheck(image=image, source=source, checked=len(dists), problems=tuple(problems))


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
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise FormatError(f"{where}: not JSON ({exc})") from None
    except RecursionError:
        raise FormatError(f"{where}: not a CycloneDX SBOM: JSON nested too deeply") from None
    if not isinstance(doc, dict) or doc.get("bomFormat") != "CycloneDX" or not isinstance(doc.get("components"), list):
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


def _inspect(image: str, platform: str) -> tuple[list[Dist], object]:
    """The image's distributions and its baked SBOM's text (``None`` when absent)."""
    argv = [f"{layout.IMAGE_VENV}/bin/python", "-c", IMAGE_SCRIPT, IMAGE_SBOM]
    proc = docker.run_in_image(image, argv, platform=platform)
    if proc.returncode != 0:
        raise ToolError(f"listing the distributions in {image} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")
    try:
        found = json.loads(proc.stdout)
    except ValueError as exc:
        raise ToolError(f"listing the distributions in {image}: unreadable output ({exc})") from None
    except RecursionError:
        raise ToolError(f"listing the distributions in {image}: unreadable output (nested too deeply)") from None
    if not isinstance(found, dict) or not isinstance(found.get("dists"), list):
        raise ToolError(f"listing the distributions in {image}: unexpected output")
    return _dists(image, found["dists"]), found.get("sbom")


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
