#!/usr/bin/env bash
# registry-up.sh [--stop]
# Run a real OCI registry (Debian's docker-registry package: distribution 2.8) on loopback, with its
# own storage directory, for `megacpp-env build --push`, `pin-base` and registry caches.
#   (no option)  install docker-registry if missing, start it on 127.0.0.1:$MEGACPP_REGISTRY_PORT
#                unless a registry already answers there, wait until GET /v2/ answers, check that
#                dockerd treats the address as an insecure (plain HTTP) registry, print HOST:PORT
#                (stdout carries only that line; apt and every log go to stderr)
#   --stop       stop the registry this script started for $MEGACPP_REGISTRY_DIR (by its pid file)
#   env: MEGACPP_REGISTRY_PORT (default 5000), MEGACPP_REGISTRY_DIR (default /var/lib/megacpp/registry:
#        config.yml, data/, registry.log, registry.pid), REGISTRY_WAIT_S (default 30)
# Idempotent. Debian's own service (port 5000, htpasswd auth, /var/lib/docker-registry) is not used.
# dockerd allows plain HTTP to 127.0.0.0/8 by default (InsecureRegistryCIDRs), so no daemon restart.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PORT="${MEGACPP_REGISTRY_PORT:-5000}"
DIR="${MEGACPP_REGISTRY_DIR:-/var/lib/megacpp/registry}"
WAIT_S="${REGISTRY_WAIT_S:-30}"
BINARY=/usr/bin/docker-registry
PIDFILE="$DIR/registry.pid"

usage() { echo "usage: ${0##*/} [--stop]" >&2; exit 2; }

# v2_answer: the status line of GET /v2/ on 127.0.0.1:$PORT and its API version header, ';'-joined
# (empty when nothing answers). Plain bash (/dev/tcp): no curl on a fresh machine.
v2_answer() {
  local line out=""
  { exec 3<>"/dev/tcp/127.0.0.1/$PORT"; } 2>/dev/null || return 0
  printf 'GET /v2/ HTTP/1.0\r\nHost: 127.0.0.1:%s\r\n\r\n' "$PORT" >&3
  while IFS= read -r -t 5 line <&3; do
    line="${line%$'\r'}"
    [ -z "$line" ] && break
    case "$line" in HTTP/*|[Dd]ocker-[Dd]istribution-[Aa]pi-[Vv]ersion:*) out+="$line;" ;; esac
  done
  exec 3<&- 3>&-
  printf '%s\n' "$out"
}

registry_up() {
  local answer
  answer="$(v2_answer)"
  case "$answer" in
    "HTTP/1."?" 200 "*registry/2.0*) return 0 ;;
    "") return 1 ;;
    *) die "127.0.0.1:$PORT answers but is not an open registry ($answer); choose another MEGACPP_REGISTRY_PORT" ;;
  esac
}

write_config() {
  mkdir -p "$DIR/data"
  cat >"$DIR/config.yml.tmp" <<EOF
# written by scripts/registry-up.sh
version: 0.1
log:
  level: warn
  fields:
    service: megacpp-registry
storage:
  filesystem:
    rootdirectory: $DIR/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$PORT
  headers:
    X-Content-Type-Options: [nosniff]
EOF
  mv -f "$DIR/config.yml.tmp" "$DIR/config.yml"
}

start_registry() {
  [ -x "$BINARY" ] || apt_install docker-registry
  [ -x "$BINARY" ] || die "$BINARY missing after installing docker-registry"
  write_config
  log "starting $BINARY on 127.0.0.1:$PORT (storage $DIR/data, log $DIR/registry.log)"
  setsid nohup "$BINARY" serve "$DIR/config.yml" </dev/null >>"$DIR/registry.log" 2>&1 {RESULT_FD}>&- &
  echo $! >"$PIDFILE"
  disown || true
}

wait_registry() {
  local i
  for ((i = 0; i < WAIT_S * 5; i++)); do
    registry_up && return 0
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break
    sleep 0.2
  done
  log "the registry did not answer on 127.0.0.1:$PORT; last lines of $DIR/registry.log:"
  tail -n 20 "$DIR/registry.log" >&2 || true
  return 1
}

# dockerd talks plain HTTP only to insecure registries; 127.0.0.0/8 is one by default. Say so if not.
check_insecure_default() {
  local cidrs
  cidrs="$("$DOCKER" info --format '{{json .RegistryConfig.InsecureRegistryCIDRs}}' 2>/dev/null || true)"
  case "$cidrs" in
    *'"127.0.0.0/8"'*) ;;
    "") log "dockerd not answering: cannot check that it allows plain HTTP to 127.0.0.1 (scripts/docker-up.sh)" ;;
    *) die "dockerd's insecure registries ($cidrs) lack 127.0.0.0/8: add \"127.0.0.1:$PORT\" to insecure-registries in /etc/docker/daemon.json" ;;
  esac
}

stop_registry() {
  local pid
  [ -f "$PIDFILE" ] || { log "no $PIDFILE: nothing to stop"; return 0; }
  pid="$(cat "$PIDFILE")"
  if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "docker-registry" ]; then
    kill "$pid"
    log "stopped the registry (pid $pid)"
  fi
  rm -f "$PIDFILE"
}

main() {
  stdout_is_result
  case "${1:-}" in
    "") ;;
    --stop) stop_registry; return 0 ;;
    *) usage ;;
  esac
  if registry_up; then
    log "a registry already answers on 127.0.0.1:$PORT"
  else
    start_registry
    wait_registry || die "the registry is not answering on 127.0.0.1:$PORT"
  fi
  check_insecure_default
  result "127.0.0.1:$PORT"
}

main "$@"
