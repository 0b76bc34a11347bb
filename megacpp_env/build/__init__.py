"""Plan and run the image build of one target and platform, and verify a built image.

A build is three steps, so that nothing outside the lock and the pinned sources enters an image:
  1. ``mirror-sources`` on this host: every pinned source of the target into the source mirror
     ``.megacpp/source-mirror`` inside the build context (idempotent; offline once complete);
  2. ``docker build --target deps``, with network: toolchain and the locked dependencies, tagged
     ``megacpp/<target>-deps:<hash>``;
  3. ``docker build --network none --build-arg DEPS_IMAGE=<that tag>``: one ``source-<name>`` stage per
     source (each bind-mounts only its own part of the mirror) and the final image. The build sees
     only ``lo``: a source step that tries to fetch fails. (Docker 20.10's built-in Dockerfile frontend
     has no ``RUN --network=none``; the whole second build runs without network instead.)

``plan`` makes the ``BuildPlan`` (the target resolved once) and the preflight, ``run`` runs it
(``run_build``: the ``build`` verb's one call), ``imagecheck`` checks a built image (``verify-image``).
The names below are this package's interface; code that patches one patches it in its module.
"""

from __future__ import annotations

from megacpp_env.build.imagecheck import SNAPSHOT_FAILED, VerifyReport, read_baked_snapshot, verify, verify_image
from megacpp_env.build.plan import (
    DEPS_ARG,
    DEPS_STAGE,
    SNAPSHOT_LABEL,
    SPEC_IN_CONTEXT,
    BuildOptions,
    BuildPlan,
    artifact_problems,
    build_labels,
    content_hash,
    context_files,
    context_inputs,
    deps_digest,
    docker_for,
    plan_build,
    preflight,
    refuse_if_stale,
    uses_spec_root,
)
from megacpp_env.build.run import (
    RECORDS_DIR,
    BuildResult,
    BuildRun,
    build_context,
    execute,
    record_paths,
    run_build,
    stage_context,
    write_record,
)
from megacpp_env.buildlog import BuildFailedError, hash_mismatch_package

__all__ = [
    "DEPS_ARG",
    "DEPS_STAGE",
    "RECORDS_DIR",
    "SNAPSHOT_FAILED",
    "SNAPSHOT_LABEL",
    "SPEC_IN_CONTEXT",
    "BuildFailedError",
    "BuildOptions",
    "BuildPlan",
    "BuildResult",
    "BuildRun",
    "VerifyReport",
    "artifact_problems",
    "build_context",
    "build_labels",
    "content_hash",
    "context_files",
    "context_inputs",
    "deps_digest",
    "docker_for",
    "execute",
    "hash_mismatch_package",
    "plan_build",
    "preflight",
    "read_baked_snapshot",
    "record_paths",
    "refuse_if_stale",
    "run_build",
    "stage_context",
    "uses_spec_root",
    "verify",
    "verify_image",
    "write_record",
]
