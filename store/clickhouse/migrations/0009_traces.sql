-- Version 9: trace summaries kept at ingest, for the lists (issue 36).
--
-- Version 3 computed a trace's summary when a list read it, from its
-- spans: a page sorted by tokens summarised every matching trace (24–29 s
-- at 100,000 traces), and a page holding a million-span trace read a
-- million spans. Now WriteSpans keeps each trace's store.Summarize figures
-- current with a store.SummaryBuilder (summaries.go) and writes them here,
-- one row per trace per batch that touched it, in traces (SQLite's name
-- for its table of summaries); ReplacingMergeTree keeps
-- the row with the most spans (version), and readers read FINAL. The
-- project leads the key, so a project's lists read its rows only. Every
-- list reads this table alone (search clauses other than the session
-- first select trace ids from spans), and sorts and filters by its
-- columns. Version 8 is another branch's (issue 36, trace windows).
--
-- names holds the trace's distinct span names up to 512 (names_complete
-- says whether that is all of them; the Text filter reads the spans of a
-- trace with more); sessions its conversation ids; call_groups the JSON of
-- store.TraceSummary.Groups. Traces stored before this version are
-- summarised from their spans by the first Start after it.

-- name: traces table
CREATE TABLE IF NOT EXISTS {{.DB}}.{{.Local "traces"}} {{.OnCluster}}
(
    project               LowCardinality(String),
    trace_id              String CODEC(ZSTD(1)),
    version               UInt64,
    start                 DateTime64(9) CODEC(Delta, ZSTD(1)),
    end                   DateTime64(9) CODEC(Delta, ZSTD(1)),
    duration_ns           Int64 CODEC(T64, ZSTD(1)),
    after_root_ns         Int64 CODEC(T64, ZSTD(1)),
    root_name             String CODEC(ZSTD(1)),
    service_name          LowCardinality(String),
    services              Array(LowCardinality(String)),
    agents                Array(LowCardinality(String)),
    models                Array(LowCardinality(String)),
    labels                Array(LowCardinality(String)),
    names                 Array(LowCardinality(String)),
    names_complete        Bool,
    sessions              Array(String) CODEC(ZSTD(1)),
    fragments             Int64 CODEC(T64, ZSTD(1)),
    span_count            Int64 CODEC(T64, ZSTD(1)),
    error_count           Int64 CODEC(T64, ZSTD(1)),
    model_calls           Int64 CODEC(T64, ZSTD(1)),
    failed_model_calls    Int64 CODEC(T64, ZSTD(1)),
    tool_calls            Int64 CODEC(T64, ZSTD(1)),
    input_tokens          Int64 CODEC(T64, ZSTD(1)),
    output_tokens         Int64 CODEC(T64, ZSTD(1)),
    cache_read_tokens     Int64 CODEC(T64, ZSTD(1)),
    cache_creation_tokens Int64 CODEC(T64, ZSTD(1)),
    reasoning_tokens      Int64 CODEC(T64, ZSTD(1)),
    tokens_total          Int64 CODEC(T64, ZSTD(1)),
    call_groups           String CODEC(ZSTD(1)),
    expire_at             DateTime DEFAULT toDateTime('2106-01-01 00:00:00', 'UTC') CODEC(Delta, ZSTD(1))
)
ENGINE = {{.EngineArgs "ReplacingMergeTree" "version" "traces"}}
ORDER BY (project, trace_id)
TTL {{.TTLOr "toDate(start)" "expire_at"}}
SETTINGS index_granularity = 1024, non_replicated_deduplication_window = 10000;
{{- if .Clustered}}

-- name: traces distributed table
CREATE TABLE IF NOT EXISTS {{.DB}}.traces {{.OnCluster}}
AS {{.DB}}.{{.Local "traces"}}
ENGINE = Distributed({{.ClusterName}}, {{.DatabaseName}}, '{{.Local "traces"}}', cityHash64(trace_id));
{{- end}}

-- name: attribute keys of spans
-- Search reads spans. attr_keys lists the keys of a span's attribute JSON
-- (the attributes no typed column holds), computed by ClickHouse when a
-- part is written: "is the key set" reads it instead of the JSON, and a
-- clause on a value reads the JSON of the spans that have the key only.
-- Parts written before this version compute it when read, until merged.
ALTER TABLE {{.DB}}.{{.Local "spans"}} {{.OnCluster}}
    ADD COLUMN IF NOT EXISTS attr_keys Array(LowCardinality(String)) MATERIALIZED JSONExtractKeys(attributes) CODEC(ZSTD(1));
{{- if .Clustered}}

-- name: attribute keys of the spans distributed table
ALTER TABLE {{.DB}}.spans {{.OnCluster}}
    ADD COLUMN IF NOT EXISTS attr_keys Array(LowCardinality(String)) MATERIALIZED JSONExtractKeys(attributes);
{{- end}}

-- name: skip indexes for search
-- Skip indexes, so that a search reads the granules that may match: an
-- equality clause asks for the value's tokens in the attribute JSON
-- (hasToken, idx_attr_tokens) or the value in the typed column holding
-- the attribute; a key, for attr_keys (idx_attr_keys); tool call ids and
-- evidence ids (unique per span) have bloom filters of their own. A few
-- bytes a span (docs/bench-bigdata.md). Parts written before this version
-- get them when merges rewrite them.
ALTER TABLE {{.DB}}.{{.Local "spans"}} {{.OnCluster}}
    ADD INDEX IF NOT EXISTS idx_attr_tokens attributes TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 1,
    ADD INDEX IF NOT EXISTS idx_attr_keys attr_keys TYPE bloom_filter(0.01) GRANULARITY 1,
    ADD INDEX IF NOT EXISTS idx_tool_call_id tool_call_id TYPE bloom_filter(0.01) GRANULARITY 1,
    ADD INDEX IF NOT EXISTS idx_retrieved_docs retrieved_docs TYPE bloom_filter(0.01) GRANULARITY 1,
    ADD INDEX IF NOT EXISTS idx_cited_docs cited_docs TYPE bloom_filter(0.01) GRANULARITY 1;
