#!/usr/bin/env bash
# wheelhouse.sh [DIR]: download the wheels that installing megacpp-env needs (its runtime
# dependencies and its build backend, pinned with hashes in .ci/tool-requirements.txt) into DIR
# (default .megacpp/wheelhouse), verified by pip's --require-hashes, for the interpreter that runs
# it (PYTHON, default the tool venv's). The packaging tests (wheel, sdist, pipx, uv tool, pre-commit
# try-repo) then install offline from DIR (MEGACPP_WHEELHOUSE). Idempotent: pip skips what is there.
# stdout: DIR (only); pip's output goes to stderr.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stdout_is_result   # the result: the wheelhouse directory
cd "$(dirname "${BASH_SOURCE[0]}")/.."

dir="${1:-${MEGACPP_WHEELHOUSE:-.megacpp/wheelhouse}}"
python="${PYTHON:-$(tool_venv)/bin/python3}"
[ -x "$python" ] || python="$(command -v python3)"
mkdir -p "$dir"
log "wheelhouse: $dir (for $("$python" -c 'import sys; print(sys.executable)'))"
"$python" -m pip download -q --disable-pip-version-check --require-hashes --only-binary=:all: \
  -r .ci/tool-requirements.txt -d "$dir"
result "$dir"
