#!/usr/bin/env bash
# smoke-source.sh [--print-commit | --serve | --stop]
# Publish sources/megacpp-smoke-ext/ as a bare git repository with a DETERMINISTIC commit
# (fixed author/committer/dates/message, no signing, sorted paths, every file mode 100644, no
# user or system git config), so the SHA pinned in stack.yaml (sources.megacpp_smoke_ext.commit)
# can be reproduced anywhere. The repository is written to
#   ${MEGACPP_GIT_ROOT:-/var/lib/megacpp/git}/megacpp-smoke-ext.git
# with uploadpack.allowAnySHA1InWant, so `megacpp-env checkout` can fetch the commit by SHA.
#   (no option)     create/update the repository, print the commit
#   --print-commit  print the commit only (built in a temporary directory; no side effects)
#   --serve         create/update, then serve it read-only with `git daemon` on
#                   git://127.0.0.1:${MEGACPP_GIT_PORT:-9418}/megacpp-smoke-ext.git (detached;
#                   pid in $MEGACPP_GIT_ROOT/git-daemon.pid); a daemon already serving it is kept
#   --stop          stop the daemon started by --serve
# stdout: the commit (only); logs go to stderr. Idempotent. Changing any file under sources/megacpp-smoke-ext/ changes the commit: update the
# pin in stack.yaml (tests/test_checkout.py fails until you do).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC_DIR="${MEGACPP_SMOKE_SRC:-$REPO_ROOT/sources/megacpp-smoke-ext}"
GIT_ROOT="${MEGACPP_GIT_ROOT:-/var/lib/megacpp/git}"
PORT="${MEGACPP_GIT_PORT:-9418}"
NAME=megacpp-smoke-ext.git
PIDFILE="$GIT_ROOT/git-daemon.pid"
STAMP="2025-01-01T00:00:00+0000"
MESSAGE="megacpp-smoke-ext: the smoke target's C extension source"

usage() { echo "usage: ${0##*/} [--print-commit | --serve | --stop]" >&2; exit 2; }

# git with no user/system configuration and no repository-selecting variables from the caller.
git_clean() {
  env -u GIT_DIR -u GIT_WORK_TREE -u GIT_INDEX_FILE -u GIT_OBJECT_DIRECTORY \
    GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null LC_ALL=C git "$@"
}

# The files of the source tree, relative and sorted; build outputs left out.
list_files() {
  (cd "$SRC_DIR" && find . \( -name .git -o -name __pycache__ -o -name build -o -name dist \
      -o -name '*.egg-info' \) -prune -o -type f ! -name '*.pyc' ! -name '*.so' ! -name '*.o' -print) \
    | sed 's|^\./||' | LC_ALL=C sort
}

# make_commit BARE_REPO: write the tree and the commit into BARE_REPO; print the commit SHA.
make_commit() {
  local repo="$1" index tree commit f sha
  [ -d "$SRC_DIR" ] || die "no source directory $SRC_DIR"
  [ -f "$repo/HEAD" ] || git_clean init --quiet --bare -b main "$repo" >/dev/null
  index="$(mktemp -u "${TMPDIR:-/tmp}/megacpp-smoke-index.XXXXXX")"
  while IFS= read -r f; do
    sha="$(git_clean --git-dir="$repo" hash-object -w --no-filters -- "$SRC_DIR/$f")"
    printf '100644 %s\t%s\n' "$sha" "$f"
  done < <(list_files) | GIT_INDEX_FILE="$index" git_clean --git-dir="$repo" update-index --add --index-info
  tree="$(GIT_INDEX_FILE="$index" git_clean --git-dir="$repo" write-tree)"
  rm -f "$index"
  commit="$(printf '%s\n' "$MESSAGE" | \
    GIT_AUTHOR_NAME=megacpp-env GIT_AUTHOR_EMAIL=megacpp-env@localhost GIT_AUTHOR_DATE="$STAMP" \
    GIT_COMMITTER_NAME=megacpp-env GIT_COMMITTER_EMAIL=megacpp-env@localhost GIT_COMMITTER_DATE="$STAMP" \
    git_clean --git-dir="$repo" commit-tree --no-gpg-sign "$tree")"
  git_clean --git-dir="$repo" update-ref refs/heads/main "$commit"
  git_clean --git-dir="$repo" symbolic-ref HEAD refs/heads/main
  git_clean --git-dir="$repo" config uploadpack.allowAnySHA1InWant true
  git_clean --git-dir="$repo" config uploadpack.allowReachableSHA1InWant true
  printf '%s\n' "$commit"
}

served_commit() {
  git_clean ls-remote "git://127.0.0.1:$PORT/$NAME" refs/heads/main 2>/dev/null | cut -f1
}

serve() {
  local commit="$1" i
  if [ "$(served_commit)" = "$commit" ]; then log "already serving $commit on port $PORT"; return 0; fi
  log "serving $GIT_ROOT on git://127.0.0.1:$PORT/"
  git_clean daemon --export-all --base-path="$GIT_ROOT" --listen=127.0.0.1 --port="$PORT" \
    --reuseaddr --detach --pid-file="$PIDFILE" "$GIT_ROOT" {RESULT_FD}>&-
  for i in $(seq 1 50); do
    [ "$(served_commit)" = "$commit" ] && return 0
    sleep 0.2
  done
  die "git daemon on port $PORT does not serve $commit (after $i tries)"
}

stop() {
  [ -f "$PIDFILE" ] || { log "no $PIDFILE; nothing to stop"; return 0; }
  kill "$(cat "$PIDFILE")" 2>/dev/null || true
  rm -f "$PIDFILE"
}

main() {
  local mode="${1:-}" tmp commit
  stdout_is_result
  [ "$#" -le 1 ] || usage
  case "$mode" in
    --print-commit)
      tmp="$(mktemp -d)"
      commit="$(make_commit "$tmp/$NAME")"
      rm -rf "$tmp"
      result "$commit" ;;
    ""|--serve)
      mkdir -p "$GIT_ROOT"
      commit="$(make_commit "$GIT_ROOT/$NAME")"
      [ "$mode" = --serve ] && serve "$commit"
      result "$commit" ;;
    --stop) stop ;;
    *) usage ;;
  esac
}

main "$@"
