#!/usr/bin/env bash
# Regenerates every performance number quoted in docs/ with one command:
# each benchmark below is the one its doc cites. Output goes to
# bench-results/<area>.txt (git-ignored) and to the terminal.
#
# Needs root (sandbox) and a local ClickHouse for the ClickHouse rows: the
# script starts one with scripts/clickhouse.sh unless LOOMWORK_CLICKHOUSE_DSN
# is set. Run it on a quiet machine: the numbers are wall-clock.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
out=bench-results
mkdir -p "$out"
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/machine.txt"

chdir=""
cleanup() { if [ -n "$chdir" ]; then ./scripts/clickhouse.sh stop "$chdir" || true; rm -rf "$chdir"; fi; }
trap cleanup EXIT
if [ -z "${LOOMWORK_CLICKHOUSE_DSN:-}" ]; then
  ./scripts/clickhouse.sh fetch
  chdir=$(mktemp -d /tmp/loomwork-bench-ch.XXXXXX)
  eval "$(./scripts/clickhouse.sh start "$chdir")"
  export LOOMWORK_CLICKHOUSE_DSN LOOMWORK_CLICKHOUSE_PID
fi

run() { # area, then the command
  local area=$1; shift
  echo "== $area: $*" | tee "$out/$area.txt"
  "$@" 2>&1 | tee -a "$out/$area.txt"
}

go test -c -o /tmp/loomwork-collector.test ./collector
run ingest-sqlite     sh -c 'cd collector && /tmp/loomwork-collector.test -test.run "^$" -test.bench "BenchmarkIngest/sqlite" -test.benchtime 1000x'
for senders in 4 16 64 128; do
  run ingest-clickhouse-$senders sh -c "cd collector && /tmp/loomwork-collector.test -test.run '^\$' -test.bench BenchmarkIngest/clickhouse -test.benchtime 2000x -ingest.senders $senders"
done
run ingest-clickhouse-10M sh -c "cd collector && /tmp/loomwork-collector.test -test.run '^\$' -test.bench BenchmarkIngest/clickhouse -test.benchtime 20000x -ingest.senders 64"
run store-sqlite      go test ./store/sqlite/ -run '^$' -bench 'WriteSpans|ListTraces' -benchtime 100x
run store-sqlite-bigtrace go test ./store/sqlite/ -run '^$' -bench 'WriteOneBigTrace' -benchtime 1x -timeout 30m
run store-clickhouse  go test ./store/clickhouse -run '^$' -bench 'BenchmarkWriteSpans' -benchtime 10x
run store-clickhouse-reads go test ./store/clickhouse -run '^$' -bench 'BenchmarkGetTrace|BenchmarkListTraces' -benchtime 3s
run search-sqlite     go test ./store/sqlite/ -run '^$' -bench 'Search100k' -benchtime 5x -timeout 30m
run search-clickhouse go test ./store/clickhouse -run '^$' -bench 'Search100k' -benchtime 3x -timeout 40m
run scorer            go test ./scorer/rollup ./scorer -run '^$' -bench . -benchtime 5x
run web               go test ./web -run '^$' -bench 'TracePage(50k|100k)' -benchtime 5x -benchmem
run web-list          go test ./web -run '^$' -bench 'TraceList100kTraces' -benchtime 20x -timeout 40m
run sandbox           go test ./agents/sandbox/ -run '^$' -bench . -benchtime 200x
run retrieval         go test ./retrieval/ -run '^$' -bench 'Index|LSA|Search' -benchtime 5x
run gateway           go test ./agents/gateway/... -run '^$' -bench . -benchtime 2000x
run journal           go test ./replay/... -run '^$' -bench . -benchtime 100x
run policy            go test ./agents/policy -run '^$' -bench . -benchtime 2s -benchmem
run policy-opa        sh -c 'cd scripts/opabench && go test -run . -bench . -benchtime 2s'
run security-eval     go run ./cmd/loom-eval security-eval --doc docs/policy.md
run context           go run ./cmd/loom-eval context --format markdown --out docs/context.md
run calibration       ./scripts/calibration.sh
echo "results in $out/"
