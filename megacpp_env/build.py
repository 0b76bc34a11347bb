"""Plan and run the image build of one target and platform. Never prints; reports via callbacks.

A build is three steps, so that nothing outside the lock and the pinned sources enters an image:
  1. ``mirror-sources`` on this host: every pinned source of the target into the source mirror
     ``.megacpp/source-mirror`` inside the build context (idempotent; offline once complete);
  2. ``docker build --target deps``, with network: toolchain and the locked dependencies, tagged
     ``megacpp/<target>-deps:<hash>``;
  3. ``docker build --network none --build-arg DEPS_IMAGE=<that tag>``: one ``source-<name>`` stage per
     source (each bind-mounts only its own part of the mirror) and the final image. The build sees
     only ``lo``: a source step that tries to fetch fails. (Docker 20.10's built-in Dockerfile frontend
     has no ``RUN --network=none``; the whole second build runs without network instead.)

* ``plan_build`` turns the spec and the options into exact command lines (``--dry-run`` prints them).
* ``preflight`` refuses stale inputs: the rendered Dockerfile and source plans (``render --check``)
  and the lock (``lock --check``) of that target and platform.
* ``execute`` runs the three steps, streams the BuildKit logs, reports a failed step with the last
  lines of its log (and the package, when pip's hash check failed), then reads the snapshot baked
  into the image and adds its digest as a label in a metadata-only step.

The default tag is ``megacpp/<target>:<content hash>`` (under ``--registry HOST[:PORT]/`` when given;
``--push`` then pushes it, see ``publish``); the hash covers the rendered Dockerfile and source
plans, the lock files of the platform, stack.yaml (source pins), the overlays the image copies, the
tool's own source, the platform and any base-image override: the same inputs give the same tag.

The build context is the spec's repository when that repository is megacpp-env's own source.
Otherwise (a project that only has stack.yaml, images/, locks/, overlays/; megacpp-env installed
with pip, uv tool or pipx) the same files are staged into a temporary directory together with the
running tool's source (``toolsrc``), so the content hash, and the tag, are the same either way.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megacpp_env import buildcache, docker, layout, publish, render, sourceplans, toolsrc
from megacpp_env.buildlog import BuildFailedError, hash_mismatch_package  # noqa: F401 (re-exported)
from megacpp_env.buildlog import failure as _failure
from megacpp_env.errors import RefusedError, StaleError, ToolError, ToolNotFoundError
from megacpp_env.fsutil import atomic_write_text, canonical_hash, owned_tempdir, sha256_bytes
from megacpp_env.layout import platform_arch
from megacpp_env.pipmirror import free_port, mirror_links, serve_mirror
from megacpp_env.rules.facts import refuse_unpinned_fetches
from megacpp_env.sbom import IMAGE_SBOM, SBOM_LABEL, built_sbom, check_image, image_sbom
from megacpp_env.spec.model import Spec, Target
from megacpp_env.srcbuild.mirror import MirrorRequest, insteadof_config, mirror_sources, parse_rewrite

SPEC_IN_CONTEXT = "stack.yaml"  # the name the Dockerfile COPYs the spec by
SNAPSHOT_LABEL = f"{layout.LABEL_PREFIX}.snapshot-digest"
DEPS_STAGE = "deps"
DEPS_ARG = "DEPS_IMAGE"


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildOptions:
    target: str
    platform: str = ""
    base_image: str = ""
    tag: str = ""
    registry: str = ""  # HOST[:PORT]: the default tag goes under it (where --push sends it)
    push: bool = False
    builder: str = ""
    cache_from: tuple[str, ...] = ()
    cache_to: tuple[str, ...] = ()
    network: str = ""
    ca_bundle: str = ""
    mirror: str = ""
    no_cache: bool = False
    source_from: tuple[str, ...] = ()  # URL=PATH: mirror the source pinned at URL from PATH
    source_mirror: str = ""  # an existing source mirror to fill the build's mirror from


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildPlan:
    """The three steps of a build: the source mirror, the networked deps build, the sealed build."""

    target: str
    platform: str
    tag: str
    content_hash: str
    root: Path
    deps_tag: str
    deps_request: docker.BuildRequest
    deps_argv: tuple[str, ...]
    request: docker.BuildRequest
    argv: tuple[str, ...]
    mirror_requests: tuple[MirrorRequest, ...] = ()
    source_rewrites: tuple[tuple[str, str], ...] = ()
    mirror: str = ""
    mirror_port: int = 0
    cache_ref: str = ""  # classic --push: the build's own image (with its inline cache) is pushed here too
    notes: tuple[str, ...] = ()
    staged: tuple[tuple[str, Path], ...] = ()  # the context's files when it is staged (not the spec root)
    sbom: dict[str, Any] = field(default_factory=dict, repr=False)  # sbom.image_sbom; execute sets the base's id

    @property
    def source_mirror(self) -> Path:
        return layout.source_mirror_dir(self.root)

    def mirror_argv(self) -> list[str]:
        """``mirror-sources`` as a command line (what step 1 does, for ``--dry-run``)."""
        argv = ["megacpp-env", "mirror-sources", self.target, "--to", layout.SOURCE_MIRROR]
        for key, url in self.source_rewrites:
            base = key.removeprefix("url.").removesuffix(".insteadOf")
            path = urllib.parse.unquote(urllib.parse.urlsplit(base).path) if base.startswith("file://") else base
            argv += ["--from", f"{url}={path}"]
        return argv

    def script(self) -> list[str]:
        """The three steps as shell lines with comments (what ``build --dry-run`` prints)."""
        return [
            f"# cd {shlex.quote(str(self.root))}",
            "# 1. every pinned source into the source mirror inside the build context (this host, network)",
            shlex.join(self.mirror_argv()),
            "# 2. toolchain and locked dependencies (network)",
            shlex.join(self.deps_argv),
            "# 3. one stage per source and the image, from step 2's image, with no network",
            shlex.join(self.argv),
            *(f"# {note}" for note in self.notes),
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "platform": self.platform,
            "tag": self.tag,
            "content_hash": self.content_hash,
            "cwd": "(a staged temporary directory)" if self.staged else str(self.root),
            "context": "staged" if self.staged else "spec root",
            "source_mirror": layout.SOURCE_MIRROR,
            "mirror_argv": self.mirror_argv(),
            "deps_tag": self.deps_tag,
            "deps_argv": list(self.deps_argv),
            "argv": list(self.argv),
            "buildx": self.request.needs_buildx,
            "cache_ref": self.cache_ref,
            "notes": list(self.notes),
        }


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


# ---- planning ----------------------------------------------------------------------------------


def resolve_platform(target: Target, platform: str) -> str:
    if not platform:
        return target.platforms[0]
    if platform not in target.platforms:
        raise RefusedError(
            f"target {target.name} is not built for {platform} (platforms: {', '.join(target.platforms)})"
        )
    return platform


def _toolchain_lock_paths(root: Path, target: Target, platform: str) -> list[Path]:
    """The toolchain lock (CUDA from PyPI) and its export, when the target has one."""
    if not target.toolchain.cuda_pypi:
        return []
    return [
        layout.toolchain_lock_path(root, target.name, "cuda", platform),
        layout.toolchain_export_path(root, target.name, "cuda", platform),
    ]


def _files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]  # a missing file stays listed: the hash records it as missing
    return [f for f in sorted(path.rglob("*")) if f.is_file() and not toolsrc.is_cached(f.relative_to(path))]


def _spec_paths(spec: Spec, target: Target, platform: str) -> list[Path]:
    root = spec.root
    paths = [
        layout.dockerfile_path(root, target.name),
        layout.resolutions_path(root, target.name),
        layout.lock_path(root, target.name, platform),
        layout.requirements_export_path(root, target.name, platform),
        *_toolchain_lock_paths(root, target, platform),
    ]
    paths += [sourceplans.plan_path(root, target.name, s.name) for s in target.sources]
    paths += [layout.overlay_dir(root, s.overlay) for s in target.sources if s.overlay]
    if target.runtime_patches:
        paths.append(layout.overlay_dir(root, "runtime"))
    return paths


def uses_spec_root(spec: Spec) -> bool:
    """True when the spec's repository is megacpp-env's own source (and the spec is its stack.yaml):
    then that repository is the build context, as it is. Otherwise the context is staged."""
    return spec.path.name == SPEC_IN_CONTEXT and toolsrc.is_tool_source(spec.root)


def context_files(spec: Spec, target: Target, platform: str) -> dict[str, Path]:
    """Build-context relpath -> file, for everything the target's Dockerfile reads on ``platform``:
    the spec's files and megacpp-env's own source (the spec's repository when it is that source,
    else the source of the megacpp-env that runs: see ``toolsrc``)."""
    root = spec.root
    out = {f.relative_to(root).as_posix(): f for path in _spec_paths(spec, target, platform) for f in _files(path)}
    out[SPEC_IN_CONTEXT] = spec.path.resolve()
    if uses_spec_root(spec):
        tool = [root / name for name in toolsrc.PROJECT_FILES] + [root / "megacpp_env"]
        out.update({f.relative_to(root).as_posix(): f for path in tool for f in _files(path)})
    else:
        out.update(toolsrc.tool_files())
    return dict(sorted(out.items()))


def content_hash(spec: Spec, target: Target, platform: str, base_image: str = "") -> str:
    files = context_files(spec, target, platform)
    return canonical_hash(
        {
            "platform": platform,
            "base_image": base_image,
            "pins": [{"name": s.name, "repo": s.repo, "commit": s.commit} for s in target.sources],
            "files": [
                {"path": rel, "sha256": sha256_bytes(f.read_bytes()) if f.is_file() else "missing"}
                for rel, f in files.items()
            ],
        }
    )


def _lock_sha(spec: Spec, target: Target, platform: str) -> str:
    path = layout.lock_path(spec.root, target.name, platform)
    return sha256_bytes(path.read_bytes()) if path.is_file() else "missing"


def build_labels(spec: Spec, target: Target, platform: str, digest: str, base: str) -> tuple[tuple[str, str], ...]:
    p = layout.LABEL_PREFIX
    return (
        ("org.opencontainers.image.version", digest[:16]),
        ("org.opencontainers.image.base.name", base),
        (f"{p}.platform", platform),
        (f"{p}.spec-sha256", spec.digest()),
        (f"{p}.lock-sha256", _lock_sha(spec, target, platform)),
        (f"{p}.content-sha256", digest),
    )


def _check_paths(opts: BuildOptions) -> None:
    if opts.ca_bundle and not Path(opts.ca_bundle).is_file():
        raise RefusedError(f"--ca-bundle {opts.ca_bundle}: no such file")
    if opts.mirror and not Path(opts.mirror).is_dir():
        raise RefusedError(f"--mirror {opts.mirror}: not a directory")


def docker_for(*, dry_run: bool) -> str:
    """The docker CLI a plan names: the real one; a dry run also works where there is none."""
    try:
        return docker.binary()
    except ToolNotFoundError:
        if not dry_run:
            raise
        return "docker"


def deps_digest(spec: Spec, target: Target, platform: str, base_image: str = "") -> str:
    """What the networked first build depends on: the Dockerfile, the lock files, platform and base."""
    root = spec.root
    paths = [
        layout.dockerfile_path(root, target.name),
        layout.lock_path(root, target.name, platform),
        layout.requirements_export_path(root, target.name, platform),
        *_toolchain_lock_paths(root, target, platform),
    ]
    files = [
        {"path": f.relative_to(root).as_posix(), "sha256": sha256_bytes(f.read_bytes()) if f.is_file() else "missing"}
        for path in paths
        for f in _files(path)
    ]
    return canonical_hash({"platform": platform, "base_image": base_image, "files": files})


def _source_rewrites(spec: Spec, target: Target, opts: BuildOptions) -> tuple[tuple[str, str], ...]:
    pairs = dict(parse_rewrite(text) for text in opts.source_from)
    if opts.source_mirror:
        for src in target.sources:
            cfg = insteadof_config(Path(opts.source_mirror), src.name)
            pairs.update((k, v) for k, v in cfg.items() if k.startswith("url."))
    return tuple(sorted(pairs.items()))


def plan_build(spec: Spec, opts: BuildOptions, *, docker_bin: str = "docker") -> BuildPlan:
    _check_paths(opts)
    target = spec.target(opts.target)
    refuse_unpinned_fetches(spec, target.name)  # before any Docker call, --dry-run included
    platform = resolve_platform(target, opts.platform)
    digest = content_hash(spec, target, platform, opts.base_image)
    staged = () if uses_spec_root(spec) else tuple(context_files(spec, target, platform).items())
    tag = opts.tag or publish.image_tag(opts.registry, target.name, digest)
    if opts.push:
        publish.check_push_target(tag, opts.registry, bool(opts.tag))
    # A remote builder (buildx) pulls the deps image in step 3, so it is pushed beside the image; a local
    # daemon needs only a local tag.
    remote = opts.push and bool(opts.builder or opts.cache_to)
    deps_hash = deps_digest(spec, target, platform, opts.base_image)
    deps_tag = publish.image_tag(opts.registry if remote else "", f"{target.name}-deps", deps_hash)
    notes: list[str] = []
    port = free_port() if opts.mirror else 0
    if opts.mirror:
        notes.append(f"serves {opts.mirror} on 127.0.0.1:{port} for the deps build (pip --no-index --find-links)")
    deps = _deps_request(spec, target, platform, opts, deps_tag, port)
    final = _final_request(spec, target, platform, opts, digest, tag, deps_tag)
    cache = publish.cache_ref(tag, platform) if opts.push and not final.needs_buildx else ""
    deps, final = buildcache.importing(deps, final, cache)  # both cache images, as pushed before
    if staged:
        notes.append(
            f"{spec.root} is not megacpp-env's source: the build context is staged in a temporary directory "
            f"from the spec's files, its source mirror and the megacpp-env source of {toolsrc.origin()}"
        )
    notes += _notes(final, opts, docker_bin, cache) + buildcache.notes(deps_tag, cache, docker_bin)
    return BuildPlan(
        target=target.name,
        platform=platform,
        tag=tag,
        content_hash=digest,
        root=spec.root,
        deps_tag=deps_tag,
        deps_request=deps,
        deps_argv=tuple(docker.build_argv(deps, docker=docker_bin)),
        request=final,
        argv=tuple(docker.build_argv(final, docker=docker_bin)),
        mirror_requests=tuple(sourceplans.mirror_requests(spec, target)),
        source_rewrites=_source_rewrites(spec, target, opts),
        mirror=opts.mirror,
        mirror_port=port,
        cache_ref=cache,
        notes=tuple(notes),
        staged=staged,
        sbom=image_sbom(spec, target, platform) if layout.lock_path(spec.root, target.name, platform).is_file() else {},
    )


def _dockerfile(spec: Spec, target: Target) -> str:
    return layout.dockerfile_path(spec.root, target.name).relative_to(spec.root).as_posix()


def _deps_request(
    spec: Spec, target: Target, platform: str, opts: BuildOptions, deps_tag: str, port: int
) -> docker.BuildRequest:
    """Step 2: toolchain and locked dependencies, with network (the CA bundle as a secret)."""
    build_args: list[tuple[str, str]] = []
    if opts.base_image:
        build_args.append((f"BASE_IMAGE_{platform_arch(platform).upper()}", opts.base_image))
    if port:
        build_args.append(("PIP_MIRROR_URL", f"http://127.0.0.1:{port}/"))
    return docker.BuildRequest(
        dockerfile=_dockerfile(spec, target),
        context=".",
        tag=deps_tag,
        platform=platform,
        stage=DEPS_STAGE,
        build_args=tuple(build_args),
        secrets=(("ca_bundle", str(Path(opts.ca_bundle).resolve())),) if opts.ca_bundle else (),
        network=opts.network or ("host" if port else ""),
        cache_from=opts.cache_from,
        cache_to=opts.cache_to,
        builder=opts.builder,
        push=opts.push and bool(opts.builder or opts.cache_to),  # a remote builder must pull it in step 3
        no_cache=opts.no_cache,
    )


def _final_request(
    spec: Spec, target: Target, platform: str, opts: BuildOptions, digest: str, tag: str, deps_tag: str
) -> docker.BuildRequest:
    """Step 3: the source stages and the image, from the deps image, with no network at all."""
    base = opts.base_image or str(target.base_image(platform))
    return docker.BuildRequest(
        dockerfile=_dockerfile(spec, target),
        context=".",
        tag=tag,
        platform=platform,
        build_args=((DEPS_ARG, deps_tag),),
        labels=build_labels(spec, target, platform, digest, base),
        network="none",
        cache_from=opts.cache_from,
        cache_to=opts.cache_to,
        builder=opts.builder,
        push=opts.push,
        no_cache=opts.no_cache,
    )


def _notes(request: docker.BuildRequest, opts: BuildOptions, docker_bin: str, cache: str) -> list[str]:
    notes = []
    if request.needs_buildx:
        notes.append("--builder/--cache-to need `docker buildx build` (the classic `docker build` lacks them)")
    if cache:
        notes.append(f"then: {docker_bin} tag {request.tag} {cache} (the build's image, with its inline cache)")
        notes.append(f"then: {docker_bin} push {cache}; {docker_bin} push {request.tag} (after the snapshot label)")
    return notes


# ---- preflight -----------------------------------------------------------------------------------


def preflight(spec: Spec, target: str, platform: str) -> list[str]:
    """Reasons not to build: a stale rendered Dockerfile or a lock that is not ``ok``."""
    problems = [
        f"{s.relpath} is stale (run `megacpp-env render {target}` and commit it)" for s in render.check(spec, [target])
    ]
    return problems + _lock_problems(spec, target, platform) + artifact_problems(spec, target)


def artifact_problems(spec: Spec, target: str) -> list[str]:
    """Each artifact set of ``target`` that is not mirrored, verified, at ``.megacpp/artifacts/<name>``
    (the source stages that read it and the image bind or copy it from there; the build has no network)."""
    from megacpp_env.artifacts import verify_artifacts

    out = []
    for name in spec.target(target).artifacts:
        directory = layout.artifact_mirror_dir(spec.root, name)
        rel = directory.relative_to(spec.root).as_posix()
        found = verify_artifacts(spec.artifacts[name], directory)
        if found:
            more = f" and {len(found) - 1} more" if len(found) > 1 else ""
            out.append(
                f"artifact set {name} ({spec.artifacts[name].env}) is not mirrored at {rel}: {found[0]}{more} "
                f"(run `megacpp-env mirror-artifacts {name} --to {rel}`, or copy a verified mirror there)"
            )
    return out


def _lock_problems(spec: Spec, target: str, platform: str) -> list[str]:
    try:
        from megacpp_env.lock.state import check_job, jobs_for
    except ImportError:  # the lock package is optional at import time; fall back to presence
        return [
            f"{p.relative_to(spec.root)} does not exist (run `megacpp-env lock {target}`)"
            for p in (
                layout.lock_path(spec.root, target, platform),
                layout.requirements_export_path(spec.root, target, platform),
            )
            if not p.is_file()
        ]
    return [
        check_job(job, spec.root).line()
        for job in jobs_for(spec, [target], [platform])
        if not check_job(job, spec.root).ok
    ]


def refuse_if_stale(spec: Spec, target: str, platform: str) -> None:
    problems = preflight(spec, target, platform)
    if problems:
        raise StaleError("refusing to build: " + "; ".join(problems))


# ---- execution -----------------------------------------------------------------------------------


def execute(plan: BuildPlan, *, on_line: Callable[[str], None] | None = None) -> BuildResult:
    """Step 1 (source mirror), step 2 (deps, networked), step 3 (sources and image, no network); both
    docker builds run in the same context (the spec root, or one staged copy with the mirror in it)."""
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
    record, sbom_path = record_paths(result.plan.root, result.plan.target, result.plan.platform)
    record.parent.mkdir(parents=True, exist_ok=True)
    if sbom:
        atomic_write_text(sbom_path, sbom)
    doc = {**result.to_dict(), "sbom": sbom_path.name if sbom else "", "sbom_sha256": sha256_bytes(sbom.encode())}
    atomic_write_text(record, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _built_sbom(plan: BuildPlan) -> str:
    """The plan's SBOM with the base image this build used (its FROM reference and local image id)."""
    base = dict(plan.request.labels)["org.opencontainers.image.base.name"]
    return built_sbom(plan.sbom, base) if plan.sbom else ""


@contextlib.contextmanager
def build_context(plan: BuildPlan) -> Iterator[Path]:
    """The directory ``docker build`` runs in: the spec root, or a staged copy of the plan's files."""
    if not plan.staged:
        yield plan.root
        return
    with owned_tempdir("megacpp-context-") as tmp:
        context = stage_context(plan.staged, tmp)
        if plan.source_mirror.is_dir():  # the source stages bind-mount it from the context
            shutil.copytree(plan.source_mirror, context / layout.SOURCE_MIRROR, copy_function=_link_or_copy)
        artifacts = plan.root / layout.ARTIFACT_MIRROR
        if artifacts.is_dir():  # verified by preflight; bound into stages and copied into the image
            shutil.copytree(artifacts, context / layout.ARTIFACT_MIRROR, copy_function=_link_or_copy)
        yield context


def _link_or_copy(source: str, dest: str) -> None:
    """Hard-link a mirror file into the staged context (git objects never change in place), else copy it."""
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)


def stage_context(files: Iterable[tuple[str, Path]], dest: Path) -> Path:
    """Copy ``files`` (relpath, source) under ``dest`` (symlinks resolved); missing sources are skipped
    (the preflight has refused a build that needs them)."""
    for rel, source in files:
        if source.is_file():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    return dest


def _with_iidfile(req: docker.BuildRequest, path: str) -> docker.BuildRequest:
    from dataclasses import replace

    return replace(req, iidfile=path) if not req.needs_buildx or not req.push else req


def _stream_in(root: Path, argv: list[str], on_line: Callable[[str], None] | None) -> tuple[int, docker.BuildLog]:
    return docker.stream(argv, on_line=on_line, cwd=str(root))


def read_baked_snapshot(image: str, platform: str = "") -> dict[str, Any]:
    proc = docker.run_in_image(image, ["cat", layout.IMAGE_SNAPSHOT], platform=platform, entrypoint="")
    if proc.returncode != 0:
        raise ToolError(f"{image}: cannot read {layout.IMAGE_SNAPSHOT}: {proc.stderr.strip()[-300:]}")
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


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


# ---- verify-image --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyReport:
    ok: bool
    output: str
    stderr: str = ""


SNAPSHOT_FAILED = 86  # the exit status verify-image's in-image script gives a failed snapshot (diff uses 0-3)


def verify_image(image: str, *, platform: str = "", as_json: bool = False) -> VerifyReport:
    """Take a snapshot inside ``image`` and diff it against the one baked at build time (in the image,
    with the image's own megacpp-env, so both sides come from the same tool version).

    A snapshot that fails is a ``ToolError``; only a diff that finds differences is drift."""
    diff = "megacpp-env diff --json" if as_json else "megacpp-env diff"
    script = (
        'live="$(mktemp)"; err="$(mktemp)"; '
        'if ! megacpp-env snapshot -o "$live" >/dev/null 2>"$err"; then '
        f'tail -n 20 "$err" >&2; exit {SNAPSHOT_FAILED}; fi; '
        f'exec {diff} {layout.IMAGE_SNAPSHOT} "$live"'
    )
    proc = docker.run_in_image(image, ["bash", "-c", script], platform=platform)
    if proc.returncode == SNAPSHOT_FAILED:
        raise ToolError(f"snapshot inside the image failed: {_last_lines(proc.stderr)}")
    if proc.returncode not in (0, 1):
        raise ToolError(f"verify-image {image}: exit {proc.returncode}: {(proc.stderr or proc.stdout).strip()[-500:]}")
    return VerifyReport(ok=proc.returncode == 0, output=proc.stdout, stderr=proc.stderr)


def verify(image: str, *, platform: str = "", as_json: bool = False, sbom_file: str = "") -> VerifyReport:
    """``verify-image``: the snapshot diff, then the image against its SBOM (the baked one, or ``sbom_file``);
    with ``as_json``, the diff's document with the SBOM check under ``sbom``."""
    report = verify_image(image, platform=platform, as_json=as_json)
    checked = check_image(image, platform=platform, sbom_file=Path(sbom_file) if sbom_file else None)
    ok = report.ok and checked.ok
    if not as_json:
        out, err = (
            (report.output + checked.summary(), report.stderr)
            if checked.ok
            else (report.output, report.stderr + checked.summary())
        )
        return VerifyReport(ok=ok, output=out, stderr=err)
    doc = {**json.loads(report.output), "ok": ok, "sbom": checked.to_dict()}
    return VerifyReport(ok=ok, output=json.dumps(doc, indent=2, sort_keys=True) + "\n", stderr=report.stderr)


def _last_lines(text: str, count: int = 5) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-count:]) or "(no output)"
