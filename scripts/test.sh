#!/usr/bin/env bash
# The test suite in its three tiers (docs/testing.md):
#
#   scripts/test.sh        the suite (make test, CI): vet, gofmt, generated
#                          code, then `go test ./...` — under -race where the
#                          code is concurrent (scripts/racesplit) — with a
#                          real local ClickHouse started for the run (stopped
#                          by pid afterwards); the README tour inside it runs
#                          the CI recipe (`loom-eval ci`) as written
#   scripts/test.sh fast   the developer loop (make check): gofmt and
#                          `go test -short ./...` — pure and in-process
#                          tests; a slow test says so and is left to the suite
#   scripts/test.sh soak   the long tier (make soak): the suite's scenarios
#                          at full length (LOOMWORK_LONG=1), the sandbox
#                          suite three times in company, and the ClickHouse
#                          cluster tests at full length
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
mode=${1:-suite}
case "$mode" in
suite|fast|soak) ;;
*) echo "usage: scripts/test.sh [fast|soak]" >&2; exit 2 ;;
esac
# -trimpath: build cache keys then leave out each package's folder, so the
# README tour's copy of the tree (internal/repotest, which runs `make
# install` in another folder) links from the cache instead of compiling the
# module again — 44 s of CPU idle, 147 s in a loaded run. Tests find the tree
# from their working directory (testtier.ModuleRoot), never from a source
# path, which -trimpath turns into a module path.
export GOFLAGS="${GOFLAGS:--buildvcs=false -trimpath}"

# Everything this run writes goes under one fresh folder, so two runs on one
# machine never overwrite each other's logs or binaries.
work=$(mktemp -d "${TMPDIR:-/tmp}/loomwork-test.XXXXXX")
# Fitted LSA models (retrieval's model cache) are shared by every package
# of this run, and by nothing else: a run starts with an empty cache, so it
# fits the shipped corpus once and never reads a model an earlier run left.
export LOOMWORK_LSA_CACHE="${LOOMWORK_LSA_CACHE:-$work/lsa}"
# The suite signs audit logs with a key of its own, not the user's
# (~/.config/loomwork/audit.key; docs/policy.md).
export LOOMWORK_AUDIT_KEY="$work/audit.key"
summary="$work/summary.txt"
step=""
chdir=""

finish() {
  local rc=$?
  if [ -n "${longpid:-}" ]; then kill -TERM -- "-$longpid" 2>/dev/null || true; fi
  if [ -n "$chdir" ]; then ./scripts/clickhouse.sh stop "$chdir" >/dev/null 2>&1 || true; fi
  echo
  if [ "$rc" -ne 0 ]; then
    echo "scripts/test.sh $mode: FAILED at step: $step (exit $rc) after ${SECONDS}s; logs in $work"
  else
    echo "scripts/test.sh $mode: every step passed in ${SECONDS}s (logs in $work; per-package times in $work/times.tsv)"
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

step="gofmt"
echo "== $step (at ${SECONDS}s)"
unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '_templ.go$') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

if [ "$mode" = fast ]; then
  step="go test -short ./... (the fast loop)"
  echo "== $step (at ${SECONDS}s)"
  # No -count=1 here: the loop is for a developer, and Go's cache re-runs
  # exactly the packages whose code changed.
  # shellcheck disable=SC2086
  go test -short ${TEST_FLAGS:-} -json ./... 2>&1 |
    go run ./scripts/testsummary -quiet -summary "$summary" -times "$work/times.tsv" | tee "$work/go-test.log"
  step="done"
  exit 0
fi

# Before any test builds: templ rewrites web's generated files.
if find web -name '*.templ' | grep -q .; then
  step="templ generate (generated code must be committed and current)"
  echo "== $step (at ${SECONDS}s)"
  go tool templ generate -path web >/dev/null
  if [ -n "$(git status --porcelain -- web | grep '_templ.go' || true)" ]; then
    echo "generated *_templ.go files are stale: run 'go tool templ generate -path web' and commit"; git status --porcelain -- web; exit 1
  fi
fi

step="go build ./cmd/loom-eval (once: the tests' and the README tour's builds of it then come from Go's cache)"
echo "== $step (at ${SECONDS}s)"
mkdir -p "$work/bin"
go build -o "$work/bin/loom-eval" ./cmd/loom-eval

if [ -z "${LOOMWORK_CLICKHOUSE_DSN:-}" ]; then
  step="start a local ClickHouse for the ClickHouse backend tests"
  echo "== $step (at ${SECONDS}s)"
  ./scripts/clickhouse.sh fetch
  chdir="$work/clickhouse"
  eval "$(LOOM_EVAL="$work/bin/loom-eval" ./scripts/clickhouse.sh start "$chdir")"
  export LOOMWORK_CLICKHOUSE_DSN
  echo "ClickHouse at $LOOMWORK_CLICKHOUSE_DSN"
fi

# -count=1: several suites read what lives outside the module (a ClickHouse
# server, the kernel's namespaces and cgroups, /usr/bin/python3), which Go's
# test cache cannot see change; a cached "ok" would be a claim, not a run.
timeout=25m
# A -race binary sleeps 1 s on a clean exit by default (atexit_sleep_ms),
# for goroutines still running to report; every test binary and every
# race-built child a test starts paid it. Races are reported when they
# happen, and each test still fails on its own.
export GORACE="${GORACE:-atexit_sleep_ms=0}"
if [ "$mode" = soak ]; then
  export LOOMWORK_LONG=1 LOOMWORK_CLUSTER_TEST=full
  timeout=120m
fi

# Race where there is concurrency (docs/testing.md): scripts/racesplit
# puts every package whose own code is concurrent under -race, less its
# tests marked testtier.NoRace (each names the test that race-checks the
# same code); everything else runs without the detector, which costs
# those packages five- to ten-fold and finds nothing in them. Every test
# runs once.
step="divide the packages: race where there is concurrency (scripts/racesplit)"
echo "== $step (at ${SECONDS}s)"
split=$(go run ./scripts/racesplit ./...)
eval "$split"
# The three longest packages, none concurrent — the README tour, the
# reliability suite (minutes of child processes and timed outages) and
# the CLI's — start first, in the background, so they overlap the rest.
long="github.com/loomwork/loomwork/internal/repotest github.com/loomwork/loomwork/internal/reliability github.com/loomwork/loomwork/cmd/loom-eval"
plain=""
for p in $PLAIN_PKGS; do case " $long " in *" $p "*) ;; *) plain="$plain $p" ;; esac; done
export LOOMWORK_RACE_SPLIT=1
echo "under -race: $(wc -w <<<"$RACE_PKGS") packages ($(tr '|' '\n' <<<"$MARKED_RUN" | grep -c .) marked tests left to the plain pass); without: $(wc -w <<<"$plain $long") packages"

# pass NAME GO-TEST-ARGS...: one go test invocation; its events go to
# $work/NAME.json, a line per package (and a failing package's output) to
# the terminal.
pass() {
  local name=$1; shift
  # shellcheck disable=SC2086
  go test -count=1 -timeout "$timeout" -json ${TEST_FLAGS:-} "$@" 2>&1 | tee "$work/$name.json" |
    go run ./scripts/testsummary -quiet -summary "$work/$name.summary" >"$work/$name.log"
}
step="go test: the README tour, the reliability suite and the CLI (background, without -race)"
echo "== $step (at ${SECONDS}s)"
# Its own process group, so a run that stops early stops it too (finish).
export -f pass
export work timeout
# shellcheck disable=SC2086
# -p 3: all three at once. The reliability suite spends most of its time
# waiting out timed outages, so running it beside the other two costs
# little CPU, and in sequence after the CLI's it was the suite's longest
# path (447 s + 425 s).
setsid bash -c "pass long -p 3 $long; echo \$? >'$work/long.rc'" </dev/null &
longpid=$!

step="go vet"
echo "== $step (at ${SECONDS}s)"
go vet ./...

step="go test: -race for packages with concurrency of their own; beside it, packages without concurrency and the marked tests"
echo "== $step (at ${SECONDS}s)"
: >"$work/race.log"; : >"$work/plain.log"; : >"$work/marked.log"
# All at once, not the plain and marked passes after the race pass: the
# race pass ends on a few packages waiting on servers and child processes
# (ClickHouse DDL, sandboxes) with cores to spare, and the plain pass's
# work fits there instead of after it (issue 36: make test over 15 min).
# Each pass's failures are counted by the summary below: one failing must
# not stop the others (set -e would end the group at the first).
# shellcheck disable=SC2086
{
  pass race -race -skip "$RACE_SKIP" $RACE_PKGS || true &
  { pass plain $plain || true; pass marked -run "$MARKED_RUN" $MARKED_PKGS || true; } &
  wait
} & passpid=$!
tail -n +1 -q -f "$work/race.log" "$work/plain.log" "$work/marked.log" --pid=$passpid || true
wait $passpid || true
step="go test: waiting for the README tour, the reliability suite and the CLI"
echo "== $step (at ${SECONDS}s)"
wait $longpid || true
longpid=""
cat "$work/long.log"

step="go test (summary of the passes)"
cat "$work/long.json" "$work/race.json" "$work/plain.json" "$work/marked.json" |
  go run ./scripts/testsummary -quiet -summary "$summary" -times "$work/times.tsv" >/dev/null
if [ "$mode" = soak ]; then
  step="the sandbox suite again, three times, beside the coding agent, collector and retrieval suites"
  echo "== $step (at ${SECONDS}s)"
  go test -race -count=3 ./agents/sandbox/ ./agents/coding/ ./collector/ ./retrieval/ 2>&1 | tee "$work/sandbox-repeat.log"
fi
step="done"
