# shellcheck shell=bash
# Shared helpers for megacpp-env host scripts (sourced, not executed).
# Functions only; sourcing has no side effects.

# Debian's docker.io CLI (20.10). /usr/local/bin/docker may be a newer CLI
# that refuses DOCKER_BUILDKIT=1 without the buildx plugin, so always use
# this absolute path unless MEGACPP_DOCKER overrides it.
export DOCKER="${MEGACPP_DOCKER:-/usr/bin/docker}"

log() { printf '[%s] %s\n' "${0##*/}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# A script's stdout carries its result only (an address, a commit, an image tag): callers read it
# with $(bash scripts/X.sh). stdout_is_result, called first in main, sends everything else the
# script and the tools it runs write to stdout (apt, debootstrap, docker, git) to stderr; `result`
# then writes to the real stdout. (A fresh machine once read apt-get's "Get:1 ..." as an address.)
# A daemon the script leaves running must not inherit that descriptor, or a caller's $(...) waits for
# the daemon's exit: start it with `{RESULT_FD}>&-` on its command line.
stdout_is_result() { exec {RESULT_FD}>&1 1>&2; }
result() { printf '%s\n' "$*" >&"${RESULT_FD:-1}"; }

# Run as root, or through sudo when available.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi
}

# apt_present PKG: PKG is installed, or an installed package provides it (forky's qemu-user-binfmt
# provides qemu-user-static; apt installs the one provider when asked for the virtual name).
apt_present() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed' && return 0
  dpkg-query -W -f='${Status}|${Provides}\n' 2>/dev/null | awk -F'|' -v p="$1" '
    $1 == "install ok installed" { n = split($2, a, /, */); for (i = 1; i <= n; i++) { split(a[i], w, " "); if (w[1] == p) found = 1 } }
    END { exit !found }'
}

apt_updated=0
# apt_install PKG...: install the packages that are missing, non-interactively.
apt_install() {
  local missing=() p
  for p in "$@"; do
    apt_present "$p" || missing+=("$p")
  done
  [ "${#missing[@]}" -eq 0 ] && return 0
  log "installing: ${missing[*]}"
  if [ "$apt_updated" -eq 0 ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q </dev/null >&2
    apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "${missing[@]}" </dev/null >&2
}

# apt_available PKG: the archive has a real package PKG (apt_install runs `apt-get update` first).
apt_available() { apt-cache show "$1" >/dev/null 2>&1; }

# debian_mirror: print the Debian archive URI ($DEBIAN_MIRROR, else the first
# URI of the host's apt configuration that serves the 'debian' archive, i.e.
# whose path ends in /debian). deb822 *.sources files first, then one-line lists.
debian_mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then printf '%s\n' "${DEBIAN_MIRROR%/}"; return 0; fi
  local uri
  while read -r uri; do
    case "${uri%/}" in */debian) printf '%s\n' "${uri%/}"; return 0 ;; esac
  done < <(apt_uris)
  return 1
}

# apt_uris: every archive URI of the host's apt sources, in file order.
# MEGACPP_APT_ETC (default /etc/apt) points elsewhere for tests.
apt_uris() {
  local f etc="${MEGACPP_APT_ETC:-/etc/apt}"
  for f in "$etc"/sources.list.d/*.sources; do
    [ -f "$f" ] && awk 'tolower($1)=="uris:" {for (i=2;i<=NF;i++) print $i}' "$f"
  done
  for f in "$etc"/sources.list "$etc"/sources.list.d/*.list; do
    [ -f "$f" ] && awk '$1=="deb" {for (i=2;i<=NF;i++) if ($i ~ /^[a-z+]+:\/\//) {print $i; break}}' "$f"
  done
  return 0
}

# host_ca_bundle: the host's CA bundle (may include a TLS-intercepting CA).
host_ca_bundle() {
  local f
  for f in "${MEGACPP_CA_BUNDLE:-}" "${SSL_CERT_FILE:-}" /etc/ssl/certs/ca-certificates.crt; do
    if [ -n "$f" ] && [ -f "$f" ]; then printf '%s\n' "$f"; return 0; fi
  done
  return 1
}

# now_s: seconds since the epoch (for timings).
now_s() { date +%s; }

# The tool's own virtual environment (made by bootstrap.sh): $MEGACPP_VENV, default <repo>/.venv.
# A venv, not the system Python: Debian's python3 is "externally managed" (PEP 668).
tool_venv() {
  printf '%s\n' "${MEGACPP_VENV:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.venv}"
}

# activate_tool_env: put the tool's venv first on PATH (python3, megacpp-env, pytest, ruff, mypy).
activate_tool_env() {
  local venv
  venv="$(tool_venv)"
  [ -x "$venv/bin/python3" ] || die "no tool environment at $venv: run bash scripts/bootstrap.sh first"
  export PATH="$venv/bin:$PATH"
}
