"""torch build facts. Always: what ``torch/version.py`` declares (read, not imported: free).
With ``--torch``: a subprocess in the inspected interpreter imports torch and reports the CUDA,
cuDNN and NCCL it was built with, its arch list and C++ ABI, the GPUs it sees, and, from
``/proc/self/maps``, the CUDA libraries actually loaded (mapped back to the wheel that installed
each one, e.g. ``nvidia-cublas``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from megacpp_env.errors import ToolError
from megacpp_env.snapshot.proc import run_program

if TYPE_CHECKING:
    from megacpp_env.snapshot.context import Context

TORCH_PROBE = r"""
import json, sys
out = {}
import torch
out["version"] = torch.__version__
out["git_version"] = getattr(torch.version, "git_version", "")
out["cuda"] = torch.version.cuda
out["hip"] = getattr(torch.version, "hip", None)
out["debug"] = bool(getattr(torch.version, "debug", False))
out["cxx11_abi"] = bool(torch._C._GLIBCXX_USE_CXX11_ABI)
try:
    out["cudnn"] = torch.backends.cudnn.version()
except Exception as exc:
    out["cudnn"] = "error: %s" % exc
try:
    out["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
except Exception as exc:
    out["nccl"] = "error: %s" % exc
out["arch_list"] = torch.cuda.get_arch_list()
try:
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    out["devices"] = [
        {"name": p.name, "capability": "%d.%d" % (p.major, p.minor), "sm_count": p.multi_processor_count}
        for p in (torch.cuda.get_device_properties(i) for i in range(n))
    ]
except Exception as exc:
    out["devices"] = "error: %s" % exc
maps = []
with open("/proc/self/maps") as fh:
    for line in fh:
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].strip().startswith("/"):
            maps.append(parts[5].strip())
out["mapped"] = sorted(set(maps))
sys.stdout.write("\n@@megacpp-env@@" + json.dumps(out))
"""
TORCH_TIMEOUT = 180.0
CUDA_LIB_RE = re.compile(
    r"^lib(cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvrtc|nvJitLink|cusparse|cusparseLt|cufft|curand|cusolver"
    r"|cupti|nvshmem_host|nvToolsExt|cuda|nvidia-ml|cufile)\.so(\.[0-9.]+)?$"
)
STATIC_KEYS = ("__version__", "git_version", "cuda", "hip", "debug")


def static_facts(site_dirs: list[str]) -> dict[str, Any] | None:
    """Literal assignments in ``torch/version.py`` of the first site dir that has one."""
    import ast

    for site in site_dirs:
        path = Path(site) / "torch" / "version.py"
        if not path.is_file():
            continue
        out: dict[str, Any] = {"path": str(path)}
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError) as exc:
            return {"path": str(path), "error": f"unparsable: {type(exc).__name__}"}
        for node in tree.body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Constant):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id in STATIC_KEYS:
                        out[target.id.strip("_")] = node.value.value
        return out
    return None


def loaded_cuda_libraries(
    mapped: list[str], owner_of: Callable[[str], str | None], dists: Mapping[str, Any]
) -> dict[str, Any]:
    """basename -> {path, realpath version, owning distribution}."""
    out: dict[str, Any] = {}
    for path in mapped:
        name = Path(path).name
        if not CUDA_LIB_RE.match(name):
            continue
        real = os.path.realpath(path)
        key = owner_of(os.path.normpath(path)) or owner_of(real)
        owner = f"{dists[key]['name']} {dists[key]['version']}" if key and key in dists else ""
        out[name] = {"path": path, "file": Path(real).name, "distribution": owner}
    return dict(sorted(out.items()))


def run_torch_probe(python: str, environ: Mapping[str, str]) -> dict[str, Any]:
    result = run_program([python, "-c", TORCH_PROBE], timeout=TORCH_TIMEOUT, env=environ)
    _, sep, payload = result.stdout.rpartition("@@megacpp-env@@")
    if not sep:
        raise ToolError(f"torch probe printed no result: {result.first_line[:200]}")
    data: dict[str, Any] = json.loads(payload)
    return data


def collect(
    python: str,
    environ: Mapping[str, str],
    site_dirs: list[str],
    *,
    import_torch: bool,
) -> dict[str, Any]:
    static = static_facts(site_dirs)
    if static is None:
        return {"installed": False}
    out: dict[str, Any] = {"installed": True, "static": static}
    if not import_torch:
        out["imported"] = "skipped (pass --torch to import torch in a subprocess)"
        return out
    try:
        out["imported"] = run_torch_probe(python, environ)
    except ToolError as exc:
        out["imported"] = {"error": str(exc)}
    return out


def attach_libraries(torch: dict[str, Any], owner_of: Callable[[str], str | None], dists: Mapping[str, Any]) -> None:
    """Replace the raw map list by the CUDA libraries in it (needs the python collector's file index)."""
    imported = torch.get("imported")
    if isinstance(imported, dict) and "mapped" in imported:
        imported["cuda_libraries"] = loaded_cuda_libraries(imported.pop("mapped"), owner_of, dists)


def start(ctx: Context) -> Callable[[], dict[str, Any]]:
    return lambda: collect(ctx.python, ctx.environ, ctx.sites(), import_torch=ctx.opts.import_torch)
