#!/usr/bin/env bash
# scripts/mutations.sh — the mutation proof of the CI recipe (docs/scoring.md,
# "Mutation proof"). Copies the repository's files (tracked and untracked,
# not ignored; as they are in the working tree) into a scratch folder, checks
# that `loom-eval ci` passes there unmutated, then applies each deliberate
# regression of scripts/mutations/NAME.patch one at a time, builds,
# runs `loom-eval ci --json` and reverts the patch. Each run starts from an
# empty BM25 index cache, so no mutation is hidden behind a cached index.
# Finally it writes the table (mutation, whether the recipe failed, which
# part caught it, the cases it named) into docs/scoring.md between
# <!-- mutations:begin --> and <!-- mutations:end --> — the only file of this
# tree it writes.
#
#   scripts/mutations.sh              every patch
#   scripts/mutations.sh NAME...      only these (the table is then not written)
#   KEEP=1 scripts/mutations.sh       keep the scratch folder (per-mutation JSON and stderr)
#
# Needs: Go, git (for git apply) and root (the coding agent's sandbox).
# Takes about a minute per mutation on 2 cores (a build and the recipe).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
top=$(mktemp -d "${TMPDIR:-/tmp}/loomwork-mutations.XXXXXX")
tree="$top/tree"
results="$top/results"
mkdir -p "$tree" "$results"
cleanup() { if [ "${KEEP:-}" = 1 ]; then echo "kept $top"; else rm -rf "$top"; fi; }
trap cleanup EXIT

names=()
if [ $# -gt 0 ]; then
  for n in "$@"; do
    [ -f "scripts/mutations/$n.patch" ] || { echo "mutations: no scripts/mutations/$n.patch" >&2; exit 2; }
    names+=("$n")
  done
else
  for p in scripts/mutations/*.patch; do names+=("$(basename "$p" .patch)"); done
fi

echo "== copy the repository into $tree"
git ls-files -z --cached --others --exclude-standard |
  tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$tree"

# run NAME: build the scratch tree and run the recipe; the JSON report goes
# to results/NAME.json, stderr to NAME.err, the exit code to NAME.rc.
run() {
  local name=$1 start end rc
  rm -rf "$tree/.loomwork"
  (cd "$tree" && go build -o "$top/loom-eval" ./cmd/loom-eval)
  start=$(date +%s)
  set +e
  (cd "$tree" && "$top/loom-eval" ci --json >"$results/$name.json" 2>"$results/$name.err")
  rc=$?
  set -e
  end=$(date +%s)
  echo "$rc" >"$results/$name.rc"
  echo "$name: exit $rc ($((end - start)) s)"
}

echo "== unmutated"
run none
if [ "$(cat "$results/none.rc")" != 0 ]; then
  echo "mutations: the recipe fails on the unmutated tree; fix that first:" >&2
  tail -n 20 "$results/none.err" >&2
  exit 1
fi

for n in "${names[@]}"; do
  echo "== $n"
  (cd "$tree" && git apply "$repo/scripts/mutations/$n.patch")
  run "$n"
  (cd "$tree" && git apply -R "$repo/scripts/mutations/$n.patch")
done

args=(--results "$results" --patches scripts/mutations)
if [ $# -eq 0 ]; then args+=(--doc docs/scoring.md); fi
go run ./scripts/mutationtable "${args[@]}" "${names[@]}"
