"""The CycloneDX 1.6 SBOM of a target's image (``document``: from the spec and the locks; of a built image, also
what it holds, read by ``contents`` with licenses from ``licenses`` and purls from ``purl``) and the image
checked against it (``verify``: ``verify-image``). Never prints."""

from __future__ import annotations

from megacpp_env.sbom.document import (
    BASE_LABEL,
    PROP,
    SCHEMA,
    SPEC_VERSION,
    TARGET_LABEL,
    base_component,
    built_sbom,
    image_sbom,
    installed_names,
    overlay_digest,
    render_sbom,
    source_components,
    target_prefixes,
    target_sbom,
    unlisted,
    with_base,
    with_contents,
)
from megacpp_env.sbom.verify import (
    BAD_FILES_SHOWN,
    BUILT_LABEL,
    IMAGE_SBOM,
    IMAGE_SCRIPT,
    SBOM_LABEL,
    SbomCheck,
    check_image,
    os_problems,
    sbom_debs,
    validate_sbom,
)

__all__ = [
    "BAD_FILES_SHOWN",
    "BASE_LABEL",
    "BUILT_LABEL",
    "IMAGE_SBOM",
    "IMAGE_SCRIPT",
    "PROP",
    "SBOM_LABEL",
    "SCHEMA",
    "SPEC_VERSION",
    "TARGET_LABEL",
    "SbomCheck",
    "base_component",
    "built_sbom",
    "check_image",
    "image_sbom",
    "installed_names",
    "os_problems",
    "overlay_digest",
    "render_sbom",
    "sbom_debs",
    "source_components",
    "target_prefixes",
    "target_sbom",
    "unlisted",
    "validate_sbom",
    "with_base",
    "with_contents",
]
