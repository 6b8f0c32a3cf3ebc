#!/usr/bin/env bash
# scripts/coverage.sh — statement coverage of the whole test suite, to
# compare two commits (issue 37 asked that the faster suite cover no less
# than the slow one did). Runs every package's tests once, without -race,
# with `go test -coverprofile` against a local ClickHouse (as make test
# does), and prints the total and each package's own coverage.
#
#   scripts/coverage.sh            this tree
#   scripts/coverage.sh OUT.txt    also write the per-package table to OUT.txt
#
# It works on older trees too (it needs only scripts/clickhouse.sh): copy it
# into a checkout of the commit to compare with. Coverage is in-process: a
# binary a test builds and runs (the README tour, the reliability suite) is
# not counted, in either tree. About as long as make test's non-race passes.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
work=$(mktemp -d "${TMPDIR:-/tmp}/loomwork-cover.XXXXXX")
chdir=""
finish() {
  if [ -n "$chdir" ]; then ./scripts/clickhouse.sh stop "$chdir" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap finish EXIT
export LOOMWORK_LSA_CACHE="$work/lsa" LOOMWORK_AUDIT_KEY="$work/audit.key"
mkdir -p "$work/bin"
go build -o "$work/bin/loom-eval" ./cmd/loom-eval
if [ -z "${LOOMWORK_CLICKHOUSE_DSN:-}" ]; then
  ./scripts/clickhouse.sh fetch >/dev/null
  chdir="$work/clickhouse"
  eval "$(LOOM_EVAL="$work/bin/loom-eval" ./scripts/clickhouse.sh start "$chdir")"
  export LOOMWORK_CLICKHOUSE_DSN
fi
echo "== go test -count=1 -coverprofile ./... (at ${SECONDS}s; log $work/test.log)"
status=0
go test -count=1 -timeout 45m -coverprofile="$work/cover.out" ./... >"$work/test.log" 2>&1 || status=$?
table=$(grep -E '^(ok|FAIL|---|\?)\s' "$work/test.log" | grep -E 'coverage:|FAIL' || true)
echo "$table" | sed -E 's/\t+/ /g'
total=$(go tool cover -func="$work/cover.out" | tail -1 | awk '{print $NF}')
echo "== total statement coverage: $total (go test exit $status, ${SECONDS}s)"
if [ $# -ge 1 ]; then
  { echo "$table"; echo "total $total"; } >"$1"
fi
grep -E '^--- FAIL' "$work/test.log" | head -20 || true
exit "$status"
