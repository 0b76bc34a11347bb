"""The build context holds every input of every rendered Dockerfile, decided by the real engine: for each
target of the spec (and each of its platforms), a ``FROM scratch`` stage that COPYs every COPY/ADD source
and every ``--mount=type=bind`` source of that target's Dockerfile is built with ``docker build`` in the
context the tool assembles (``build.context_inputs`` staged by ``build.stage_context``), and again in a
copy of the repository as it lies, filtered by its ``.dockerignore`` (a ``docker build`` by hand). A
source the context lacks fails the build, naming it ("not found").

What a build fills before Docker runs is stood in for, and only that: the target's part of the source
mirror, its artifact mirrors, and the locks that cannot be made here (gb10 and cloud need the PyTorch
nightly index). Every other input is the repository's own file. The Dockerfile is read by a small parser
here (instructions, continuation lines, ``--mount`` options); the engine decides what is present.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from megacpp_env import build, docker, layout
from megacpp_env.spec import load_spec
from tests.fixtures.spec import REPO_ROOT, target_names

STAND_IN = "stand-in: a build fills this before Docker runs (tests/test_build_context_docker.py)\n"
PROJECT = ("stack.yaml", "images", "locks", "overlays", "facts")  # a project's files; the tool's source is added


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile: comments dropped, continuation lines joined."""
    out: list[tuple[str, str]] = []
    current = ""
    for line in dockerfile.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if current and line.lstrip().startswith("#"):
            continue  # a comment inside a continued instruction
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        word, _, rest = current.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        current = ""
    return out


def context_sources(dockerfile: str, arch: str) -> list[str]:
    """Every path of the build context the Dockerfile reads on ``arch``: COPY/ADD sources (not ``--from``)
    and ``RUN --mount=type=bind`` sources (not ``from=``), ``${TARGETARCH}`` expanded."""
    found: list[str] = []
    for word, rest in instructions(dockerfile):
        args = rest.split()
        if word in ("COPY", "ADD"):
            flags = [a for a in args if a.startswith("--")]
            if any(f.startswith("--from=") for f in flags):
                continue
            found += [a for a in args if not a.startswith("--")][:-1]
        elif word == "RUN":
            for mount in re.findall(r"--mount=(\S+)", rest):
                opts = dict(kv.partition("=")[::2] for kv in mount.split(","))
                if opts.get("type") == "bind" and "from" not in opts:
                    found.append(opts.get("source", "."))
    out = []
    for raw in found:
        src = raw.replace("${TARGETARCH}", arch).replace("$TARGETARCH", arch)
        assert "$" not in src, f"a COPY/mount source this test cannot expand: {src}"
        out.append(src.rstrip("/") or ".")
    return sorted(set(out))


def project_copy(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    for name in PROJECT:
        src = REPO_ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, root / name)
    return root


def stand_ins(root: Path, target: str, platform: str) -> list[str]:
    """Write what a build fills for ``target`` on ``platform`` where the repository has nothing: its
    source mirror parts, its artifact mirrors and its locks. Returns the relpaths written."""
    spec = load_spec(root / "stack.yaml")
    t = spec.target(target)
    files = [Path(layout.source_mirror_rel(s.name), "index.json") for s in t.sources]
    files += [Path(layout.artifact_mirror_rel(name), "checksums.txt") for name in t.artifacts]
    locks = [layout.lock_path(root, target, platform), layout.requirements_export_path(root, target, platform)]
    if t.toolchain.cuda_pypi:
        locks += [layout.toolchain_lock_path(root, target, "cuda", platform),
                  layout.toolchain_export_path(root, target, "cuda", platform)]  # fmt: skip
    files += [p.relative_to(root) for p in locks]
    written = []
    for rel in files:
        path = root / rel
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(STAND_IN)
            written.append(rel.as_posix())
    return written


def scratch_build(context: Path, sources: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    """``docker build`` of a FROM scratch stage that COPYs each source, exported to ``out``."""
    dockerfile = "FROM scratch\n" + "".join(f"COPY {s} /ctx/{s}\n" for s in sources)
    argv = [docker.binary(), "build", "--progress=plain", "-f", "-", "-o", f"type=local,dest={out}", str(context)]
    return subprocess.run(argv, input=dockerfile, capture_output=True, text=True, env=docker.environ(), check=False)


CASES = [(t, p) for t in target_names() for p in load_spec(REPO_ROOT / "stack.yaml").target(t).platforms]


@pytest.mark.parametrize(("target", "platform"), CASES)
@pytest.mark.docker
def test_the_assembled_context_holds_every_input_of_the_dockerfile(docker_daemon, tmp_path, target, platform):
    root = project_copy(tmp_path)
    filled = stand_ins(root, target, platform)
    spec = load_spec(root / "stack.yaml")
    t = spec.target(target)
    sources = context_sources(layout.dockerfile_path(root, target).read_text(), layout.platform_arch(platform))
    inputs = build.context_inputs(spec, t, platform)
    context = build.stage_context(inputs.items(), tmp_path / "context")
    proc = scratch_build(context, sources, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for src in sources:
        assert (tmp_path / "out" / "ctx" / src).exists(), src
    # nothing extra: every staged path is read by the Dockerfile (or is the Dockerfile itself)
    read = [*sources, layout.dockerfile_path(root, target).relative_to(root).as_posix()]
    staged = [p.relative_to(context).as_posix() for p in context.rglob("*") if p.is_file()]
    extra = [p for p in staged if not any(p == s or p.startswith(s + "/") for s in read)]
    assert extra == []
    assert all(f in staged or any(f.startswith(s + "/") for s in sources) for f in filled)


@pytest.mark.parametrize(("target", "platform"), CASES)
@pytest.mark.docker
def test_the_repository_filtered_by_its_dockerignore_holds_them_too(docker_daemon, tmp_path, target, platform):
    """``docker build -f images/<target>/Dockerfile .`` by hand from the repository root."""
    root = project_copy(tmp_path)
    for name in (".dockerignore", "pyproject.toml", "README.md", "LICENSE", "megacpp_env"):
        src = REPO_ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, root / name)
    stand_ins(root, target, platform)
    (root / ".venv").mkdir()
    (root / ".venv" / "huge").write_text("not an input\n")
    sources = context_sources(layout.dockerfile_path(root, target).read_text(), layout.platform_arch(platform))
    proc = scratch_build(root, sources, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-3000:]
    leak = scratch_build(root, [".venv"], tmp_path / "leak")
    assert leak.returncode != 0 and "not found" in leak.stderr  # what .dockerignore keeps out stays out


def test_the_parser_reads_copy_add_and_bind_sources():
    text = (
        "FROM x AS a\nCOPY --chown=1 a b /dst/\n# c\nADD c \\\n  /d\nCOPY --from=a /x /y\n"
        "RUN --mount=type=bind,source=m/${TARGETARCH},target=/m \\\n    --mount=type=cache,target=/c \\\n"
        "    --mount=type=bind,from=a,source=/w,target=/w \\\n    true\n"
    )
    assert context_sources(text, "arm64") == ["a", "b", "c", "m/arm64"]


@pytest.mark.parametrize("target", target_names())
def test_a_build_stages_exactly_the_context_inputs(target):
    """What ``execute`` stages (``plan.staged``, through ``build_context``) is ``context_inputs``: the
    function the engine tests above prove complete."""
    spec = load_spec(REPO_ROOT / "stack.yaml")
    t = spec.target(target)
    plan = build.plan_build(spec, build.BuildOptions(target=target), docker_bin="docker")
    assert plan.staged == tuple(build.context_inputs(spec, t, plan.platform).items())
    assert plan.to_dict()["context"] == "staged"
    names = dict(plan.staged)
    for src in t.sources:
        assert names[layout.source_mirror_rel(src.name)] == REPO_ROOT / layout.source_mirror_rel(src.name)
    for name in t.artifacts:
        assert names[layout.artifact_mirror_rel(name)] == layout.artifact_mirror_dir(REPO_ROOT, name)
