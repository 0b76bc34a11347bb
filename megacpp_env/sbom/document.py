"""A CycloneDX 1.6 SBOM of one target's image on one platform, made only from what the tool knows
exactly: every distribution of the committed locks (the venv's and the toolchain's) with the sha256
of each file it may install, every pinned source and every build-time fetch of one with its repository,
commit, purl and overlay digest, the pinned artifact sets, and the base image by digest.

Of a built image (``built_sbom`` with an image: what ``build`` bakes, ``sbom TARGET --image IMAGE``), also
what only the image knows (``sbom.contents``): its OS, every Debian package dpkg records (with its purl, the
licenses its copyright file declares and the layer it came from: the base image's or the apt layers'), and
the licenses each distribution declares.

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
from megacpp_env.errors import RefusedError, ToolError, one_line
from megacpp_env.fsutil import canonical_json, check_output_path, sha256_file, write_output
from megacpp_env.lock.pylock import LockedPackage, read_pylock
from megacpp_env.sbom.contents import DebPackage, ImageContents, dist_index, image_prefixes, read_contents
from megacpp_env.sbom.licenses import Licenses
from megacpp_env.sbom.purl import deb_purl, pypi_purl, source_purl
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
    ref = pypi_purl(pkg.name, pkg.version)
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


def _source(
    spec: Spec, src: Source, fetched_by: Iterable[tuple[str, str]] = (), *, ref: str = "source"
) -> dict[str, Any]:
    """A pinned source (``ref`` ``source``: one of the target's, installed; ``fetch``: only fetched by one);
    ``fetched_by``: (source, variable) of each source whose build fetches it (the spec's ``fetches``: the
    variable that points the build at this checkout)."""
    props = [_prop("commit", src.commit), _prop("install", src.install)]
    props += [_prop("fetched-by", f"{parent} ({variable})") for parent, variable in sorted(fetched_by)]
    if src.overlay:
        props += [
            _prop("overlay", src.overlay),
            _prop("overlay-sha256", overlay_digest(layout.overlay_dir(spec.root, src.overlay))),
        ]
    return {
        "type": "library",
        "bom-ref": f"{ref}:{src.name}",
        "name": src.name,
        "version": src.commit,
        "purl": source_purl(src.name, src.repo, src.commit),
        "externalReferences": [{"type": "vcs", "url": src.repo, "comment": f"pinned commit {src.commit}"}],
        "properties": props,
    }


def source_components(spec: Spec, target: Target) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The target's sources, then each build-time fetch of one (a pinned source of the spec's that the
    build points at through a variable, ``Source.fetches``), once each; and the dependency of each fetching
    source on what it fetches."""
    fetched: dict[str, list[tuple[str, str]]] = {}
    for src in target.sources:
        for variable, name in src.fetches.items():
            fetched.setdefault(name, []).append((src.name, variable))
    direct = {s.name for s in target.sources}
    comps = [_source(spec, s, fetched.get(s.name, ())) for s in target.sources]
    comps += [
        _source(spec, spec.sources[name], fetched[name], ref="fetch") for name in sorted(fetched) if name not in direct
    ]
    refs = {name: f"{'source' if name in direct else 'fetch'}:{name}" for name in fetched}
    deps = [
        {"ref": f"source:{s.name}", "dependsOn": sorted({refs[name] for name in s.fetches.values()})}
        for s in target.sources
        if s.fetches
    ]
    return comps, deps


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


def built_sbom(
    sbom: Mapping[str, Any],
    base_ref: str,
    *,
    image: str = "",
    platform: str = "",
    prefixes: Mapping[str, str] | None = None,
) -> str:
    """The text of ``sbom`` with the base image a build used: ``base_ref`` and the id of the image it names in
    the local store (none when a remote builder pulled it: the pinned digest, if any, stays); with ``image``
    (a built image in the local store), also what it holds (``with_contents``)."""
    try:
        image_id = docker.image_id(base_ref)
    except ToolError:
        image_id = ""
    doc = with_base(sbom, base_ref, image_id)
    if image:
        doc = with_contents(doc, read_contents(image, base=base_ref, platform=platform, prefixes=prefixes))
    return render_sbom(doc)


def with_contents(sbom: Mapping[str, Any], contents: ImageContents) -> dict[str, Any]:
    """``sbom`` with what the image holds: the licenses each listed distribution declares (or why they are
    unknown), the OS (an ``operating-system`` component: its presence says the OS packages were read), and
    each Debian package, which the OS and, when it came with the base image, the base image depend on."""
    body = {k: v for k, v in sbom.items() if k not in ("$schema", "serialNumber")}
    index = dist_index(contents)
    debs = [_deb(p, contents.os_id) for p in contents.packages]
    os_props = [_prop("package-manager", "dpkg" if contents.dpkg else "none (no dpkg-query in the image)")]
    os_props += [_prop("pretty-name", contents.os_name)] if contents.os_name else []
    os_props += [_prop("layers", contents.layers)] if contents.layers else []
    os_comp = {"type": "operating-system", "bom-ref": "os", "name": contents.os_id or "unknown", "properties": os_props}
    if contents.os_version:
        os_comp["version"] = contents.os_version
    known = [c for c in body["components"] if not _of_os(c)]  # an SBOM completed before: completed again
    body["components"] = [*(_licensed(c, index) for c in known), os_comp, *debs]
    deb_refs = [d["bom-ref"] for d in debs]
    base_refs = [d["bom-ref"] for d, p in zip(debs, contents.packages, strict=True) if p.layer == "base"]
    deps = [d for d in body["dependencies"] if d["ref"] not in ("image", "os", "base-image")]
    body["dependencies"] = [
        {"ref": "image", "dependsOn": [c["bom-ref"] for c in body["components"]]},
        *deps,
        {"ref": "os", "dependsOn": deb_refs},
        *([{"ref": "base-image", "dependsOn": base_refs}] if base_refs else []),
    ]
    return _sealed(body)


def _licensed(comp: Mapping[str, Any], index: Mapping[tuple[str, str, str], Licenses]) -> dict[str, Any]:
    """A distribution's component with the licenses it declares in the image: a locked one matched by name,
    version and lock part; a source, the tool and pip by name. Other components are returned as they are."""
    ref = str(comp.get("bom-ref", ""))
    if ref.startswith("pkg:pypi/"):
        part = ref.partition("?lock=")[2]
        key = (canonicalize_name(str(comp["name"])), str(comp["version"]), part)
    elif ref.startswith(("source:", "tool:", "venv:")):
        key = (canonicalize_name(str(comp["name"])), "", "")
    else:
        return dict(comp)
    found = index.get(key)
    out = {k: v for k, v in comp.items() if k != "licenses"}
    props = [p for p in comp.get("properties", []) if p.get("name") != f"{PROP}:license"]
    if found is None and _prop("install", "path") in comp.get("properties", []):
        found = Licenses(unknown="a checkout on sys.path (install: path): no distribution metadata declares it")
    elif found is None:
        found = Licenses(unknown="not found among the distributions installed in the image")
    if found.unknown:
        props.append(_prop("license", f"unknown: {found.unknown}"))
    else:
        out["licenses"] = found.cyclonedx()
    return {**out, "properties": props} if props or "properties" in comp else out


def _of_os(comp: Mapping[str, Any]) -> bool:
    """The OS component or a Debian package (what ``with_contents`` adds)."""
    return comp.get("type") == "operating-system" or str(comp.get("purl", "")).startswith("pkg:deb/")


def _deb(pkg: DebPackage, vendor: str) -> dict[str, Any]:
    ref = deb_purl(vendor, pkg.name, pkg.version, pkg.arch)
    props = [_prop("layer", pkg.layer)] if pkg.layer else []
    props += [_prop("dpkg-status", pkg.status)] if pkg.status != "installed" else []
    props += [_prop("license", f"unknown: {pkg.licenses.unknown}")] if pkg.licenses.unknown else []
    out: dict[str, Any] = {"type": "library", "bom-ref": ref, "name": pkg.name, "version": pkg.version, "purl": ref}
    if not pkg.licenses.unknown:
        out["licenses"] = pkg.licenses.cyclonedx()
    if props:
        out["properties"] = props
    return out


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
    sources, fetch_deps = source_components(spec, target)
    components += sources
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
        "dependencies": [{"ref": "image", "dependsOn": [c["bom-ref"] for c in components]}, *fetch_deps],
    }
    return _sealed(body)


def render_sbom(sbom: dict[str, Any]) -> str:
    return json.dumps(sbom, indent=2, sort_keys=True) + "\n"


TARGET_LABEL = f"{layout.LABEL_PREFIX}.target"  # the target an image was built for
BASE_LABEL = "org.opencontainers.image.base.name"  # the base image it was built FROM


def target_sbom(spec: Spec, name: str, platform: str | None, output: Path | None, image: str = "") -> str:
    """``sbom TARGET``: the target's SBOM for ``platform`` (default: its first), rendered; with ``image``
    (built for that target), the SBOM ``build`` bakes into it, from what the image holds; written atomically
    to ``output`` when given (then the text returned is empty)."""
    target = spec.target(name)
    chosen = platform or target.platforms[0]
    if chosen not in target.platforms:
        raise RefusedError(f"--platform {chosen}: {target.name} builds {', '.join(target.platforms)}")
    doc = image_sbom(spec, target, chosen)
    text = render_sbom(doc) if not image else _of_image(doc, target, chosen, image)
    if output is None:
        return text
    write_output(check_output_path(output, example="sbom.cdx.json"), text.encode())
    return ""


def _of_image(doc: Mapping[str, Any], target: Target, platform: str, image: str) -> str:
    """``doc`` completed from ``image``, which its labels must say was built for ``target``."""
    labels = docker.image_labels(image)
    built_for = labels.get(TARGET_LABEL, "")
    if built_for != target.name:
        said = one_line(built_for) if built_for else f"no {TARGET_LABEL} label"
        raise RefusedError(
            f"--image {image}: not an image of {target.name} ({said}): build it with: megacpp-env build {target.name}"
        )
    base = labels.get(BASE_LABEL) or str(target.base_images[platform])
    return built_sbom(doc, base, image=image, platform=platform, prefixes=target_prefixes(target))


def target_prefixes(target: Target) -> dict[str, str]:
    """{lock part: site directory} of what ``target`` installs outside its venv (``contents.image_prefixes``)."""
    return image_prefixes(bool(target.toolchain.cuda_pypi), target.toolchain.cuda)


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
