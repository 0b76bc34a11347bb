"""Plan the image build of one target and platform: the exact command lines, the content-hashed tag,
the build context, and the preflight that refuses stale inputs. Never prints.

* ``plan_build`` turns the spec and the options into a ``BuildPlan``: it looks the target up by name
  once and keeps the ``Spec``, the resolved ``Target`` and the platform, from which every later step
  works (``--dry-run`` prints the plan's command lines).
* ``preflight`` finds stale inputs: the rendered Dockerfile and source plans (``render --check``),
  the lock (``lock check``) of that target and platform, and unmirrored artifact sets.

The default tag is ``megacpp/<target>:<content hash>`` (under ``--registry HOST[:PORT]/`` when given;
``--push`` then pushes it, see ``publish``); the hash covers the rendered Dockerfile and source
plans, the lock files of the platform, stack.yaml (source pins), the overlays the image copies, the
tool's own source, the platform and any base-image override: the same inputs give the same tag.

The build context is assembled, never the repository as it lies: ``context_inputs`` lists what the
target's Dockerfile reads (the spec's files, the tool's source, the target's parts of the source mirror
and its artifact mirrors, each path from the same ``layout`` helper the renderer writes it with), and
``build.run.build_context`` stages exactly those into a temporary directory (mirror files hard-linked),
so nothing the Dockerfile reads can be missing from it, and nothing else is in it.
tests/test_build_context_docker.py proves it with the real engine for every rendered target. The
tool's source is the spec's repository when that repository is megacpp-env's own source; otherwise (a
project that only has stack.yaml, images/, locks/, overlays/; megacpp-env installed with pip, uv tool
or pipx) it is the running tool's (``toolsrc``), so the content hash, and the tag, are the same either way.
"""

from __future__ import annotations

import shlex
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megacpp_env import buildcache, docker, layout, publish, render, sourceplans, toolsrc
from megacpp_env.errors import RefusedError, StaleError, ToolNotFoundError
from megacpp_env.fsutil import canonical_hash, sha256_bytes
from megacpp_env.layout import platform_arch
from megacpp_env.lock.state import check_job, target_jobs
from megacpp_env.pipmirror import free_port
from megacpp_env.rules.facts import refuse_unpinned_fetches
from megacpp_env.sbom import image_sbom
from megacpp_env.spec.model import Spec, Target
from megacpp_env.srcbuild.mirror import MirrorRequest, insteadof_config, parse_rewrite

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
    """The three steps of a build: the source mirror, the networked deps build, the sealed build. It
    holds the spec and the target resolved once (``plan_build``); every later step takes them from here."""

    spec: Spec
    target: Target
    platform: str
    tag: str
    content_hash: str
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
    staged: tuple[tuple[str, Path], ...] = ()  # the build context: relpath -> file or directory (context_inputs)
    sbom: dict[str, Any] = field(default_factory=dict, repr=False)  # sbom.image_sbom; execute sets the base's id

    @property
    def root(self) -> Path:
        return self.spec.root

    @property
    def source_mirror(self) -> Path:
        return layout.source_mirror_dir(self.root)

    def mirror_argv(self) -> list[str]:
        """``mirror-sources`` as a command line (what step 1 does, for ``--dry-run``)."""
        argv = ["megacpp-env", "mirror-sources", self.target.name, "--to", layout.SOURCE_MIRROR]
        for key, url in self.source_rewrites:
            base = key.removeprefix("url.").removesuffix(".insteadOf")
            path = urllib.parse.unquote(urllib.parse.urlsplit(base).path) if base.startswith("file://") else base
            argv += ["--from", f"{url}={path}"]
        return argv

    def script(self) -> list[str]:
        """The three steps as shell lines with comments (what ``build --dry-run`` prints)."""
        return [
            f"# cd {shlex.quote(str(self.root))}",
            "# 1. every pinned source into the source mirror (this host, network); docker runs in a temporary "
            "directory holding exactly the plan's inputs, mirrors included",
            shlex.join(self.mirror_argv()),
            "# 2. toolchain and locked dependencies (network)",
            shlex.join(self.deps_argv),
            "# 3. one stage per source and the image, from step 2's image, with no network",
            shlex.join(self.argv),
            *(f"# {note}" for note in self.notes),
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target.name,
            "platform": self.platform,
            "tag": self.tag,
            "content_hash": self.content_hash,
            "cwd": "(a staged temporary directory)",
            "context": "staged",
            "source_mirror": layout.SOURCE_MIRROR,
            "mirror_argv": self.mirror_argv(),
            "deps_tag": self.deps_tag,
            "deps_argv": list(self.deps_argv),
            "argv": list(self.argv),
            "buildx": self.request.needs_buildx,
            "cache_ref": self.cache_ref,
            "notes": list(self.notes),
        }


# ---- planning ----------------------------------------------------------------------------------


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


def context_inputs(spec: Spec, target: Target, platform: str) -> dict[str, Path]:
    """The whole build context of ``target`` on ``platform``: relpath -> file or directory. The files of
    ``context_files`` (hashed into the tag), plus what a build fills before Docker runs: each source's part
    of the source mirror (its stage bind-mounts it) and each artifact set (stages bind-mount it, the image
    copies it). Paths come from the ``layout`` helpers the renderer writes into the Dockerfile."""
    out: dict[str, Path] = dict(context_files(spec, target, platform))
    for src in target.sources:
        out[layout.source_mirror_rel(src.name)] = spec.root / layout.source_mirror_rel(src.name)
    for name in target.artifacts:
        out[layout.artifact_mirror_rel(name)] = layout.artifact_mirror_dir(spec.root, name)
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
    target = spec.target(opts.target)  # the one lookup of the target by name in a build
    refuse_unpinned_fetches(spec, target.name)  # before any Docker call, --dry-run included
    platform = target.pick_platform(opts.platform)
    digest = content_hash(spec, target, platform, opts.base_image)
    staged = tuple(context_inputs(spec, target, platform).items())
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
    if not uses_spec_root(spec):
        notes.append(
            f"{spec.root} is not megacpp-env's source: the build context is staged in a temporary directory "
            f"from the spec's files, its source mirror and the megacpp-env source of {toolsrc.origin()}"
        )
    notes += _notes(final, opts, docker_bin, cache) + buildcache.notes(deps_tag, cache, docker_bin)
    return BuildPlan(
        spec=spec,
        target=target,
        platform=platform,
        deps_argv=tuple(docker.build_argv(deps, docker=docker_bin)),
        tag=tag,
        content_hash=digest,
        deps_tag=deps_tag,
        deps_request=deps,
        argv=tuple(docker.build_argv(final, docker=docker_bin)),
        request=final,
        mirror_requests=tuple(sourceplans.mirror_requests(spec, target)),
        mirror=opts.mirror,
        mirror_port=port,
        source_rewrites=_source_rewrites(spec, target, opts),
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


def preflight(spec: Spec, target: Target, platform: str) -> list[str]:
    """Reasons not to build: a stale rendered Dockerfile or a lock that is not ``ok``."""
    problems = [
        f"{s.relpath} is stale (run `megacpp-env render {target.name}` and commit it)"
        for s in render.check_target(spec, target)
    ]
    return problems + _lock_problems(spec, target, platform) + artifact_problems(spec, target)


def artifact_problems(spec: Spec, target: Target) -> list[str]:
    """Each artifact set of ``target`` that is not mirrored, verified, at ``.megacpp/artifacts/<name>``
    (the source stages that read it and the image bind or copy it from there; the build has no network)."""
    from megacpp_env.artifacts import verify_artifacts

    out = []
    for name in target.artifacts:
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


def _lock_problems(spec: Spec, target: Target, platform: str) -> list[str]:
    states = (check_job(job, spec.root) for job in target_jobs(spec, target, (platform,)))
    return [state.line() for state in states if not state.ok]


def refuse_if_stale(spec: Spec, target: Target, platform: str) -> None:
    problems = preflight(spec, target, platform)
    if problems:
        raise StaleError("refusing to build: " + "; ".join(problems))
