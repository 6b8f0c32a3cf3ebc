#!/usr/bin/env bash
# `make demo`: start `loom-eval serve` on the embedded store (no server to
# install), send a realistic agent trace through OTLP with the OpenTelemetry
# SDK, and print where to look. `make stop` (this script with "stop") stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/loom-eval}
DIR=.loomwork
PIDFILE=$DIR/serve.pid
UI=${LOOMWORK_UI_ADDR:-127.0.0.1:8080}
GRPC=${LOOMWORK_GRPC_ADDR:-127.0.0.1:4317}
HTTP=${LOOMWORK_HTTP_ADDR:-127.0.0.1:4318}
mkdir -p "$DIR"

stop() {
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    kill "$(cat "$PIDFILE")"
    for _ in $(seq 50); do kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break; sleep 0.1; done
    echo "stopped loom-eval serve (pid $(cat "$PIDFILE"))"
  fi
  rm -f "$PIDFILE"
}
if [ "${1:-}" = stop ]; then stop; exit 0; fi

[ -x "$BIN" ] || go build -o "$BIN" ./cmd/loom-eval
stop
"$BIN" serve --store "$DIR/traces.db" --grpc-addr "$GRPC" --http-addr "$HTTP" --ui-addr "$UI" \
  --runs-dir baselines/journals --reports-dir baselines >"$DIR/serve.log" 2>&1 &
echo $! >"$PIDFILE"
for i in $(seq 100); do
  if curl -fsS "http://$UI/healthz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then echo "loom-eval serve exited; its log:"; cat "$DIR/serve.log"; exit 1; fi
  sleep 0.1
  [ "$i" = 100 ] && { echo "loom-eval serve did not become ready in 10 s; log:"; cat "$DIR/serve.log"; exit 1; }
done
echo "loom-eval serve is running (pid $(cat "$PIDFILE")): OTLP gRPC $GRPC, OTLP HTTP $HTTP, UI http://$UI/"
echo
"$BIN" demo --endpoint "$GRPC" | tee "$DIR/demo.out"
trace=$(grep -oE '[0-9a-f]{32}' "$DIR/demo.out" | head -1)
echo
echo "== loom-eval traces list --store $DIR/traces.db"
"$BIN" traces list --store "$DIR/traces.db"
echo
echo "== loom-eval traces get $trace --store $DIR/traces.db"
"$BIN" traces get "$trace" --store "$DIR/traces.db"
echo
echo "Look here:  http://$UI/traces/$trace   (web UI: the trace)"
echo "            http://$UI/runs  and  http://$UI/reports   (the committed baseline journals and report)"
echo "            loom-eval traces get $trace"
echo "Stop the server with: make stop"
