#!/usr/bin/env bash
# Runs the whole test suite: static checks, then `go test -race ./...` with a
# real local ClickHouse started for the run (and stopped by pid afterwards),
# the sandbox suite again in company, and the CI recipe over the committed
# baselines (`loom-eval ci` through scripts/baselines.sh check: strict
# replay, a fresh scripted run, the gate).
#
# Whichever step fails, the run ends with the same closing lines: which step
# failed, every skipped test with its reason, and
#   tests: N passed, N failed, N skipped (N unexplained)
#   packages: N passed, N failed (N without tests)
# A skip without a reason fails the run.
#
# Environment:
#   LOOMWORK_CLICKHOUSE_DSN  use this ClickHouse instead of starting one
#   LOOMWORK_CACHE           cache dir for libchdb (default ~/.cache/loomwork)
#   TEST_FLAGS               extra flags for go test (e.g. "-run Foo")
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

# Everything this run writes goes under one fresh folder, so two runs on one
# machine never overwrite each other's logs or binaries.
work=$(mktemp -d "${TMPDIR:-/tmp}/loomwork-test.XXXXXX")
summary="$work/summary.txt"
step=""
chdir=""

finish() {
  local rc=$?
  if [ -n "$chdir" ]; then ./scripts/clickhouse.sh stop "$chdir" >/dev/null 2>&1 || true; fi
  echo
  if [ "$rc" -ne 0 ]; then
    echo "make test: FAILED at step: $step (exit $rc); logs in $work"
  else
    echo "make test: every step passed (logs in $work)"
  fi
  if [ -s "$summary" ]; then
    sed -n '/^== summary/,$p' "$summary" | tail -n +2
  else
    echo "tests: not run (the run stopped before go test)"
    echo "packages: 0 passed, 0 failed"
  fi
  exit "$rc"
}
trap finish EXIT
# Interrupted (Ctrl-C, CI's timeout): say so in the closing lines, not
# "every step passed", and exit with the signal's status.
trap 'step="$step (interrupted by SIGINT)"; exit 130' INT
trap 'step="$step (interrupted by SIGTERM)"; exit 143' TERM

step="go vet"
echo "== $step"
go vet ./...

step="gofmt"
echo "== $step"
unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '_templ.go$') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

if find web -name '*.templ' | grep -q .; then
  step="templ generate (generated code must be committed and current)"
  echo "== $step"
  go tool templ generate -path web >/dev/null
  if [ -n "$(git status --porcelain -- web | grep '_templ.go' || true)" ]; then
    echo "generated *_templ.go files are stale: run 'go tool templ generate -path web' and commit"; git status --porcelain -- web; exit 1
  fi
fi

if [ -z "${LOOMWORK_CLICKHOUSE_DSN:-}" ]; then
  step="start a local ClickHouse for the ClickHouse backend tests"
  echo "== $step"
  ./scripts/clickhouse.sh fetch
  chdir="$work/clickhouse"
  eval "$(./scripts/clickhouse.sh start "$chdir")"
  export LOOMWORK_CLICKHOUSE_DSN
  echo "ClickHouse at $LOOMWORK_CLICKHOUSE_DSN"
fi

step="go test -race ./..."
echo "== $step"
# -count=1: several suites read what lives outside the module (a ClickHouse
# server, the kernel's namespaces and cgroups, /usr/bin/python3), which Go's
# test cache cannot see change; a cached "ok" would be a claim, not a run.
# shellcheck disable=SC2086
go test -race -count=1 -timeout 25m -json ${TEST_FLAGS:-} ./... 2>&1 |
  go run ./scripts/testsummary -summary "$summary" | tee "$work/go-test.log"

step="the sandbox suite again, three times, beside the coding agent, collector and retrieval suites"
echo "== $step"
go test -race -count=3 ./agents/sandbox/ ./agents/coding/ ./collector/ ./retrieval/ 2>&1 | tee "$work/sandbox-repeat.log"

step="baselines: the CI recipe (strict replay, fresh scripted run, gate against the baseline)"
echo "== $step"
./scripts/baselines.sh check 2>&1 | tee "$work/baselines.log"
step="done"
