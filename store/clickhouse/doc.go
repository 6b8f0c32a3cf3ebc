// Package clickhouse is the trace store for ClickHouse, the backend that
// scales: one server for a team, or a cluster behind stateless collectors.
//
// Spans go to a spans table (typed columns for the GenAI fields; the exact
// attribute, resource, event and link encodings as compressed JSON strings,
// less the attributes a typed column holds byte for byte, which reads put
// back, so a span read back equals the span written), and each write adds one
// trace_index row per trace (id, start, end). ListTraces finds and orders
// traces through the index and aggregates their spans into summaries when
// it reads them. Schema changes are versioned migrations (migrations/*.sql,
// embedded) applied by Start.
//
// Every row carries its project (store.Span.Project) and its expiry (from
// store.Span.Retention; the tables' TTL deletes expired rows), and every
// read is scoped to store.ProjectOf(ctx) (projects.go).
//
// Writes are idempotent on (project, trace_id, span_id): identical re-sent blocks are
// dropped by insert deduplication, other copies are collapsed by
// ReplacingMergeTree merges and, until then, at read time (LIMIT 1 BY span
// id in GetTrace, FINAL in summaries); the trace index holds only min and
// max, which a duplicate cannot change.
//
// With Config.Cluster set the DDL runs ON CLUSTER, data lives in
// Replicated*MergeTree tables on every node and reads and writes go through
// Distributed tables sharded by trace id. docs/clickhouse.md describes the
// schema, the deployment and the measured costs.
package clickhouse
