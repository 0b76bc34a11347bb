"""The container this snapshot runs in, if any: the runtime, the container's id and, where the
runtime says, the image it was started from.

Recorded, never hashed: the environment inside the image is what the other areas fingerprint (its
packages, libraries, compilers, OS), and an image cannot know its own id while it is being built,
so the snapshot baked into an image at build time and the one ``verify-image`` takes in a container
of it would always differ here.

Evidence, in order: ``/run/.containerenv`` (podman: image name and id), ``/.dockerenv`` (docker),
Apptainer/Singularity's variables, Kubernetes' service variables, then the container id in
``/proc/self/cgroup`` (cgroup v1, or a v2 path that names one) or ``/proc/self/mountinfo`` (docker
bind-mounts ``/etc/hostname`` from ``.../containers/<id>/``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context

CONTAINER_ID = re.compile(r"(?:docker|containers|cri-containerd|crio|libpod)[-/]([0-9a-f]{64})(?:\.scope)?\b")
IMAGE_VARIABLES = ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER", "CONTAINER_IMAGE")


def read_containerenv(text: str) -> dict[str, str]:
    """``/run/.containerenv`` (podman writes ``key="value"`` lines: engine, name, id, image, imageid)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() in ("engine", "name", "id", "image", "imageid"):
            out[key.strip()] = value.strip().strip('"')
    return out


def container_id(cgroup: str, mountinfo: str = "") -> str | None:
    """The 64-hex container id a cgroup path names, else the one in the source of the bind mount
    of ``/etc/hostname`` (or hosts, resolv.conf) in mountinfo. Other mounts are not evidence: a
    docker host's own mountinfo lists every running container's ``.../containers/<id>/mounts/shm``."""
    found = CONTAINER_ID.search(cgroup)
    if found:
        return found.group(1)
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] in ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf"):
            found = CONTAINER_ID.search(fields[3])
            if found:
                return found.group(1)
    return None


def runtime_of(environ: Mapping[str, str], files: Mapping[str, str | None]) -> str | None:
    """podman, docker, apptainer, kubernetes, a generic ``container`` (an id in cgroup), or None."""
    if files.get("/run/.containerenv") is not None:
        return "podman"
    if files.get("/.dockerenv") is not None:
        return "docker"
    if environ.get("APPTAINER_CONTAINER") or environ.get("SINGULARITY_CONTAINER"):
        return "apptainer"
    if environ.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if container_id(files.get("/proc/self/cgroup") or ""):
        return "container"  # a container id in the cgroup path, no runtime marker
    return None


def facts_from(environ: Mapping[str, str], files: Mapping[str, str | None]) -> dict[str, Any]:
    """Pure: the container facts from the environment and the contents of the evidence files
    (``None``: the file does not exist)."""
    podman = read_containerenv(files.get("/run/.containerenv") or "")
    image = podman.get("image") or next((environ[v] for v in IMAGE_VARIABLES if environ.get(v)), None)
    cgroup, mountinfo = files.get("/proc/self/cgroup") or "", files.get("/proc/self/mountinfo") or ""
    cid = podman.get("id") or (container_id(cgroup, mountinfo) if runtime_of(environ, files) else None)
    out = {"id": cid, "image": image, "image_id": podman.get("imageid") or None}
    return {"runtime": runtime_of(environ, files), **{k: v for k, v in out.items() if v is not None}}


EVIDENCE = ("/run/.containerenv", "/.dockerenv", "/proc/self/cgroup", "/proc/self/mountinfo")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError:
        return ""  # there, but unreadable (a podman .containerenv is 0400 for rootless users)


def collect(environ: Mapping[str, str]) -> dict[str, Any]:
    return facts_from(environ, {path: _read(path) for path in EVIDENCE})


def start(ctx: Context) -> Callable[[], dict[str, Any]]:
    return lambda: collect(ctx.environ)
