#!/usr/bin/env bash
# bootstrap.sh: install what megacpp-env and its test suite need on a fresh Debian machine (root or sudo).
# Idempotent. Installs git, debootstrap, nix-bin (flake checks), python3, python3-venv and shellcheck from apt
# (docker.io and qemu come with docker-up.sh / binfmt-up.sh), then makes the tool's venv ($MEGACPP_VENV, default .venv) with PYTHON
# (default python3, >= 3.11) and installs megacpp-env there, editable, with its dev extra (nvidia-ml-py
# is a default dependency), then fills the offline wheelhouse of the packaging tests (scripts/wheelhouse.sh).
# Other scripts then call `activate_tool_env` (scripts/lib.sh) to put that venv first on PATH.
#   env: PYTHON, MEGACPP_VENV, MEGACPP_SKIP_APT=1 to skip apt (e.g. on a workstation).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stdout_is_result   # no result: apt, pip and the wheelhouse log to stderr
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"

if [ "${MEGACPP_SKIP_APT:-0}" != 1 ]; then
  # python3 and its venv module too: a minimal Debian has neither.
  apt_install git ca-certificates debootstrap nix-bin python3 python3-venv
  apt_install shellcheck || log "shellcheck unavailable: its test will be skipped"
fi
command -v "$PYTHON" >/dev/null || die "$PYTHON not found: install Python >= 3.11 or set PYTHON"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "$PYTHON is older than 3.11"
venv="$(tool_venv)"
if [ ! -x "$venv/bin/python3" ]; then
  log "creating the tool environment $venv with $("$PYTHON" -c 'import sys; print(sys.executable)')"
  if ! "$PYTHON" -m venv "$venv"; then
    # Debian's own python3 needs its venv module from apt.
    [ "${MEGACPP_SKIP_APT:-0}" = 1 ] || apt_install python3-venv
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv" || die "cannot create a venv with $PYTHON"
  fi
fi
log "installing megacpp-env (editable, dev extra) into $venv"
"$venv/bin/python3" -m pip install -q --disable-pip-version-check -e '.[dev]'
activate_tool_env
megacpp-env --version >&2
# The packaging tests install megacpp-env offline (wheel, sdist, pipx, uv tool, pre-commit try-repo):
# the real wheels of its dependencies, hash-verified, into .megacpp/wheelhouse.
bash scripts/wheelhouse.sh
