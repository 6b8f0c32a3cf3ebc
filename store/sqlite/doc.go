// Package sqlite is Loomwork's embedded trace store: one SQLite file, pure Go
// (modernc.org/sqlite, no C toolchain), used when no other store is
// configured.
//
// Durability: the file is in WAL mode with synchronous=FULL, so WriteSpans
// returns nil only after the batch's commit is fsynced to the WAL; neither a
// process crash nor a power loss can then lose it (NORMAL would only survive
// the former). Writes are serialised on one connection inside the process
// (SQLite has one writer at a time anyway) while span encoding and
// compression run before the lock, in the caller's goroutine. Readers use a
// separate pool and never wait for a write. Other processes (for example
// `loom-eval traces list` while `loom-eval serve` writes) open the same file
// with Config.ReadOnly and read concurrently.
//
// Layout (migrations/0001_init.sql): a summary row per trace, kept up to
// date in the write transaction from newly inserted spans only, which
// ListTraces reads; typed columns for every store.Span field; attributes,
// events, links and document ids as JSON, zstd-compressed in blocks of many
// spans; resource attributes, and the rest of a span's OTLP scope and
// resource envelope (scope attributes and schema URLs, migrations/
// 0002_scopes.sql), deduplicated by hash; per-span keys built on a
// per-trace sequence number so inserts append instead of touching random
// index pages. Schema migrations (migrations/NNNN_*.sql) are applied by
// internal/sqlmigrate, recorded in PRAGMA user_version and the
// schema_migrations table; a file from a newer binary is refused with a
// clear error.
package sqlite
