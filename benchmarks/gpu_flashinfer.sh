#!/usr/bin/env bash
# gpu_flashinfer.sh prepare MIRRORS_DIR | build PYTHON | cache PYTHON | test PYTHON | test-aot PYTHON
# The issue-17 GPU proof of FlashInfer through the tool's own source-build path (`megacpp-env build-source`):
# flashinfer (the JIT package) and flashinfer_jit_cache (a named subset of AOT modules, overlays/flashinfer-jit-cache)
# at their stack.yaml pins, with their submodules at the pinned commits and the declared unobtainable paths
# (`unobtainable:` in stack.yaml) left out; then upstream's own tests. Everything it writes is under
# $MEGACPP_GPU_WORK (default .megacpp/gpu-fi, ignored).
#
#   prepare MIRRORS_DIR  (any machine with the tool) a spec for this GPU (.megacpp/gpu-fi/stack.yaml: the two sources
#                        at the pins of ./stack.yaml with their overlays and declared exceptions, FLASHINFER_CUDA_ARCH_LIST
#                        9.0a and MEGACPP_FLASHINFER_AOT = the modules the tests below use), the rendered plans, and a
#                        source mirror in the tool's layout (srcbuild/mirror.py) holding exactly the pinned commits:
#                        one pack per repository (FlashInfer, cutlass, cccl, nixl), made from the local clones
#                        MIRRORS_DIR/<owner>+<name>/repo; an object a clone lacks stays missing (never stood in for).
#   build PYTHON         (the GPU machine, no network) a venv at .megacpp/gpu-fi/venv that sees PYTHON's packages
#                        (torch, ninja...) through a .pth; `build-source flashinfer --install` into it.
#   cache PYTHON         a second venv (.megacpp/gpu-fi/venv-aot) with the flashinfer wheel `build` made, then
#                        `build-source flashinfer_jit_cache --install` into it (the AOT subset). It may run while
#                        `test` runs: the JIT venv never sees the cache.
#   test PYTHON          upstream's tests (TESTS below) with the JIT venv, from the checkout; `ninja` on PATH is a
#                        wrapper that counts its runs (each JIT compile is one).
#   test-aot PYTHON      the same tests with venv-aot and FLASHINFER_DISABLE_JIT=1: the count must stay 0.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${MEGACPP_GPU_WORK:-$ROOT/.megacpp/gpu-fi}"
ARCH="${MEGACPP_GPU_ARCH:-9.0a}"
AOT="norm,activation,sampling,single_decode:f16:f16:128,single_decode:f16:e4m3:128,single_prefill:fa2:f16:f16:128"
# "node ids|-k expression". Each selection JIT-compiles one small set of sm_90a modules and no warm-up
# fixture builds more: norm, act_and_mul (silu), sampling, single decode f16/f16 and f16/e4m3 at head dim
# 128, single prefill (FA2) f16 at head dim 128. The jit-cache subset (AOT) holds exactly these.
TESTS=(
  "tests/utils/test_norm.py::test_norm tests/utils/test_norm.py::test_fused_add_rmsnorm|"
  "tests/utils/test_activation.py::test_fused_silu_mul|"
  "tests/utils/test_sampling.py::test_sampling tests/utils/test_sampling.py::test_sampling_from_logits tests/utils/test_sampling.py::test_top_p_sampling tests/utils/test_sampling.py::test_top_k_sampling|"
  "tests/attention/test_decode_fp8_calibration_scale.py::test_single_decode_fp8_calibration_scale|"
  "tests/attention/test_single_prefill.py::test_sinqle_prefill_with_paged_kv_cache|128"
)
REPOS=(  # url commit local-clone
  "https://github.com/flashinfer-ai/flashinfer.git a0a6b019b9b27d49d209f85d028a1ae5a9b347d7 flashinfer-ai+flashinfer"
  "https://github.com/NVIDIA/cutlass.git b46b16d003484063bca4ed365e44095c4c6ed633 NVIDIA+cutlass"
  "https://github.com/NVIDIA/cccl.git 876867684f7fac130e0f5911236e0a92a970d4fd NVIDIA+cccl"
  "https://github.com/ai-dynamo/nixl.git 05e4243f5ed305a245912361ace20ba354ec0808 ai-dynamo+nixl"
)

log() { printf '[gpu_flashinfer] %s\n' "$*" >&2; }
tool() { PYTHONPATH="$ROOT" "$TOOL_PY" -m megacpp_env --spec "$WORK/stack.yaml" "$@"; }

write_spec() {
  "$TOOL_PY" - "$ROOT/stack.yaml" "$WORK/stack.yaml" "$ARCH" "$AOT" <<'EOF'
import json, sys
sys.path.insert(0, sys.argv[1].rsplit("/", 1)[0])
from megacpp_env.spec import load_spec
spec, out, arch, aot = load_spec(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
lines = ["schema_version: 1", "project: megacpp-gpu-proof", "toolchains:",
         "  host: {gcc: '13', python: '3.12', uv: '0.13.9'}", "sources:"]
for name in ("flashinfer", "flashinfer_jit_cache"):
    s = spec.sources[name]
    lines += [f"  {name}:", f"    repo: {s.repo}", f"    ref: {s.ref}", f"    commit: '{s.commit}'",
              f"    submodules: {json.dumps(s.submodules)}", "    install: wheel", f"    overlay: {s.overlay}",
              f"    unobtainable: {json.dumps(dict(s.unobtainable))}",
              f"    build_env: {json.dumps(dict(s.build_env))}",
              f"    sanity: {json.dumps({'imports': list(s.sanity.imports), 'statements': list(s.sanity.statements)})}"]
    if s.subdir:
        lines.append(f"    subdir: {s.subdir}")
    if s.needs:
        lines.append(f"    needs: {json.dumps(dict(s.needs))}")
env = json.dumps({"FLASHINFER_CUDA_ARCH_LIST": arch, "MEGACPP_FLASHINFER_AOT": aot})
lines += ["targets:", "  gpu:", f"    description: this GPU machine ({arch})", "    platforms: [linux/amd64]",
          "    base_image: none/none:none", "    toolchain: host", "    sources: [flashinfer, flashinfer_jit_cache]",
          "    env:", "      sources:", f"        flashinfer_jit_cache: {env}"]
open(out, "w").write("\n".join(lines) + "\n")
EOF
}

write_mirror() {  # the tool's mirror layout, one pack of exactly the pinned commit per repository
  local clones="$1" mirror="$WORK/mirror" line url commit clone key repo
  rm -rf "$mirror"
  mkdir -p "$mirror/sources/flashinfer/git" "$mirror/sources/flashinfer_jit_cache"
  for line in "${REPOS[@]}"; do
    read -r url commit clone <<<"$line"
    key="$(PYTHONPATH="$ROOT" "$TOOL_PY" -c 'import sys; from megacpp_env.srcbuild.mirror import repo_key; print(repo_key(sys.argv[1]))' "$url")"
    repo="$mirror/sources/flashinfer/git/$key.git"
    git init -q --bare --template= "$repo"
    git -C "$repo" config uploadpack.allowAnySHA1InWant true
    git -C "$repo" config uploadpack.allowFilter true
    git -C "$repo" config gc.auto 0
    mkdir -p "$repo/objects/pack" "$repo/refs"
    git -C "$clones/$clone/repo" rev-list --objects --missing=allow-any "$commit" --max-count=1 |
      git -C "$clones/$clone/repo" -c pack.compression=9 pack-objects -q --window=250 --depth=250 \
        --missing=allow-any "$repo/objects/pack/pack" >/dev/null
    git -C "$repo" update-ref "refs/megacpp/pins/$commit" "$commit"
    log "mirrored $url @ $commit ($(du -sh "$repo" | cut -f1))"
  done
  PYTHONPATH="$ROOT" "$TOOL_PY" - "$mirror" "${REPOS[@]}" <<'EOF'
import os, sys
from pathlib import Path
from megacpp_env.srcbuild.mirror import _write_index, _write_top_index, MirrorRequest, Pin
root, repos = Path(sys.argv[1]), [r.split() for r in sys.argv[2:]]
index = {url: [commit] for url, commit, _ in repos}
for name in ("flashinfer", "flashinfer_jit_cache"):
    d = root / "sources" / name
    if name != "flashinfer":  # the same repositories: links, not a second copy (the call carries 64 MiB)
        (d / "git").mkdir(parents=True, exist_ok=True)
        for entry in (root / "sources/flashinfer/git").iterdir():
            os.symlink(f"../../flashinfer/git/{entry.name}", d / "git" / entry.name)
    _write_index(d, name, index)
    _write_top_index(root, [MirrorRequest(source=name, pins=(Pin(url=repos[0][0], commit=repos[0][1]),))])
EOF
}

prepare() {
  TOOL_PY="${MEGACPP_TOOL_PYTHON:-python3}"
  mkdir -p "$WORK"
  write_spec
  write_mirror "$1"
  rm -rf "$WORK/overlays"
  mkdir -p "$WORK/overlays"
  for name in flashinfer flashinfer-jit-cache; do cp -R "$ROOT/overlays/$name" "$WORK/overlays/$name"; done
  log "prepared $WORK ($(du -sh "$WORK" | cut -f1)): spec, overlays, source mirror (carry it to the GPU machine)"
}

make_venv() {  # make_venv PYTHON DIR: a venv that also sees PYTHON's packages (torch, setuptools, ninja) via a .pth
  local py="$1" venv="$2" purelib
  [ -x "$venv/bin/python" ] || "$py" -m venv --without-pip "$venv"
  purelib="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' > "$purelib/zz-base-env.pth"
  # Wheels the GPU image lacks (carried by the caller in $MEGACPP_GPU_WHEELS), installed into the venv.
  if [ -n "${MEGACPP_GPU_WHEELS:-}" ]; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --target "$purelib" "$MEGACPP_GPU_WHEELS"/*.whl
  fi
}

build_one() {  # build_one NAME VENV
  local name="$1" start=$SECONDS
  PATH="$2/bin:$(dirname "$PY"):$PATH" tool build-source "$name" --venv "$2" --mirror "$WORK/mirror" \
    --workdir "$WORK/src/${name//_/-}" --wheel-dir "$WORK/wheels/$name" --install --json > "$WORK/$name.build.json"
  log "$name: built, installed and sanity-checked in $((SECONDS - start)) s ($WORK/$name.build.json)"
}

ninja_shim() {  # ninja_shim LOG: `ninja` on PATH appends each run to LOG, then runs the real one
  local real
  real="$(PATH="$(dirname "$PY"):$PATH" command -v ninja)"
  mkdir -p "$WORK/shim"
  printf '#!/bin/sh\necho "$$ $*" >> %q\nexec %q "$@"\n' "$1" "$real" > "$WORK/shim/ninja"
  chmod +x "$WORK/shim/ninja"
}

run_tests() {  # run_tests VENV LABEL [--no-jit]
  local venv="$1/bin/python" label="$2" entry ids expr start i=0 out
  : > "$WORK/ninja-runs.$label.log"
  ninja_shim "$WORK/ninja-runs.$label.log"
  if [ "${3:-}" = "--no-jit" ]; then export FLASHINFER_DISABLE_JIT=1; fi
  export FLASHINFER_WORKSPACE_BASE="$WORK/workspace-$label"   # a fresh JIT cache: nothing from an earlier run
  mkdir -p "$WORK/logs"
  for entry in "${TESTS[@]}"; do
    ids="${entry%%|*}" expr="${entry#*|}" start=$SECONDS i=$((i + 1)) out="$WORK/logs/$label-$i.log"
    # shellcheck disable=SC2086  # the node ids are words
    (cd "$WORK/src/flashinfer" && PATH="$WORK/shim:$1/bin:$(dirname "$PY"):$PATH" timeout "${MEGACPP_GPU_TEST_TIMEOUT:-240}" \
       "$venv" -P -m pytest -q -p no:cacheprovider $ids ${expr:+-k "$expr"} > "$out" 2>&1) || true
    # shellcheck disable=SC2016  # the quotes are text: $expr expands (double-quoted context)
    log "[$label] $ids${expr:+ -k '$expr'}: $(tail -n 1 "$out") in $((SECONDS - start)) s; ninja runs so far: $(wc -l < "$WORK/ninja-runs.$label.log")"
  done
}

case "${1:-}" in
  prepare) [ "$#" -eq 2 ] || { echo "usage: $0 prepare MIRRORS_DIR" >&2; exit 2; }; prepare "$2" ;;
  build) PY="$2"; TOOL_PY="${MEGACPP_TOOL_PYTHON:-$PY}"; make_venv "$PY" "$WORK/venv"; build_one flashinfer "$WORK/venv" ;;
  cache)  # a second venv: the flashinfer wheel `build` made, then the jit-cache through build-source
    PY="$2"; TOOL_PY="${MEGACPP_TOOL_PYTHON:-$PY}"; make_venv "$PY" "$WORK/venv-aot"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$("$WORK/venv-aot/bin/python" -c \
      'import sysconfig; print(sysconfig.get_paths()["purelib"])')" "$WORK"/wheels/flashinfer/*.whl
    build_one flashinfer_jit_cache "$WORK/venv-aot" ;;
  test) PY="$2"; run_tests "$WORK/venv" jit ;;
  test-aot) PY="$2"; run_tests "$WORK/venv-aot" no-jit --no-jit ;;
  *) echo "usage: $0 prepare MIRRORS_DIR | build PYTHON | cache PYTHON | test PYTHON | test-aot PYTHON" >&2; exit 2 ;;
esac
