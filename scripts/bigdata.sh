#!/usr/bin/env bash
# scripts/bigdata.sh — the one-command big-data benchmark of issue 36
# (docs/bench-bigdata.md): loads 100,000 10-span agent traces and a
# 100,000- and a 1,000,000-span trace into each store (cached between runs
# in -dir, default ${LOOMWORK_CACHE:-~/.cache/loomwork}/bigdata), times every
# list query and the list page, runs the trace page's BenchmarkBigTrace, and
# writes docs/bench-bigdata.md. ClickHouse: LOOMWORK_CLICKHOUSE_DSN, or a
# server it starts with scripts/clickhouse.sh in the cache directory.
# Arguments go to the command (go run ./scripts/bigdata -h lists them).
set -euo pipefail
cd "$(dirname "$0")/bigdata"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
exec go run . "$@"
