#!/usr/bin/env bash
# test.sh: the whole test suite on a fresh Debian machine (root): installs what the tests need, starts
# dockerd, builds the Debian forky base images (amd64, and arm64 under qemu), serves the smoke source
# repository on git://127.0.0.1:9418, starts the loopback registry (scripts/registry-up.sh, unless
# MEGACPP_TEST_REGISTRY names one), then runs pytest. Extra arguments go to pytest.
# The docker tests build two images for real, once per session each: smoke, and cuda_smoke (CUDA 13.2
# from PyPI wheels, causal-conv1d compiled for sm_90a: ~25 min on 2 cores, seconds when BuildKit's cache
# has it) from the pinned upstream bundles in ../shared/sources (skipped without them, failed under CI).
#   env: MEGACPP_TEST_ARM64=0 skips the arm64 lane (base image + the tests marked arm64).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

start=$SECONDS
bash scripts/bootstrap.sh
activate_tool_env
bash scripts/docker-up.sh
bash scripts/make-base-image.sh amd64
markers=()
if [ "${MEGACPP_TEST_ARM64:-1}" = 1 ]; then
  bash scripts/binfmt-up.sh
  bash scripts/make-base-image.sh arm64
else
  markers=(-m "not arm64")
fi
bash scripts/smoke-source.sh --serve
# The real OCI registry on loopback that the registry tests push to (pin-base, build --push, cache).
if [ -z "${MEGACPP_TEST_REGISTRY:-}" ]; then
  registry="$(bash scripts/registry-up.sh)"
  [[ "$registry" =~ ^127\.0\.0\.1:[0-9]+$ ]] || die "scripts/registry-up.sh printed '$registry', expected 127.0.0.1:PORT"
  export MEGACPP_TEST_REGISTRY="$registry"
fi
# The runtime patches are also tested on real torch when a CPU wheel for this Python is at hand
# (this machine kind keeps one in /opt/wheels); installed into a private dir, never into site-packages.
torch_wheel="$(find /opt/wheels -maxdepth 1 -name "torch-*+cpu-cp3$(python3 -c "import sys; print(sys.version_info[1])")-*.whl" 2>/dev/null | head -n 1 || true)"
if [ -z "${MEGACPP_TEST_TORCH_PATH:-}" ] && [ -n "$torch_wheel" ]; then
  export MEGACPP_TEST_TORCH_PATH="${TMPDIR:-/tmp}/megacpp-test-torch"
  [ -d "$MEGACPP_TEST_TORCH_PATH/torch" ] || python3 -m pip install -q --target "$MEGACPP_TEST_TORCH_PATH" "$torch_wheel"
fi
log "set-up took $((SECONDS - start)) s; running pytest"

set +e
python3 -m pytest -ra "${markers[@]}" "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  die "pytest collected no tests (exit 5): treating as a failure"
fi
exit "$rc"
