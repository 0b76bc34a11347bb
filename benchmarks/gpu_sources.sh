#!/usr/bin/env bash
# gpu_sources.sh prepare BUNDLES_DIR | build PYTHON | test PYTHON
# The issue-10 GPU proof through the tool's own source-build path (`megacpp-env build-source`):
# causal_conv1d and mamba_ssm at their stack.yaml pins, for one GPU arch, into one environment, then
# their upstream tests (MEGACPP_GPU_SOURCES picks a subset). Everything it writes is under $MEGACPP_GPU_WORK (default .megacpp/gpu, ignored).
#
#   prepare BUNDLES_DIR  (any machine with the tool) a spec for this GPU (.megacpp/gpu/stack.yaml: the two
#                        sources at the pins of ./stack.yaml with their shipped arch overlays
#                        (overlays/causal-conv1d-archs, overlays/mamba-archs, copied as they are) and
#                        MEGACPP_CUDA_ARCHS set to $MEGACPP_GPU_ARCHS, default "90a"; cloud is "90a 100a"), their facts, the
#                        rendered plans, and a source mirror made from the bundles (`mirror-sources --from`).
#   build PYTHON         (the GPU machine, no network) a venv at .megacpp/gpu/venv that sees PYTHON's packages
#                        (torch, ninja...) through a .pth; `build-source NAME --mirror ... --install` for both
#                        sources into it (forced source builds, jobs from the formula, sanity calls a kernel).
#   test PYTHON          upstream's tests/test_causal_conv1d.py and tests/ops/test_selective_scan.py (including
#                        test_mamba_inner_fn, which needs both) with that venv, from the checkouts.
# The tool itself runs from this checkout (PYTHONPATH) with $MEGACPP_TOOL_PYTHON (default: PYTHON for build and
# test, python3 for prepare); it needs pyyaml and packaging there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${MEGACPP_GPU_WORK:-$ROOT/.megacpp/gpu}"
# The GPU archs to build for, as a target's MEGACPP_CUDA_ARCHS ("90a", or "90a 100a" like cloud).
ARCHS="${MEGACPP_GPU_ARCHS:-${MEGACPP_GPU_ARCH:-90a}}"
ARCHS="${ARCHS//sm_/}"
read -r -a SOURCES <<<"${MEGACPP_GPU_SOURCES:-causal_conv1d mamba_ssm}"

log() { printf '[gpu_sources] %s\n' "$*" >&2; }
tool() { PYTHONPATH="$ROOT" "$TOOL_PY" -m megacpp_env --spec "$WORK/stack.yaml" "$@"; }

write_spec() {
  "$TOOL_PY" - "$ROOT/stack.yaml" "$WORK/stack.yaml" "$ARCHS" "${SOURCES[*]}" <<'EOF'
import json, sys
sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0])
from megacpp_env.spec import load_spec
spec, out, arch, names = load_spec(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4].split()
# Sanity must call a kernel on the GPU, not only import the extension.
KERNELS = {
    "causal_conv1d": "import torch; from causal_conv1d import causal_conv1d_fn; x = torch.randn(2, 64, 128, "
    "device='cuda'); w = torch.randn(64, 4, device='cuda'); assert causal_conv1d_fn(x, w).shape == x.shape",
    "mamba_ssm": "import torch; from mamba_ssm.ops.selective_scan_interface import selective_scan_fn; "
    "t = lambda *s: torch.randn(*s, device='cuda'); u = t(1, 4, 32); "
    "assert selective_scan_fn(u, t(1, 4, 32).sigmoid(), -t(4, 8).exp(), t(1, 8, 32), t(1, 8, 32)).shape == u.shape",
}
lines = ["schema_version: 1", "project: megacpp-gpu-proof", "toolchains:",
         "  host: {gcc: '13', python: '3.12', cuda: '13.0', uv: '0.13.9'}", "sources:"]
for name in names:
    s = spec.sources[name]
    lines += [f"  {name}:", f"    repo: {s.repo}", f"    ref: {s.ref}", f"    commit: '{s.commit}'",
              "    install: wheel", f"    overlay: {s.overlay}",
              f"    build_env: {json.dumps(dict(s.build_env))}",
              f"    sanity: {json.dumps({'imports': list(s.sanity.imports), 'statements': [KERNELS[name]]})}"]
archs = json.dumps({"MEGACPP_CUDA_ARCHS": arch})
lines += ["targets:", "  gpu:", f"    description: this GPU machine ({arch})", "    platforms: [linux/amd64]",
          "    base_image: none/none:none", "    toolchain: host",
          "    gpu:", f"      archs: [{', '.join('sm_' + a for a in arch.split())}]", f"      kernel_arch: sm_{arch.split()[0]}",
          f"      torch_cuda_arch_list: '{';'.join(a[:-2] + '.' + a[-2:] for a in arch.split())}'", f"    sources: [{', '.join(names)}]",
          "    env:", "      sources:", *(f"        {name}: {archs}" for name in names)]
open(out, "w").write("\n".join(lines) + "\n")
EOF
}

prepare() {
  local bundles="$1"
  TOOL_PY="${MEGACPP_TOOL_PYTHON:-python3}"
  mkdir -p "$WORK"
  write_spec
  tool mirror-sources gpu --to "$WORK/mirror" \
    --from "https://github.com/Dao-AILab/causal-conv1d.git=$bundles/causal-conv1d.bundle" \
    --from "https://github.com/state-spaces/mamba.git=$bundles/mamba.bundle"
  rm -rf "$WORK/overlays" "$WORK/facts"
  mkdir -p "$WORK/overlays" "$WORK/facts"
  for name in causal-conv1d-archs mamba-archs; do cp -R "$ROOT/overlays/$name" "$WORK/overlays/$name"; done
  for name in "${SOURCES[@]}"; do cp "$ROOT/facts/$name.toml" "$WORK/facts/"; done  # the jobs formula reads them
  write_plans
  log "prepared $WORK: spec, overlays, plans, source mirror (carry it to the GPU machine)"
}

write_plans() {  # the same plans build-source makes in memory, for a Python without pyyaml
  PYTHONPATH="$ROOT" "$TOOL_PY" - "$WORK" <<'EOF'
import sys
from pathlib import Path
from megacpp_env.sourceplans import plan_of
from megacpp_env.spec import load_spec
work = Path(sys.argv[1])
spec = load_spec(work / "stack.yaml")
(work / "plans").mkdir(exist_ok=True)
for src in spec.target("gpu").sources:
    (work / "plans" / f"{src.name}.json").write_text(plan_of(spec, spec.target("gpu"), src).dumps())
EOF
}

make_venv() {  # a venv of its own that also sees PYTHON's packages (torch, setuptools, ninja) through a .pth
  local py="$1" venv="$WORK/venv" purelib
  if [ ! -x "$venv/bin/python" ]; then
    if "$py" -m pip --version >/dev/null 2>&1; then
      "$py" -m venv --without-pip "$venv"
    else  # PYTHON's environment has no pip (a uv venv): the venv gets its own, offline, from ensurepip
      "$py" -m venv "$venv" || { log "no pip in $py and no ensurepip: install pip there first"; exit 1; }
    fi
  fi
  purelib="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$purelib/zz-base-env.pth"
}

build() {
  local py="$1" name start plan
  if [ -z "${MEGACPP_GPU_SOURCES:-}" ] && [ -d "$WORK/plans" ]; then  # the sources prepare chose
    SOURCES=()
    for plan in "$WORK"/plans/*.json; do name="${plan##*/}"; SOURCES+=("${name%.json}"); done
  fi
  TOOL_PY="${MEGACPP_TOOL_PYTHON:-$py}"
  make_venv "$py"
  # torch's cpp_extension looks for `ninja` on PATH (without it: one compile at a time, MAX_JOBS ignored).
  PATH="$WORK/venv/bin:$(dirname "$py"):$PATH"
  export PATH
  for name in "${SOURCES[@]}"; do
    start=$SECONDS
    set -- --venv "$WORK/venv" --mirror "$WORK/mirror" --workdir "$WORK/src/${name//_/-}" \
      --wheel-dir "$WORK/wheels/$name" --install --json
    if "$TOOL_PY" -c 'import yaml, packaging' 2>/dev/null; then
      tool build-source "$name" "$@" > "$WORK/$name.build.json"
    else  # no pyyaml here: the same build_source from the plan prepare rendered (standard library only)
      PYTHONPATH="$ROOT" "$TOOL_PY" -m megacpp_env.srcbuild build --plan "$WORK/plans/$name.json" \
        --overlays "$WORK/overlays" "$@" > "$WORK/$name.build.json"
    fi
    log "$name: built, installed and sanity-checked in $((SECONDS - start)) s ($WORK/$name.build.json)"
  done
  log "built: $(find "$WORK/wheels" -name '*.whl' -printf '%f ')"
}

run_tests() {
  local venv="$WORK/venv/bin/python"
  (cd "$WORK/src/causal-conv1d" && "$venv" -P -m pytest -q -p no:cacheprovider tests/test_causal_conv1d.py \
     -k "not varlen" 2>&1 | tail -n 3) || true
  (cd "$WORK/src/mamba-ssm" && "$venv" -P -m pytest -q -p no:cacheprovider tests/ops/test_selective_scan.py \
     2>&1 | tail -n 5) || true
}

case "${1:-}" in
  prepare) [ "$#" -eq 2 ] || { echo "usage: $0 prepare BUNDLES_DIR" >&2; exit 2; }; prepare "$2" ;;
  build) [ "$#" -eq 2 ] || { echo "usage: $0 build PYTHON" >&2; exit 2; }; build "$2" ;;
  test) [ "$#" -eq 2 ] || { echo "usage: $0 test PYTHON" >&2; exit 2; }; run_tests ;;
  *) echo "usage: $0 prepare BUNDLES_DIR | build PYTHON | test PYTHON" >&2; exit 2 ;;
esac
