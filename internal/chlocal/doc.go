// Package chlocal runs a current ClickHouse (26.7) on one machine without a
// server installation, for Loomwork's tests and its optional local mode.
//
// The engine is libchdb.so, ClickHouse built as a shared library and shipped
// in the npm package @chdb/lib-linux-x64-gnu (scripts/clickhouse.sh fetch
// caches it under DefaultLibPath). Server loads it with purego (no cgo) and
// calls chdb_query_cmdline, which runs clickhouse-local's normal start-up;
// with --tcp_port=0/--http_port=0 and the queries SYSTEM START LISTEN TCP/HTTP
// that process becomes a ClickHouse server on 127.0.0.1 with OS-assigned
// ports, alive for as long as a keep-alive query runs. Server learns the ports
// with getServerPort, checks the server answers, and only then writes them to
// the ports file, so a ports file that exists means "ready".
//
// ClickHouse installs its own signal and crash handlers once loaded, so
// Server must run in a process that does nothing else: `loom-eval
// clickhouse-local`. Process starts that command as a child, waits for the
// ports file and stops it by pid; tests use it through the chtest package.
//
// The server has no password and can read any file the process can, so it
// only ever listens on 127.0.0.1. One server per data directory (ClickHouse
// locks it).
package chlocal
