"""Render ``images/<target>/Dockerfile`` from the spec and the one template set; check freshness.

Rendering reads only the typed ``Spec`` (never YAML) and the templates. The output is deterministic:
the same spec and templates give the same bytes. The header records the command and the sha256 of
the inputs (the target's resolved view and the template files). Never prints, never exits.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megacpp_env import layout, sourceplans
from megacpp_env.errors import MegacppEnvError
from megacpp_env.fsutil import atomic_write_bytes, canonical_hash, sha256_bytes
from megacpp_env.layout import platform_arch
from megacpp_env.rules.facts import refuse_unpinned_fetches
from megacpp_env.spec.model import Source, Spec, Target
from megacpp_env.srcbuild import closure
from megacpp_env.srcbuild.plan import VIA_CMAKE_ARGS, SourcePlan
from megacpp_env.templating import TemplateValueError, render_template

TEMPLATE = "Dockerfile.j2"
CUDA_HOME = layout.CUDA_HOME
_ARCH_SENTINEL = "ARCHSENTINEL"


@dataclass(frozen=True, kw_only=True, slots=True)
class RenderedFile:
    """One rendered file: its path relative to the spec root and its exact bytes."""

    relpath: str
    content: bytes

    def path(self, root: Path) -> Path:
        return root / self.relpath


@dataclass(frozen=True, kw_only=True, slots=True)
class Staleness:
    """A committed file that differs from what rendering gives now (``diff`` is a unified diff)."""

    relpath: str
    diff: str


def templates_digest(templates: Path) -> str:
    """sha256 over every template file (path and bytes), in sorted order."""
    parts = []
    for path in sorted(p for p in templates.rglob("*") if p.is_file()):
        parts.append({"path": path.relative_to(templates).as_posix(), "sha256": sha256_bytes(path.read_bytes())})
    return canonical_hash(parts)


def inputs_digest(spec: Spec, target: Target, templates: Path) -> str:
    """sha256 of everything a target's Dockerfile is rendered from."""
    indexes = [i.to_dict() for i in _explicit_indexes(spec, target)]
    return canonical_hash(
        {
            "target": target.to_dict(),
            "sources": [s.to_dict() for s in target.sources],
            "indexes": indexes,
            "templates": templates_digest(templates),
        }
    )


def _explicit_indexes(spec: Spec, target: Target) -> list[Any]:
    seen: dict[str, Any] = {}
    for req in target.all_requirements():
        index = spec.index_for(_req_name(req), target)
        if index is not None and index.explicit:
            seen.setdefault(index.name, index)
    return [seen[k] for k in sorted(seen)]


def _req_name(requirement: str) -> str:
    from packaging.requirements import Requirement

    return Requirement(requirement).name


def _split_on_arch(path: Path, root: Path) -> dict[str, str]:
    rel = path.relative_to(root).as_posix()
    prefix, _, suffix = rel.partition(_ARCH_SENTINEL)
    return {"prefix": prefix, "suffix": suffix, "name_prefix": prefix.rpartition("/")[2]}


def _runtime_env(spec: Spec, target: Target) -> dict[str, str]:
    """The target's runtime env, with each artifact set's variable pointing at the image's copy of it."""
    env = {spec.artifacts[n].env: f"{layout.IMAGE_ARTIFACTS}/{n}" for n in target.artifacts}
    return {**env, **target.runtime_env}


def _artifacts_of(spec: Spec, target: Target, src: Source) -> list[tuple[str, str, str]]:
    """(context dir, mount point, variable) of each artifact set of ``target`` that ``src`` builds with: a
    source that needs the set's source and is built from that source's own checkout (same repository and
    commit): FlashInfer's jit-cache, whose AOT build reads the cubins. The JIT package itself compiles
    nothing, and a source that only imports FlashInfer at run time (vLLM) gets the runtime copy."""
    out = []
    for name in target.artifacts:
        art = spec.artifacts[name]
        owner = spec.sources.get(art.source)
        if owner and art.source in src.needs and (owner.repo, owner.commit) == (src.repo, src.commit):
            out.append((layout.artifact_mirror_rel(name), f"{layout.IMAGE_ARTIFACT_MOUNT}/{name}", art.env))
    return out


def _source_view(
    root: Path, target: Target, src: Source, plan: SourcePlan, artifacts: list[tuple[str, str, str]]
) -> dict[str, Any]:
    return {
        "artifacts": artifacts,
        "name": src.name,
        "commit": src.commit,
        "ref": src.ref,
        "dest": layout.image_checkout_dir(src.name),
        "dist": src.dist_dir_name,
        "overlay": src.overlay,
        "install": src.install,
        "plan": sourceplans.plan_path(root, target.name, src.name).relative_to(root).as_posix(),
        "mirror": layout.source_mirror_rel(src.name),
        "image_mirror": f"{layout.IMAGE_SOURCE_MIRROR}/sources/{src.name}",
        # shown in the stage's header comment (the plan file is what the stage reads)
        "build_env": sorted(plan.build_env.items()),
        "fetches": [(_fetch_label(f.env, f.via), f.name) for f in plan.fetches],
    }


def _fetch_label(variable: str, via: str) -> str:
    """How a stage's header comment shows a fetch: ``VAR=`` or ``CMAKE_ARGS += -DVAR=`` (CMake's override)."""
    return f"CMAKE_ARGS += -D{variable}" if via == VIA_CMAKE_ARGS else variable


def _closure_view() -> list[dict[str, Any]]:
    """The source-build closure grouped by directory: one ``COPY`` per directory, files listed."""
    groups: dict[str, list[str]] = {}
    for rel in closure.closure():
        groups.setdefault(rel.rpartition("/")[0], []).append(rel)
    return [{"dir": d, "files": files} for d, files in sorted(groups.items())]


def _labels(target: Target, inputs: str) -> list[tuple[str, str]]:
    return [
        ("org.opencontainers.image.title", f"megacpp/{target.name}"),
        ("org.opencontainers.image.description", target.description),
        (f"{layout.LABEL_PREFIX}.target", target.name),
        (f"{layout.LABEL_PREFIX}.toolchain", target.toolchain.name),
        (f"{layout.LABEL_PREFIX}.inputs-sha256", inputs),
        (f"{layout.LABEL_PREFIX}.snapshot-path", layout.IMAGE_SNAPSHOT),
    ]


def _apt_packages(target: Target) -> list[str]:
    return sorted(set(target.toolchain.apt_packages))


def view(spec: Spec, target: Target, templates: Path) -> dict[str, Any]:
    """The template context for one target: plain data derived from the spec, nothing else."""
    tc = target.toolchain
    root = spec.root
    sentinel = f"linux/{_ARCH_SENTINEL}"
    inputs = inputs_digest(spec, target, templates)
    python_bin = f"python{tc.python}"
    return {
        "dockerfile": layout.dockerfile_path(root, target.name).relative_to(root).as_posix(),
        "command": f"megacpp-env render {target.name}",
        "inputs_sha256": inputs,
        "target": target.name,
        "description": target.description,
        "bases": [{"arch": platform_arch(p), "ref": str(target.base_image(p))} for p in target.platforms],
        "apt_options": list(tc.apt_options),
        "apt_repositories": list(tc.apt_repositories),
        "apt_packages": _apt_packages(target),
        "gcc": tc.gcc,
        "python": tc.python,
        "python_bin": python_bin,
        "uv": tc.uv,
        "cuda": target.uses_cuda,
        "cuda_version": target.toolchain.cuda,
        "cuda_home": CUDA_HOME,
        "torch_cuda_arch_list": target.gpu.torch_cuda_arch_list if target.gpu else "",
        "venv": layout.IMAGE_VENV,
        "venv_python": f"{layout.IMAGE_VENV}/bin/python",
        "venv_pip": f"{layout.IMAGE_VENV}/bin/pip",
        "site_packages": f"{layout.IMAGE_VENV}/lib/{python_bin}/site-packages",
        "home": layout.IMAGE_HOME,
        "image_spec": layout.IMAGE_SPEC,
        "snapshot": layout.IMAGE_SNAPSHOT,
        **_cuda_pypi_view(root, target, sentinel),
        "lock_export": _split_on_arch(layout.requirements_export_path(root, target.name, sentinel), root),
        "lock_pylock": _split_on_arch(layout.lock_path(root, target.name, sentinel), root),
        "extra_index_urls": [i.url for i in _explicit_indexes(spec, target)],
        "sources": [
            _source_view(root, target, s, sourceplans.plan_of(spec, target, s), _artifacts_of(spec, target, s))
            for s in target.sources
        ],
        "artifacts": [(layout.artifact_mirror_rel(n), f"{layout.IMAGE_ARTIFACTS}/{n}") for n in target.artifacts],
        "srcbuild": layout.IMAGE_SRCBUILD,
        "srcbuild_closure": _closure_view(),
        "plans_dir": layout.IMAGE_PLANS,
        "wheels_dir": layout.IMAGE_WHEELS,
        "image_mirror": layout.IMAGE_SOURCE_MIRROR,
        "src_dir": layout.IMAGE_SRC,
        "runtime_patches": list(target.runtime_patches),
        "resolutions_file": layout.resolutions_path(spec.root, target.name).relative_to(spec.root).as_posix(),
        "runtime_env": sorted(_runtime_env(spec, target).items()),
        "labels": _labels(target, inputs),
    }


def _cuda_pypi_view(root: Path, target: Target, sentinel: str) -> dict[str, Any]:
    """The ``cuda`` stage's values when the toolchain's CUDA comes from PyPI wheels (its toolchain lock)."""
    tc = target.toolchain
    if not tc.cuda_pypi:
        return {"cuda_pypi": False, "toolchain_stage": "toolchain"}
    return {
        "cuda_pypi": True,
        "toolchain_stage": "cuda",
        "cuda_major": tc.cuda.split(".", 1)[0],
        "cuda_prefix": layout.image_cuda_prefix(tc.cuda),
        "cuda_root": layout.image_cuda_root(tc.cuda),
        "cuda_export": _split_on_arch(layout.toolchain_export_path(root, target.name, "cuda", sentinel), root),
        "cuda_pylock": _split_on_arch(layout.toolchain_lock_path(root, target.name, "cuda", sentinel), root),
    }


def render_target(spec: Spec, target: Target, *, templates: Path | None = None) -> tuple[RenderedFile, ...]:
    """Every file ``images/<target>/`` holds, rendered in memory: the Dockerfile, then one source build
    plan per source (``sources/<source>.json``, what that source's stage reads)."""
    name = target.name
    refuse_unpinned_fetches(spec, name)  # a stage known to fail without network is never written
    tpl = templates or layout.templates_dir()
    if not (tpl / TEMPLATE).is_file():
        raise MegacppEnvError(
            f"no {TEMPLATE} in {tpl}: the package's templates are missing; reinstall megacpp-env "
            "(they ship as package data in megacpp_env/templates/)"
        )
    try:
        text = render_template(tpl, TEMPLATE, view(spec, target, tpl))
    except TemplateValueError as exc:
        raise TemplateValueError(f"target {name}: {exc}") from exc
    relpath = layout.dockerfile_path(spec.root, name).relative_to(spec.root).as_posix()
    return (
        RenderedFile(relpath=relpath, content=text.encode("utf-8")),
        resolutions_file(spec, target),
        *_plan_files(spec, target),
    )


def _plan_files(spec: Spec, target: Target) -> list[RenderedFile]:
    out = []
    for plan in sourceplans.target_plans(spec, target):
        path = sourceplans.plan_path(spec.root, target.name, plan.name).relative_to(spec.root).as_posix()
        out.append(RenderedFile(relpath=path, content=plan.dumps().encode("utf-8")))
    return out


def _orphans(root: Path, files: list[RenderedFile]) -> list[str]:
    """Plan files of the rendered targets that rendering no longer makes (a source left the target)."""
    made = {f.relpath for f in files}
    out = []
    for f in files:
        if Path(f.relpath).name != "Dockerfile":
            continue
        plans = (root / f.relpath).parent / "sources"
        out += [p.relative_to(root).as_posix() for p in sorted(plans.glob("*.json"))]
    return [rel for rel in out if rel not in made]


def resolutions_file(spec: Spec, target: Target) -> RenderedFile:
    """``images/<target>/resolutions.json`` for ``python -m megacpp_env.depcheck --resolutions``."""
    from megacpp_env.depcheck import Accepted, Resolutions

    res = Resolutions(
        target=target.name,
        overrides=tuple(
            Accepted(requirement=o.requirement, reason=o.reason, requirers=o.requirers)
            for o in target.resolutions.overrides
        ),
        provides=tuple((p.provider, p.provides, p.reason) for p in target.resolutions.provides),
    )
    relpath = layout.resolutions_path(spec.root, target.name).relative_to(spec.root).as_posix()
    return RenderedFile(relpath=relpath, content=canonical_json_bytes(res.to_dict()))


def canonical_json_bytes(doc: dict[str, Any]) -> bytes:
    import json

    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def render_all(spec: Spec, names: Iterable[str] = ()) -> tuple[RenderedFile, ...]:
    """The named targets (default: all, by name), each looked up once (``render`` starts from names)."""
    chosen = [spec.target(name) for name in list(names) or sorted(spec.targets)]
    return tuple(f for target in chosen for f in render_target(spec, target))


def write(root: Path, files: Iterable[RenderedFile]) -> list[str]:
    """Write rendered files atomically and delete orphaned plan files; returns the relpaths that changed."""
    files = list(files)
    changed = [f.relpath for f in files if atomic_write_bytes(f.path(root), f.content)]
    for rel in _orphans(root, files):
        (root / rel).unlink()
        changed.append(rel)
    return changed


def staleness(root: Path, files: Iterable[RenderedFile]) -> list[Staleness]:
    """Rendered files whose committed copy differs, each with a unified diff (committed -> rendered);
    orphaned plan files too (their diff deletes them)."""
    files = list(files)
    out = [_removal(root, rel) for rel in _orphans(root, files)]
    for f in files:
        path = f.path(root)
        old = path.read_bytes() if path.is_file() else b""
        if old == f.content:
            continue
        diff = difflib.unified_diff(
            old.decode("utf-8", "replace").splitlines(keepends=True),
            f.content.decode("utf-8").splitlines(keepends=True),
            fromfile=f"a/{f.relpath}" if old else "/dev/null",
            tofile=f"b/{f.relpath}",
        )
        out.append(Staleness(relpath=f.relpath, diff="".join(diff)))
    return sorted(out, key=lambda st: st.relpath)


@dataclass(frozen=True, kw_only=True, slots=True)
class RenderRun:
    files: tuple[RenderedFile, ...]
    stale: list[Staleness]  # with check_only: the committed files that differ
    written: list[str]  # without: the paths rewritten (the others were unchanged)


def render_or_check(spec: Spec, names: Iterable[str], *, check_only: bool) -> RenderRun:
    """``render [TARGET...]``: write the rendered files, or with ``--check`` only compare them with
    the committed ones."""
    files = render_all(spec, names)
    if check_only:
        return RenderRun(files=files, stale=staleness(spec.root, files), written=[])
    return RenderRun(files=files, stale=[], written=write(spec.root, files))


def _removal(root: Path, rel: str) -> Staleness:
    old = (root / rel).read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    diff = difflib.unified_diff(old, [], fromfile=f"a/{rel}", tofile="/dev/null")
    return Staleness(relpath=rel, diff="".join(diff))


def check(spec: Spec, names: Iterable[str] = ()) -> list[Staleness]:
    """``render --check``: the stale files among the chosen targets (empty list: all fresh)."""
    return staleness(spec.root, render_all(spec, names))


def check_target(spec: Spec, target: Target) -> list[Staleness]:
    """The stale files of one resolved target (``build``'s preflight)."""
    return staleness(spec.root, render_target(spec, target))
