"""Run a planned build (``run_build`` is the ``build`` verb's one call). Never prints; reports via
callbacks.

``execute`` runs the plan's three steps, streams the BuildKit logs, reports a failed step with the
last lines of its log (and the package, when pip's hash check failed), then reads the snapshot baked
into the image and adds its digest as a label in a metadata-only step, and pushes when asked.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megacpp_env import buildcache, docker, layout, pinning, publish
from megacpp_env.build.imagecheck import read_baked_snapshot
from megacpp_env.build.plan import (
    SNAPSHOT_LABEL,
    BuildOptions,
    BuildPlan,
    docker_for,
    plan_build,
    preflight,
    refuse_if_stale,
)
from megacpp_env.buildlog import failure as _failure
from megacpp_env.errors import ToolError
from megacpp_env.fsutil import atomic_write_text, owned_tempdir, sha256_bytes
from megacpp_env.pipmirror import mirror_links, serve_mirror
from megacpp_env.sbom import BASE_LABEL, IMAGE_SBOM, SBOM_LABEL, built_sbom, target_prefixes
from megacpp_env.spec.model import Spec
from megacpp_env.srcbuild.mirror import mirror_sources


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildResult:
    plan: BuildPlan
    image_id: str
    snapshot_digest: str
    seconds: float
    executed: tuple[str, ...] = ()
    cached: int = 0
    label_seconds: float = 0.0
    build_image_id: str = ""  # the image `docker build` made, before the metadata-only label step
    pushed: publish.Pushed | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.plan.to_dict(),
            "image_id": self.image_id,
            "build_image_id": self.build_image_id,
            "snapshot_digest": self.snapshot_digest,
            "seconds": round(self.seconds, 2),
            "label_seconds": round(self.label_seconds, 2),
            "executed_steps": list(self.executed),
            "cached_steps": self.cached,
            "pushed": self.pushed.to_dict() if self.pushed else None,
        }


def execute(plan: BuildPlan, *, on_line: Callable[[str], None] | None = None) -> BuildResult:
    """Step 1 (source mirror), step 2 (deps, networked), step 3 (sources and image, no network); both
    docker builds run in the same context, assembled from the plan's inputs after step 1."""
    start = time.monotonic()
    mirror_sources(plan.source_mirror, plan.mirror_requests, rewrites=dict(plan.source_rewrites), progress=on_line)
    with owned_tempdir("megacpp-build-") as tmp, build_context(plan) as context:
        serving = serve_mirror(mirror_links(plan.mirror), plan.mirror_port) if plan.mirror else contextlib.nullcontext()
        with serving:
            rc, deps_log = _stream_in(context, docker.build_argv(plan.deps_request, docker=docker.binary()), on_line)
        if rc != 0:
            raise _failure(deps_log, rc)
        iid = Path(tmp) / "iid"
        argv = docker.build_argv(_with_iidfile(plan.request, str(iid)), docker=docker.binary())
        rc, log = _stream_in(context, argv, on_line)
        if rc != 0:
            raise _failure(log, rc)
        image_id = build_id = iid.read_text().strip() if iid.is_file() else ""
    seconds = time.monotonic() - start
    if plan.cache_ref:  # before the label step, whose new image config has no inline cache
        docker.tag_image(plan.tag, plan.cache_ref)
        buildcache.tag_deps(plan.deps_tag, plan.cache_ref)
    sbom = _built_sbom(plan)
    digest, label_s = _label_snapshot(plan, sbom, on_line) if not plan.request.needs_buildx else ("", 0.0)
    if not plan.request.needs_buildx:
        image_id = docker.image_id(plan.tag)
    pushed = None
    if plan.request.push and not plan.request.needs_buildx:
        pushed = buildcache.push(plan.tag, plan.cache_ref, on_line=on_line)
    result = BuildResult(
        plan=plan,
        image_id=image_id,
        build_image_id=build_id,
        snapshot_digest=digest,
        seconds=seconds,
        executed=(*deps_log.executed(), *log.executed()),
        cached=sum(len(lg.cached & set(lg.instruction_steps)) for lg in (deps_log, log)),
        label_seconds=label_s,
        pushed=pushed,
    )
    write_record(result, sbom)
    return result


RECORDS_DIR = ".megacpp/builds"  # <target>.<platform slug>.json (the build's --json) and .sbom.cdx.json beside it


def record_paths(root: Path, target: str, platform: str) -> tuple[Path, Path]:
    stem = f"{target}.{layout.platform_slug(platform)}"
    return Path(root, RECORDS_DIR, f"{stem}.json"), Path(root, RECORDS_DIR, f"{stem}.sbom.cdx.json")


def write_record(result: BuildResult, sbom: str) -> None:
    """The build's record and, beside it, the SBOM baked into the image (each written atomically)."""
    record, sbom_path = record_paths(result.plan.root, result.plan.target.name, result.plan.platform)
    record.parent.mkdir(parents=True, exist_ok=True)
    if sbom:
        atomic_write_text(sbom_path, sbom)
    doc = {**result.to_dict(), "sbom": sbom_path.name if sbom else "", "sbom_sha256": sha256_bytes(sbom.encode())}
    atomic_write_text(record, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _built_sbom(plan: BuildPlan) -> str:
    """The plan's SBOM with the base image this build used (its FROM reference and local image id) and, when
    the image is in the local store (not a remote builder's), what it holds: its OS and Debian packages, and
    the licenses of all (``sbom.with_contents``)."""
    if not plan.sbom:
        return ""
    base = dict(plan.request.labels)[BASE_LABEL]
    local = "" if plan.request.needs_buildx else plan.tag
    return built_sbom(plan.sbom, base, image=local, platform=plan.platform, prefixes=target_prefixes(plan.target))


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildRun:
    """What ``build`` did: the plan, then the result of running it, or (dry run) what a real build
    would refuse."""

    plan: BuildPlan
    result: BuildResult | None = None
    would_refuse: tuple[str, ...] = ()


LogView = Callable[[BuildPlan], AbstractContextManager[Callable[[str], None] | None]]


def run_build(
    spec: Spec, opts: BuildOptions, *, dry_run: bool = False, check_base: bool = True, log_view: LogView | None = None
) -> BuildRun:
    """``build``: the plan (the target looked up once, there); a dry run reports what a real build
    would refuse. Otherwise refuse stale inputs and (``check_base``, no base override) a moved base
    image, then run the plan with the BuildKit log going where ``log_view(plan)`` says."""
    plan = plan_build(spec, opts, docker_bin=docker_for(dry_run=dry_run))
    if dry_run:
        return BuildRun(plan=plan, would_refuse=tuple(preflight(spec, plan.target, plan.platform)))
    refuse_if_stale(spec, plan.target, plan.platform)
    if check_base and not opts.base_image:
        pinning.refuse_if_base_moved(spec, plan.target, plan.platform)
    with log_view(plan) if log_view else contextlib.nullcontext() as on_line:
        return BuildRun(plan=plan, result=execute(plan, on_line=on_line))


@contextlib.contextmanager
def build_context(plan: BuildPlan) -> Iterator[Path]:
    """The directory ``docker build`` runs in: exactly the plan's inputs (``plan.staged``,
    ``build.plan.context_inputs``), staged into a temporary directory."""
    with owned_tempdir("megacpp-context-") as tmp:
        yield stage_context(plan.staged, tmp)


def _link_or_copy(source: str, dest: str) -> None:
    """Hard-link a mirror file into the staged context (git objects never change in place), else copy it."""
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)


def stage_context(inputs: Iterable[tuple[str, Path]], dest: Path) -> Path:
    """Put ``inputs`` (relpath, file or directory) under ``dest``: a file copied (symlinks resolved), a
    directory (a mirror) copied with its files hard-linked. A missing one is left out: the preflight
    refuses a build that needs it (an unmirrored artifact set, a stale lock), and Docker names it."""
    for rel, source in inputs:
        target = dest / rel
        if source.is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(source, target, copy_function=_link_or_copy, dirs_exist_ok=True)
        elif source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    return dest


def _with_iidfile(req: docker.BuildRequest, path: str) -> docker.BuildRequest:
    from dataclasses import replace

    return replace(req, iidfile=path) if not req.needs_buildx or not req.push else req


def _stream_in(root: Path, argv: list[str], on_line: Callable[[str], None] | None) -> tuple[int, docker.BuildLog]:
    return docker.stream(argv, on_line=on_line, cwd=str(root))


def _label_snapshot(plan: BuildPlan, sbom: str, on_line: Callable[[str], None] | None) -> tuple[str, float]:
    """The last small build: the snapshot's digest as a label, and the SBOM baked at ``IMAGE_SBOM`` with its
    sha256 as a label (the file comes from a one-file build context: this frontend has no heredoc COPY)."""
    start = time.monotonic()
    digest = str(read_baked_snapshot(plan.tag, plan.platform).get("digest", ""))
    if not digest:
        raise ToolError(f"{plan.tag}: the baked snapshot has no digest")
    labels, dockerfile = {SNAPSHOT_LABEL: digest}, f"FROM {plan.tag}\n"
    with owned_tempdir("megacpp-label-") as context:
        if sbom:
            (context / "sbom.cdx.json").write_text(sbom, encoding="utf-8")
            labels[SBOM_LABEL] = sha256_bytes(sbom.encode())
            dockerfile += f"COPY sbom.cdx.json {IMAGE_SBOM}\n"
        argv = docker.stdin_build_argv(plan.tag, plan.platform, labels, docker=docker.binary(), context=str(context))
        rc, log = docker.stream(argv, on_line=on_line, stdin=dockerfile)
    if rc != 0:
        raise _failure(log, rc)
    return digest, time.monotonic() - start
