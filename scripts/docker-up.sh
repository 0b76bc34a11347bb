#!/usr/bin/env bash
# docker-up.sh: make sure Debian's docker.io (20.10; and docker-cli where it is apart) is installed and dockerd
# answers. Idempotent; safe in CI (no stdin, fresh machine) and interactively.
#   env: MEGACPP_DOCKER (default /usr/bin/docker),
#        DOCKERD_LOG (default /var/log/megacpp-dockerd.log),
#        DOCKERD_WAIT_S (default 60)
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

DOCKERD_LOG="${DOCKERD_LOG:-/var/log/megacpp-dockerd.log}"
DOCKERD_WAIT_S="${DOCKERD_WAIT_S:-60}"

PIDFILE=/var/run/docker.pid

daemon_up() { "$DOCKER" info >/dev/null 2>&1; }
dockerd_running() { [ -f "$PIDFILE" ] && as_root kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

start_dockerd() {
  local dockerd
  dockerd="$(command -v dockerd || true)"
  [ -n "$dockerd" ] || die "dockerd not found after installing docker.io"
  log "starting $dockerd (log: $DOCKERD_LOG)"
  as_root mkdir -p "$(dirname "$DOCKERD_LOG")"
  # Detach fully: new session, no stdin, output to the log, survives this shell.
  as_root setsid nohup "$dockerd" </dev/null >>"$DOCKERD_LOG" 2>&1 {RESULT_FD}>&- &
  disown || true
}

wait_daemon() {
  local i
  for ((i = 0; i < DOCKERD_WAIT_S; i++)); do
    daemon_up && return 0
    sleep 1
  done
  log "dockerd did not answer within ${DOCKERD_WAIT_S}s; last lines of $DOCKERD_LOG:"
  tail -n 30 "$DOCKERD_LOG" >&2 || true
  return 1
}

main() {
  stdout_is_result   # no result: stdout stays empty
  [ -x "$DOCKER" ] || apt_install docker.io
  # Debian >= trixie ships the client apart (docker-cli, only a Recommends of docker.io).
  if [ ! -x "$DOCKER" ] && apt_available docker-cli; then apt_install docker-cli; fi
  [ -x "$DOCKER" ] || die "$DOCKER missing after installing docker.io"
  if daemon_up; then
    log "dockerd already answering"
  else
    if dockerd_running; then
      log "dockerd is running but not answering yet; waiting"
    else
      as_root rm -f "$PIDFILE"   # a stale pid file makes dockerd refuse to start
      start_dockerd
    fi
    wait_daemon || die "dockerd is not answering"
  fi
  "$DOCKER" version --format 'docker client {{.Client.Version}}, server {{.Server.Version}}' >&2
}

main "$@"
