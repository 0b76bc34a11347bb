#!/usr/bin/env bash
# main.sh: the main job on the shipped stack.yaml, on a fresh Debian machine (root).
#   1. install megacpp-env and start dockerd;
#   2. check the spec, verify the rendered Dockerfiles and the locks (offline gates, as CI runs them);
#   3. build the smoke image for real (Debian forky base made with debootstrap, deps from the committed
#      lock with hashes, the project's C extension mirrored by SHA and built in its own stage with no
#      network, its overlay applied and verified, runtime patch installed, snapshot baked) and verify it
#      against its baked snapshot;
#   4. print the exact BuildKit command lines for gb10 and cloud (their CUDA base images and the
#      PyTorch nightly index are not reachable from this machine, so they are not built here).
#   env: MEGACPP_PLATFORM=linux/arm64 builds the arm64 smoke image instead (under qemu; ~5x slower).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

platform="${MEGACPP_PLATFORM:-linux/amd64}"
arch="${platform#linux/}"

bash scripts/bootstrap.sh
activate_tool_env
bash scripts/docker-up.sh
[ "$arch" = amd64 ] || bash scripts/binfmt-up.sh
bash scripts/make-base-image.sh "$arch"
bash scripts/smoke-source.sh --serve

log "== check: spec and policy rules"
megacpp-env check
log "== render --check: committed Dockerfiles match the spec and templates"
megacpp-env render --check
log "== lock check: locks match the spec (smoke strictly; gb10/cloud state shown)"
megacpp-env lock check smoke
megacpp-env lock check --allow-unlocked

log "== build smoke ($platform)"
report="$(mktemp)"
megacpp-env build smoke --platform "$platform" --ca-bundle "$(host_ca_bundle)" --json >"$report"
tag="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tag"])' "$report")"
log "== verify-image $tag"
megacpp-env verify-image "$tag" --platform "$platform"
log "== the smoke image works: the extension, the overlay, the runtime patch switch"
"$DOCKER" run --rm --platform "$platform" "$tag" python -c \
  'import megacpp_smoke_ext as m; assert m.add(2, 3) == 5; print("megacpp_smoke_ext", m.__version__, "add(2, 3) =", m.add(2, 3))'
for gate in 0 1; do
  "$DOCKER" run --rm --platform "$platform" -e MEGACPP_PATCH_SMOKE_SHADOW="$gate" "$tag" python -c \
    'import os, megacpp_smoke_ext.greeting as g; print("MEGACPP_PATCH_SMOKE_SHADOW=%s:" % os.environ["MEGACPP_PATCH_SMOKE_SHADOW"], g.greet("world"))'
done

log "== gb10 and cloud: the BuildKit command lines (not buildable here: no registry, no PyTorch index)"
megacpp-env build gb10 --dry-run || true
megacpp-env build cloud --dry-run || true
log "done: smoke image $tag built and verified"
