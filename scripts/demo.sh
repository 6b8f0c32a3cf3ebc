#!/usr/bin/env bash
# `make demo`: start `loom-eval serve` on the embedded store (no server to
# install), send a realistic agent trace through OTLP with the OpenTelemetry
# SDK, and print where to look. `make stop` (this script with "stop") stops it.
#
# Ports: serve listens where $LOOMWORK_GRPC_ADDR, $LOOMWORK_HTTP_ADDR and
# $LOOMWORK_UI_ADDR say (default 127.0.0.1:4317, 127.0.0.1:4318 and
# 127.0.0.1:8080; port 0 picks a free one). When a port is taken, serve exits
# at once naming it, and so does this script. The addresses printed and used
# are the ones serve reports in its ready file, .loomwork/serve.ready.json.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/loom-eval}
DIR=.loomwork
PIDFILE=$DIR/serve.pid
READY=$DIR/serve.ready.json
LOG=$DIR/serve.log
mkdir -p "$DIR"

# ours PID: the pid is alive and is a loom-eval process (not a stranger that
# reused the number of one that died).
ours() {
  [ "$(ps -o comm= -p "$1" 2>/dev/null || true)" = loom-eval ]
}

stop() {
  if [ -f "$PIDFILE" ]; then
    local pid
    pid=$(cat "$PIDFILE")
    if ours "$pid"; then
      kill "$pid"
      for _ in $(seq 100); do ours "$pid" || break; sleep 0.1; done
      if ours "$pid"; then
        echo "loom-eval serve (pid $pid) did not stop within 10 s of SIGTERM" >&2
        return 1
      fi
      echo "stopped loom-eval serve (pid $pid)"
    fi
  fi
  rm -f "$PIDFILE" "$READY"
}
if [ "${1:-}" = stop ]; then stop; exit 0; fi

[ -x "$BIN" ] || go build -o "$BIN" ./cmd/loom-eval
stop
"$BIN" serve --store "$DIR/traces.db" --ready-file "$READY" \
  --runs-dir baselines/journals --reports-dir baselines --ablations-dir baselines/ablation \
  >"$LOG" 2>&1 &
pid=$!
echo "$pid" >"$PIDFILE"

# failed_start STATUS WHAT: say what happened with serve's own output, leave
# nothing running, and exit with STATUS.
failed_start() {
  echo "make demo: loom-eval serve $2. Its output ($LOG):" >&2
  sed 's/^/  /' "$LOG" >&2
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    wait "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDFILE" "$READY"
  exit "$1"
}

# Ready when serve has written its ready file (every listener bound, the
# store open); failed when it exits first.
for _ in $(seq 300); do
  [ -f "$READY" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then
    rc=0
    wait "$pid" || rc=$?
    [ "$rc" -ne 0 ] || rc=1
    failed_start "$rc" "exited with status $rc before it was ready"
  fi
  sleep 0.05
done
[ -f "$READY" ] || failed_start 1 "was not ready after 15 s"

# ready_field KEY: a value of the ready file (serve writes one key a line).
ready_field() {
  sed -n "s/^  \"$1\": \"\([^\"]*\)\",\{0,1\}\$/\1/p" "$READY"
}
GRPC=$(ready_field grpc_addr)
HTTP=$(ready_field http_addr)
UI=$(ready_field ui_url)
echo "loom-eval serve is running (pid $pid); its ready file $READY says:"
echo "  OTLP gRPC  $GRPC"
echo "  OTLP HTTP  $HTTP"
echo "  UI / API   ${UI:-off}"
echo

send=(--endpoint "$GRPC")
[ "$GRPC" != off ] || send=(--http --endpoint "$HTTP")
[ -z "$UI" ] || send+=(--ui "$UI")
"$BIN" demo "${send[@]}" | tee "$DIR/demo.out"
trace=$(grep -oE '[0-9a-f]{32}' "$DIR/demo.out" | head -1)
echo
echo "== loom-eval traces list --store $DIR/traces.db"
"$BIN" traces list --store "$DIR/traces.db"
echo
echo "== loom-eval traces get $trace --store $DIR/traces.db"
"$BIN" traces get "$trace" --store "$DIR/traces.db"
echo
if [ -n "$UI" ]; then
  echo "Look here:  $UI/traces/$trace   (web UI: the trace)"
  echo "            $UI/runs  $UI/reports  $UI/ablations"
  echo "            (the committed baseline journals, score report and retrieval ablation)"
else
  echo "The UI is off (LOOMWORK_UI_ADDR=off); look with:"
fi
# $BIN, not loom-eval: make install has not put it on the PATH yet.
echo "            $BIN traces get $trace   (loom-eval traces get … once make install has put it on your PATH)"
echo
echo "The server keeps running; stop it with: make stop"
echo "(the README's tour starts a loom-eval serve of its own on the same ports: make stop first)"
