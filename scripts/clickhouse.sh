#!/usr/bin/env bash
# scripts/clickhouse.sh — fetch, start and stop a local ClickHouse 26.7 for
# Loomwork's tests and its optional "local ClickHouse" mode.
#
# The engine is libchdb.so from the npm package @chdb/lib-linux-x64-gnu
# (ClickHouse 26.7 as a shared library, Apache-2.0). `loom-eval
# clickhouse-local` loads it in a process of its own and runs clickhouse-local's
# start-up with TCP and HTTP listeners on 127.0.0.1 (OS-assigned ports).
#
# Usage:
#   scripts/clickhouse.sh fetch            download libchdb.so into the cache (idempotent)
#   scripts/clickhouse.sh start [--tcp-port N] [--http-port N] DATA_DIR
#                                          start a server on DATA_DIR, wait until it
#                                          answers, print shell assignments on stdout:
#                                            LOOMWORK_CLICKHOUSE_DSN=clickhouse://127.0.0.1:PORT/default
#                                            LOOMWORK_CLICKHOUSE_HTTP=http://127.0.0.1:PORT
#                                            LOOMWORK_CLICKHOUSE_PID=PID
#                                          (progress goes to stderr). The ports are the
#                                          OS's choice unless given (native protocol,
#                                          HTTP). Fails if one is already running on
#                                          DATA_DIR.
#   scripts/clickhouse.sh env DATA_DIR     print the same assignments for a running server
#   scripts/clickhouse.sh stop DATA_DIR    stop it by pid (SIGTERM, then SIGKILL after 20 s)
#   scripts/clickhouse.sh lib              print the path of the cached libchdb.so
#
# Typical CI use:
#   scripts/clickhouse.sh fetch
#   eval "$(scripts/clickhouse.sh start /tmp/loomwork-ch)"
#   export LOOMWORK_CLICKHOUSE_DSN
#   make test
#   scripts/clickhouse.sh stop /tmp/loomwork-ch
#
# Files kept in DATA_DIR: the ClickHouse data, clickhouse.pid, clickhouse.ports
# (tcp and http port, tab-separated), clickhouse.log.
#
# Environment:
#   LOOMWORK_CACHE   cache root (default $HOME/.cache/loomwork); the library goes to
#                    $LOOMWORK_CACHE/chdb/<version>/libchdb.so (about 540 MiB on disk)
#   LOOM_EVAL        run the server with this loom-eval binary's clickhouse-local.
#                    Without it: a loom-eval built from the current sources (the one
#                    make install put on the PATH, else bin/loom-eval of make build or
#                    make demo: newer than every Go file, go.mod and go.sum here), else
#                    the stand-alone launcher (internal/chlocal/launcher, the same
#                    flags), built into DATA_DIR/bin/ in seconds
#   CLICKHOUSE_START_TIMEOUT  seconds to wait for readiness (default 90)
#
# The server has no password and can read any file this user can: it binds to
# 127.0.0.1 only. One server per DATA_DIR.
set -euo pipefail

CHDB_PACKAGE="@chdb/lib-linux-x64-gnu"
CHDB_VERSION="26.7.3-stable.1"
CACHE="${LOOMWORK_CACHE:-$HOME/.cache/loomwork}"
LIB_DIR="$CACHE/chdb/$CHDB_VERSION"
LIB="$LIB_DIR/libchdb.so"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf 'clickhouse.sh: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

is_elf_shared_object() {
	# ELF magic, then e_type (offset 16, little-endian) == 3 (ET_DYN).
	local f="$1"
	[ -f "$f" ] || return 1
	[ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' \n')" = "7f454c46" ] || return 1
	[ "$(dd if="$f" bs=1 skip=16 count=2 2>/dev/null | od -An -tx1 | tr -d ' \n')" = "0300" ] || return 1
}

# fetch_into packs the npm package in $1 and moves libchdb.so into the cache.
fetch_into() {
	local tmp="$1" tgz member
	log "fetching $CHDB_PACKAGE@$CHDB_VERSION (about 170 MB to download, 540 MiB unpacked)"
	(cd "$tmp" && npm pack --silent "$CHDB_PACKAGE@$CHDB_VERSION" >/dev/null) || {
		log "npm pack $CHDB_PACKAGE@$CHDB_VERSION failed"
		return 1
	}
	tgz="$(ls "$tmp"/*.tgz 2>/dev/null | head -n 1)"
	[ -n "$tgz" ] || { log "npm pack produced no tarball"; return 1; }
	member="$(tar -tzf "$tgz" | grep -E '(^|/)libchdb\.so$' | head -n 1)"
	[ -n "$member" ] || { log "$(basename "$tgz") has no libchdb.so"; return 1; }
	tar -xzf "$tgz" -C "$tmp" "$member" || return 1
	is_elf_shared_object "$tmp/$member" || { log "$member is not an ELF shared object"; return 1; }
	mv -f "$tmp/$member" "$LIB.tmp" && mv -f "$LIB.tmp" "$LIB"
}

cmd_fetch() {
	if is_elf_shared_object "$LIB"; then
		log "libchdb $CHDB_VERSION already cached at $LIB"
		return 0
	fi
	command -v npm >/dev/null || die "npm is needed to fetch $CHDB_PACKAGE (apt-get install npm)"
	mkdir -p "$LIB_DIR"
	local tmp
	tmp="$(mktemp -d "$LIB_DIR/.fetch.XXXXXX")"
	if ! fetch_into "$tmp"; then
		rm -rf "$tmp"
		die "fetching $CHDB_PACKAGE@$CHDB_VERSION failed"
	fi
	rm -rf "$tmp"
	log "cached $LIB ($(du -h "$LIB" | cut -f1))"
}

# current BIN: BIN is newer than every Go file, go.mod and go.sum of the
# repository, so it was built from these sources (or later ones).
current() {
	[ -z "$(find "$REPO_ROOT" \( -name .git -o -name .loomwork -o -name node_modules -o -name bin -o -name testartifacts \) -prune \
		-o \( -name '*.go' -o -name go.mod -o -name go.sum \) -newer "$1" -print -quit 2>/dev/null)" ]
}

# loom_eval prints the command that runs the server: $LOOM_EVAL's
# clickhouse-local; else that of a loom-eval built from the current sources
# (make install's on the PATH, else bin/loom-eval of make build or make
# demo); else the stand-alone launcher, built into DATA_DIR/bin ($1): it
# depends on internal/chlocal alone, so it builds in seconds where the whole
# of loom-eval takes minutes, and two runs on one machine never share (or
# overwrite) a binary.
loom_eval() {
	local dir="$1" bin
	if [ -n "${LOOM_EVAL:-}" ]; then
		[ -x "$LOOM_EVAL" ] || die "LOOM_EVAL=$LOOM_EVAL is not executable"
		printf '%s clickhouse-local\n' "$LOOM_EVAL"
		return
	fi
	for bin in "$(command -v loom-eval || true)" "$REPO_ROOT/bin/loom-eval"; do
		if [ -n "$bin" ] && [ -x "$bin" ] && current "$bin" && "$bin" clickhouse-local -h >/dev/null 2>&1; then
			log "using $bin clickhouse-local (built from the current sources)"
			printf '%s clickhouse-local\n' "$bin"
			return
		fi
	done
	bin="$dir/bin/chlocal-launcher"
	mkdir -p "$dir/bin"
	log "no loom-eval built from the current sources (make install, make build); building the stand-alone launcher into $bin"
	(cd "$REPO_ROOT" && CGO_ENABLED=0 go build -o "$bin.tmp" ./internal/chlocal/launcher) >&2 ||
		die "go build ./internal/chlocal/launcher failed"
	mv -f "$bin.tmp" "$bin"
	printf '%s\n' "$bin"
}

pid_alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

read_pid() {
	local f="$1/clickhouse.pid"
	[ -f "$f" ] && tr -d ' \n' <"$f" || true
}

print_env() {
	local dir="$1" pid="$2" tcp http
	IFS=$'\t' read -r tcp http <"$dir/clickhouse.ports"
	printf 'LOOMWORK_CLICKHOUSE_DSN=clickhouse://127.0.0.1:%s/default\n' "$tcp"
	printf 'LOOMWORK_CLICKHOUSE_HTTP=http://127.0.0.1:%s\n' "$http"
	printf 'LOOMWORK_CLICKHOUSE_PID=%s\n' "$pid"
}

# ping asks the HTTP interface to run a query; it proves the server answers.
ping() {
	local http="$1" body
	body="$(exec 3<>"/dev/tcp/127.0.0.1/$http" &&
		printf 'GET /?query=SELECT%%201 HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 &&
		timeout 5 cat <&3)" || return 1
	case "$body" in
	"HTTP/1."?" 200"*) [ "$(printf '%s' "$body" | tail -n 1 | tr -d '\r')" = "1" ] ;;
	*) return 1 ;;
	esac
}

# port_arg NAME VALUE: VALUE if it is a port number (0: the OS picks).
port_arg() {
	case "$2" in
	'' | *[!0-9]*) die "start: $1 wants a port number, got '$2'" ;;
	esac
	[ "$2" -le 65535 ] || die "start: $1 $2: not a port (0 to 65535)"
	printf '%s' "$2"
}

cmd_start() {
	local dir="" tcp_port=0 http_port=0
	while [ $# -gt 0 ]; do
		case "$1" in
		--tcp-port) tcp_port="$(port_arg "$1" "${2:-}")" && shift 2 || exit 1 ;;
		--tcp-port=*) tcp_port="$(port_arg --tcp-port "${1#*=}")" && shift || exit 1 ;;
		--http-port) http_port="$(port_arg "$1" "${2:-}")" && shift 2 || exit 1 ;;
		--http-port=*) http_port="$(port_arg --http-port "${1#*=}")" && shift || exit 1 ;;
		-*) die "start: unknown option $1 (want --tcp-port N, --http-port N)" ;;
		*)
			[ -z "$dir" ] || die "start: one DATA_DIR, got '$dir' and '$1'"
			dir="$1"
			shift
			;;
		esac
	done
	[ -n "$dir" ] || die "usage: clickhouse.sh start [--tcp-port N] [--http-port N] DATA_DIR"
	is_elf_shared_object "$LIB" || die "no libchdb at $LIB; run: scripts/clickhouse.sh fetch"
	mkdir -p "$dir"
	dir="$(cd "$dir" && pwd)"
	local old
	old="$(read_pid "$dir")"
	if pid_alive "$old"; then
		die "a ClickHouse is already running on $dir (pid $old); use: scripts/clickhouse.sh env $dir"
	fi
	local launcher
	launcher="$(loom_eval "$dir")"
	rm -f "$dir/clickhouse.ports" "$dir/clickhouse.pid"
	# setsid: the server must not die with the shell that started it, and a
	# Ctrl-C in that shell must not reach it. $launcher is word-split on
	# purpose (binary plus subcommand; cache paths have no spaces).
	# shellcheck disable=SC2086
	setsid $launcher --lib "$LIB" --path "$dir/data" --tcp-port "$tcp_port" --http-port "$http_port" \
		--ports-file "$dir/clickhouse.ports" >"$dir/clickhouse.log" 2>&1 </dev/null &
	local pid=$!
	echo "$pid" >"$dir/clickhouse.pid"
	local timeout="${CLICKHOUSE_START_TIMEOUT:-90}" waited=0 tcp http
	while :; do
		if ! pid_alive "$pid"; then
			log "ClickHouse (pid $pid) exited during start-up; last lines of $dir/clickhouse.log:"
			tail -n 30 "$dir/clickhouse.log" >&2 || true
			rm -f "$dir/clickhouse.pid"
			exit 1
		fi
		if [ -s "$dir/clickhouse.ports" ]; then
			IFS=$'\t' read -r tcp http <"$dir/clickhouse.ports" || true
			if [ -n "${http:-}" ] && ping "$http"; then
				break
			fi
		fi
		if [ "$waited" -ge $((timeout * 10)) ]; then
			log "ClickHouse (pid $pid) did not answer within ${timeout}s; last lines of $dir/clickhouse.log:"
			tail -n 30 "$dir/clickhouse.log" >&2 || true
			kill -TERM "$pid" 2>/dev/null || true
			exit 1
		fi
		sleep 0.1
		waited=$((waited + 1))
	done
	log "ClickHouse $CHDB_VERSION ready on 127.0.0.1 (tcp $tcp, http $http, pid $pid, data $dir/data)"
	print_env "$dir" "$pid"
}

cmd_env() {
	local dir="${1:-}"
	[ -n "$dir" ] || die "usage: clickhouse.sh env DATA_DIR"
	local pid
	pid="$(read_pid "$dir")"
	pid_alive "$pid" || die "no ClickHouse running on $dir"
	[ -s "$dir/clickhouse.ports" ] || die "ClickHouse on $dir (pid $pid) has not reported its ports yet"
	print_env "$dir" "$pid"
}

cmd_stop() {
	local dir="${1:-}"
	[ -n "$dir" ] || die "usage: clickhouse.sh stop DATA_DIR"
	local pid
	pid="$(read_pid "$dir")"
	if ! pid_alive "$pid"; then
		log "no ClickHouse running on $dir"
		rm -f "$dir/clickhouse.pid"
		return 0
	fi
	kill -TERM "$pid"
	local i
	for i in $(seq 1 200); do
		pid_alive "$pid" || break
		sleep 0.1
	done
	if pid_alive "$pid"; then
		log "pid $pid still running after 20 s; sending SIGKILL"
		kill -KILL "$pid" 2>/dev/null || true
		while pid_alive "$pid"; do sleep 0.1; done
	fi
	rm -f "$dir/clickhouse.pid" "$dir/clickhouse.ports"
	log "stopped ClickHouse (pid $pid)"
}

case "${1:-}" in
fetch) cmd_fetch ;;
start) shift && cmd_start "$@" ;;
env) cmd_env "${2:-}" ;;
stop) cmd_stop "${2:-}" ;;
lib) is_elf_shared_object "$LIB" || die "no libchdb at $LIB; run: scripts/clickhouse.sh fetch"; printf '%s\n' "$LIB" ;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
