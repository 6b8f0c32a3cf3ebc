#!/usr/bin/env bash
# scripts/fresh-clone.sh — the front-door proof: clone HEAD into an empty
# temporary folder, with an empty HOME and nothing beside the clone, and run
# the README's two set-up commands there (`make demo`, `make stop`, then
# `make test`). Too long for every CI run (a cold Go build cache makes the
# race build alone take many minutes on 2 cores); run it before resolving a
# front-door issue and quote its output.
#
#   scripts/fresh-clone.sh            everything cold: Go modules, Go build
#                                     cache and ClickHouse's engine are fetched
#                                     or built inside the empty HOME
#   SHARE_GO_CACHES=1 scripts/fresh-clone.sh
#                                     reuse this machine's Go module and build
#                                     caches (read from the real HOME's go env)
#                                     so only the repository is fresh
#   KEEP=1 ...                        keep the temporary folder afterwards
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
head=$(git -C "$repo" rev-parse HEAD)
top=$(mktemp -d "${TMPDIR:-/tmp}/loomwork-fresh.XXXXXX")
# The clone sits alone in its own folder: nothing beside it.
mkdir -p "$top/home" "$top/alone"
clone="$top/alone/loomwork"

share=()
if [ "${SHARE_GO_CACHES:-}" = 1 ]; then
  share=("GOMODCACHE=$(go env GOMODCACHE)" "GOCACHE=$(go env GOCACHE)")
fi
cleanup() {
  # make stop, whatever happened, so no server outlives the proof.
  if [ -d "$clone" ]; then (cd "$clone" && env -i "${envv[@]}" make stop >/dev/null 2>&1) || true; fi
  if [ "${KEEP:-}" = 1 ]; then echo "kept $top"; else rm -rf "$top"; fi
}
envv=(HOME="$top/home" PATH="$PATH" TERM="${TERM:-dumb}" USER="${USER:-root}" "${share[@]}")
trap cleanup EXIT

echo "== clone $head into $clone (HOME=$top/home, empty)"
git clone -q --no-local "$repo" "$clone"
git -C "$clone" checkout -q "$head"
ls -A "$top/alone" "$top/home"

run() {
  local what="$1"; shift
  echo "== $what"
  local t0=$SECONDS
  (cd "$clone" && env -i "${envv[@]}" "$@")
  echo "== $what: ok in $((SECONDS - t0)) s"
}
run "make demo" make demo
run "make stop" make stop
run "make test" make test
echo "== fresh clone of $head: make demo, make stop and make test all succeeded"
