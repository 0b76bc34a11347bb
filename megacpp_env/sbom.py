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
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from megacpp_env import __version__, docker, layout
from megacpp_env.errors import RefusedError, ToolError
from megacpp_env.fsutil import canonical_json, sha256_file
from megacpp_env.lock.pylock import LockedPackage, read_pylock
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
    out: dict[str, Any] = {
        "type": "container",
        "bom-ref": "base-image",
        "name": image.name,
        "version": image.digest or image.tag,
        "properties": [_prop("ref", str(image))],
    }
    if image.digest:
        out["hashes"] = [{"alg": "SHA-256", "content": image.digest.removeprefix("sha256:")}]
    return out


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
            f"only what is locked (run: megacpp-env lock {target.name})"
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
    serial = uuid.UUID(bytes=hashlib.sha256(canonical_json(body).encode()).digest()[:16], version=5)
    return {"$schema": SCHEMA, "serialNumber": serial.urn, **body}


def render_sbom(sbom: dict[str, Any]) -> str:
    return json.dumps(sbom, indent=2, sort_keys=True) + "\n"


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


INSTALLED_SCRIPT = (
    "import importlib.metadata as m, json; "
    "print(json.dumps(sorted({(d.metadata['Name'], d.version) for d in m.distributions()})))"
)


def image_distributions(image: str, *, platform: str = "") -> list[tuple[str, str]]:
    """(name, version) of every distribution installed in the image's venv."""
    proc = docker.run_in_image(image, [f"{layout.IMAGE_VENV}/bin/python", "-c", INSTALLED_SCRIPT], platform=platform)
    if proc.returncode != 0:
        raise ToolError(f"listing the distributions in {image} failed: {(proc.stderr or proc.stdout).strip()[-500:]}")
    try:
        return [(str(n), str(v)) for n, v in json.loads(proc.stdout)]
    except (ValueError, TypeError) as exc:
        raise ToolError(f"listing the distributions in {image}: unreadable output ({exc})") from None


def installed_names(sbom: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(name, version) of every locked distribution the SBOM lists (what an image may contain)."""
    return {
        (c["name"], c["version"]) for c in sbom.get("components", []) if str(c.get("purl", "")).startswith("pkg:pypi/")
    }
