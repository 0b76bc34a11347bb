#!/usr/bin/env bash
# binfmt-up.sh: register qemu-user-static for aarch64 so arm64 binaries (and
# arm64 containers) run on this x86_64 host. Idempotent.
# The Debian qemu-user-static entries carry the F (fix-binary) flag: the
# kernel opens the interpreter at registration time, so it works inside
# containers and chroots that do not contain /usr/libexec/qemu-binfmt/*.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

BINFMT=/proc/sys/fs/binfmt_misc
ENTRY="$BINFMT/qemu-aarch64"

main() {
  stdout_is_result   # no result: stdout stays empty
  if [ "$(uname -m)" = aarch64 ]; then log "native aarch64 host; nothing to do"; return 0; fi
  apt_install qemu-user-static binfmt-support
  if [ ! -f "$BINFMT/register" ]; then
    log "mounting binfmt_misc"
    as_root mount -t binfmt_misc binfmt_misc "$BINFMT"
  fi
  if [ ! -f "$ENTRY" ]; then
    as_root update-binfmts --import qemu-aarch64 2>/dev/null || true
    as_root update-binfmts --enable qemu-aarch64
  fi
  grep -q '^enabled' "$ENTRY" || as_root update-binfmts --enable qemu-aarch64
  grep -q '^enabled' "$ENTRY" || die "qemu-aarch64 binfmt entry is not enabled"
  grep -q '^flags:.*F' "$ENTRY" \
    || log "warning: qemu-aarch64 lacks the F flag; arm64 containers will not find the interpreter"
  log "qemu-aarch64: $(grep -E '^(interpreter|flags)' "$ENTRY" | tr '\n' ' ')"
  verify
}

# verify: run a real aarch64 binary: `uname -m` in the arm64 base image when
# it exists (proves the F flag works inside containers), else arch-test.
verify() {
  local img=megacpp-base/debian-forky:arm64 out
  if [ "$("$DOCKER" image inspect -f '{{.Architecture}}' "$img" 2>/dev/null)" = arm64 ]; then
    out="$("$DOCKER" run --rm --platform linux/arm64 "$img" uname -m)"
    [ "$out" = aarch64 ] || die "arm64 container reports '$out', expected aarch64"
    log "verified: $img runs (uname -m = $out)"
  elif command -v arch-test >/dev/null 2>&1; then
    arch-test arm64 >/dev/null || die "arch-test: arm64 binaries do not execute"
    log "verified: arch-test arm64 ok"
  else
    log "binfmt registered; no arm64 image or arch-test to verify with yet"
  fi
}

main "$@"
