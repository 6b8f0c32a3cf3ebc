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
// ListTraces reads. A trace below 10,000 spans keeps no row per span: its
// spans are in compact blocks (migrations/0009_compact.sql, compact.go),
// each the spans of one batch's traces stored column by column with their
// attributes, events, links and document ids as JSON, compressed together
// (~64 bytes a span); reads decode the trace's blocks, an attribute search
// tests the spans of the traces the search blooms name (match.go), and
// the billed calls are derived from the spans. A trace that reaches
// 10,000 spans, and every trace stored before version 9, has a row per
// span with typed columns for every store.Span field and the indexes the
// trace page reads a window through, its JSON zstd-compressed in blocks
// of many spans, and search terms and billed calls rows. Resource
// attributes, and the rest of a span's OTLP scope and resource envelope
// (scope attributes and schema URLs, migrations/0004_scopes.sql), are
// deduplicated by hash; per-span keys are built on a per-trace sequence
// number so inserts append instead of touching random
// index pages. Schema migrations (migrations/NNNN_*.sql) are applied by
// internal/sqlmigrate, recorded in PRAGMA user_version and the
// schema_migrations table; a file from a newer binary is refused with a
// clear error.
package sqlite
