#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 10s).
# `go test` alone runs only the seed corpora; this explores further.
# A failure leaves its input under the package's testdata/fuzz/ to commit.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-10s}
fail=0
while IFS= read -r line; do
  file=${line%%:*}
  name=$(sed -E 's/^.*func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' <<<"$line")
  pkg="./$(dirname "$file")"
  echo "== $pkg $name ($FUZZTIME)"
  if ! go test "$pkg" -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -parallel 1; then
    fail=1
  fi
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | sort)
exit $fail
