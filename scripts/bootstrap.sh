#!/usr/bin/env bash
# bootstrap.sh: install what megacpp-env and its test suite need on a fresh Debian machine (root or sudo).
# Idempotent. Installs: git, debootstrap, qemu/binfmt (arm64 builds), nix-bin (flake checks), docker.io
# (via docker-up.sh, later), and the Python package with its dev extras into the current Python.
#   env: PYTHON (default python3), MEGACPP_SKIP_APT=1 to skip apt (e.g. on a workstation).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"

if [ "${MEGACPP_SKIP_APT:-0}" != 1 ]; then
  apt_install git ca-certificates debootstrap nix-bin
fi
log "installing megacpp-env (editable) with dev extras into $("$PYTHON" -c 'import sys; print(sys.executable)')"
"$PYTHON" -m pip install -q --disable-pip-version-check -e '.[dev]'
command -v megacpp-env >/dev/null || die "megacpp-env is not on PATH after pip install (is $PYTHON's bin dir on PATH?)"
megacpp-env --version >&2
