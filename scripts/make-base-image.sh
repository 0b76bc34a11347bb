#!/usr/bin/env bash
# make-base-image.sh [amd64|arm64] [--force]
# Build a Debian forky minbase rootfs with debootstrap and `docker import` it
# as megacpp-base/debian-forky:ARCH (platform linux/ARCH). Skips the build when
# an image with the same tag and the same recipe label already exists.
# stdout: the image tag (only); debootstrap, apt and docker log to stderr.
#   env: DEBIAN_MIRROR (default: the host's apt 'debian' archive URI),
#        BASE_SUITE (default forky), BASE_WORKDIR (default /var/tmp/megacpp-base),
#        MEGACPP_DOCKER (default /usr/bin/docker)
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RECIPE_VERSION=1          # bump when the rootfs recipe below changes
SUITE="${BASE_SUITE:-forky}"
WORKDIR="${BASE_WORKDIR:-/var/tmp/megacpp-base}"
LABEL=org.megacpp.base.recipe

usage() { echo "usage: ${0##*/} [amd64|arm64] [--force]" >&2; exit 2; }

parse_args() {
  ARCH="$(dpkg --print-architecture)"; FORCE=0
  local a
  for a in "$@"; do
    case "$a" in
      amd64|arm64) ARCH="$a" ;;
      --force) FORCE=1 ;;
      -h|--help) usage ;;
      *) log "unknown argument: $a"; usage ;;
    esac
  done
  TAG="megacpp-base/debian-${SUITE}:${ARCH}"
}

# The recipe record stored as an image label; a different record means rebuild.
recipe() { printf 'v%s suite=%s arch=%s variant=minbase mirror=%s' \
  "$RECIPE_VERSION" "$SUITE" "$ARCH" "$MIRROR"; }

cached() {
  local have
  have="$("$DOCKER" image inspect -f "{{.Os}}/{{.Architecture}} {{index .Config.Labels \"$LABEL\"}}" \
    "$TAG" 2>/dev/null)" || return 1
  [ "$have" = "linux/$ARCH $(recipe)" ]
}

run_debootstrap() {
  local rootfs="$1" script=/usr/share/debootstrap/scripts/sid
  # Foreign arch: debootstrap runs its second stage through binfmt + qemu.
  if [ "$ARCH" != "$(dpkg --print-architecture)" ]; then
    bash "$(dirname "${BASH_SOURCE[0]}")/binfmt-up.sh"
  fi
  as_root debootstrap --variant=minbase --arch="$ARCH" "$SUITE" "$rootfs" "$MIRROR" "$script"
}

configure_rootfs() {
  local rootfs="$1"
  rm -f "$rootfs"/etc/apt/sources.list
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: $MIRROR
Suites: $SUITE
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  cat >"$rootfs/etc/apt/apt.conf.d/10megacpp-valid-until" <<'CONF'
// The archive's Release files for this suite may be past their Valid-Until date.
Acquire::Check-Valid-Until "false";
CONF
  cat >"$rootfs/etc/apt/apt.conf.d/10megacpp-no-recommends" <<'CONF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
CONF
}

clean_rootfs() {
  local rootfs="$1"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/archives/partial/* \
    "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/lib/dpkg/*-old \
    "$rootfs"/var/log/* "$rootfs"/tmp/* "$rootfs"/var/tmp/* "$rootfs"/debootstrap
  # Host-specific files; docker provides its own at run time.
  : >"$rootfs/etc/resolv.conf"; : >"$rootfs/etc/hostname"
  rm -f "$rootfs"/etc/machine-id; : >"$rootfs/etc/machine-id"
}

import_rootfs() {
  local rootfs="$1"
  as_root tar --numeric-owner --xattrs -C "$rootfs" -c . | "$DOCKER" import \
    --platform "linux/$ARCH" \
    --change "LABEL $LABEL=\"$(recipe)\"" \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    --message "debootstrap --variant=minbase $SUITE $ARCH" - "$TAG" >/dev/null
  local got
  got="$("$DOCKER" image inspect -f '{{.Os}}/{{.Architecture}}' "$TAG")"
  [ "$got" = "linux/$ARCH" ] || set_architecture
  got="$("$DOCKER" image inspect -f '{{.Os}}/{{.Architecture}}' "$TAG")"
  [ "$got" = "linux/$ARCH" ] || die "$TAG has platform $got, expected linux/$ARCH"
}

# set_architecture: dockerd 20.10 ignores `import --platform` (it writes the
# daemon's own GOARCH into the image config). Rewrite the config's
# architecture through `docker save` / `docker load`; load takes the config
# as given (the image ID becomes the digest of the new config).
set_architecture() {
  local dir old_id cfg variant=""
  log "dockerd recorded the wrong architecture; rewriting the image config to $ARCH"
  [ "$ARCH" = arm64 ] && variant=',"variant":"v8"'
  old_id="$("$DOCKER" image inspect -f '{{.Id}}' "$TAG")"
  dir="$(mktemp -d "$WORKDIR/save.XXXXXX")"
  "$DOCKER" save "$TAG" | tar -x -C "$dir"
  cfg="$(sed -n 's/.*"Config":"\([^"]*\)".*/\1/p' "$dir/manifest.json")"
  [ -f "$dir/$cfg" ] || die "docker save: config $cfg not found"
  sed -i "s/^{\"architecture\":\"[a-z0-9]*\"/{\"architecture\":\"$ARCH\"$variant/" "$dir/$cfg"
  "$DOCKER" image rm "$TAG" >/dev/null
  tar -C "$dir" -c . | "$DOCKER" load >/dev/null
  "$DOCKER" image rm "$old_id" >/dev/null 2>&1 || true
  rm -rf "$dir"
}

main() {
  stdout_is_result
  parse_args "$@"
  MIRROR="$(debian_mirror)" || die "no Debian mirror: set DEBIAN_MIRROR or configure apt"
  bash "$(dirname "${BASH_SOURCE[0]}")/docker-up.sh"
  if [ "$FORCE" -eq 0 ] && cached; then
    log "$TAG is up to date ($(recipe)); use --force to rebuild"; result "$TAG"; return 0
  fi
  apt_install debootstrap debian-archive-keyring
  local rootfs="$WORKDIR/$SUITE-$ARCH" t0 t1 t2
  as_root rm -rf "$rootfs"; as_root mkdir -p "$rootfs"
  t0="$(now_s)"
  log "debootstrap $SUITE/$ARCH from $MIRROR into $rootfs"
  run_debootstrap "$rootfs"
  t1="$(now_s)"
  configure_rootfs "$rootfs"; clean_rootfs "$rootfs"
  import_rootfs "$rootfs"
  t2="$(now_s)"
  as_root rm -rf "$rootfs"
  log "built $TAG: debootstrap $((t1 - t0))s, import $((t2 - t1))s, total $((t2 - t0))s"
  "$DOCKER" image ls "$TAG"
  result "$TAG"
}

main "$@"
