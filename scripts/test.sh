#!/usr/bin/env bash
# Runs the whole test suite: static checks, then `go test -race ./...` with a
# real local ClickHouse started for the run (and stopped by pid afterwards).
#
# Environment:
#   LOOMWORK_CLICKHOUSE_DSN  use this ClickHouse instead of starting one
#   LOOMWORK_CACHE           cache dir for libchdb and binaries (default ~/.cache/loomwork)
#   TEST_FLAGS               extra flags for go test (e.g. "-run Foo")
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

echo "== go vet"
go vet ./...

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '_templ.go$') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

if ls web/*.templ >/dev/null 2>&1 || find web -name '*.templ' | grep -q .; then
  echo "== templ generate (generated code must be committed and current)"
  go tool templ generate -path web >/dev/null
  if [ -n "$(git status --porcelain -- web | grep '_templ.go' || true)" ]; then
    echo "generated *_templ.go files are stale: run 'go tool templ generate -path web' and commit"; git status --porcelain -- web; exit 1
  fi
fi

chdir=""
cleanup() {
  if [ -n "$chdir" ]; then ./scripts/clickhouse.sh stop "$chdir" || true; rm -rf "$chdir"; fi
}
trap cleanup EXIT

if [ -z "${LOOMWORK_CLICKHOUSE_DSN:-}" ]; then
  echo "== starting a local ClickHouse for the ClickHouse backend tests"
  ./scripts/clickhouse.sh fetch
  chdir=$(mktemp -d /tmp/loomwork-ch.XXXXXX)
  eval "$(./scripts/clickhouse.sh start "$chdir")"
  export LOOMWORK_CLICKHOUSE_DSN
  echo "ClickHouse at $LOOMWORK_CLICKHOUSE_DSN"
fi

echo "== go test -race ./..."
# shellcheck disable=SC2086
go test -race -timeout 25m ${TEST_FLAGS:-} ./... 2>&1 | tee /tmp/loomwork-test.log
rc=${PIPESTATUS[0]}
pass=$(grep -c '^ok ' /tmp/loomwork-test.log || true)
fail=$(grep -cE '^FAIL[[:space:]]+github' /tmp/loomwork-test.log || true)
if [ "$rc" -ne 0 ]; then echo "packages: $pass passed, $fail failed"; exit "$rc"; fi

echo "== sandbox suite again, three times, beside the coding agent, collector and retrieval suites (issue 5: it must hold up repeatedly and in company)"
go test -race -count=3 ./agents/sandbox/ ./agents/coding/ ./collector/ ./retrieval/

echo "== baselines: replay the committed journals, score against the baseline, gate"
./scripts/baselines.sh check

cleanup
chdir=""
# The closing line CI reads: Go test packages that passed and failed.
echo "packages: $pass passed, $fail failed"
