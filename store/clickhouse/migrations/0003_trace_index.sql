-- Version 3: trace summaries computed when read, a small trace index
-- written with the spans, and cheaper parts for spans.
--
-- Measured on the ingest benchmark (docs/bench-ingest.md): the summary view
-- and the merges of its AggregatingMergeTree (maxMap and argMin states) cost
-- ClickHouse about 10 CPU-µs per span, more than storing the span itself. A
-- store-written summary table with per-span arrays still cost ~4. Now
-- WriteSpans adds one narrow trace_index row per trace per batch (id, first
-- start, last end), and ListTraces aggregates the spans of the traces it
-- shows (or filters on) when it reads them, each span once (FINAL).

-- name: stop the trace summaries view
DROP VIEW IF EXISTS {{.DB}}.trace_summaries_mv {{.OnCluster}};

-- name: trace index table
-- Where each trace is in time: min(start) is the trace's start, max(end) its
-- end. ListTraces finds traces by start and sorts them by start or duration
-- from this table alone; both aggregates are idempotent, so a batch stored
-- twice changes nothing.
CREATE TABLE IF NOT EXISTS {{.DB}}.{{.Local "trace_index"}} {{.OnCluster}}
(
    trace_id String CODEC(ZSTD(1)),
    day      Date,
    start    SimpleAggregateFunction(min, DateTime64(9)) CODEC(ZSTD(1)),
    end      SimpleAggregateFunction(max, DateTime64(9)) CODEC(ZSTD(1))
)
ENGINE = {{.Engine "AggregatingMergeTree" "trace_index"}}
PARTITION BY day
ORDER BY trace_id
{{.TTL "day"}}
SETTINGS index_granularity = 8192, non_replicated_deduplication_window = 10000{{if .TTLSet}}, ttl_only_drop_parts = 1{{end}};
{{- if .Clustered}}

-- name: trace index distributed table
CREATE TABLE IF NOT EXISTS {{.DB}}.trace_index {{.OnCluster}}
AS {{.DB}}.{{.Local "trace_index"}}
ENGINE = Distributed({{.ClusterName}}, {{.DatabaseName}}, '{{.Local "trace_index"}}', cityHash64(trace_id));
{{- end}}

-- name: trace index of the spans stored so far
INSERT INTO {{.DB}}.trace_index (trace_id, day, start, end)
SELECT trace_id, toDate(min(start), 'UTC'), min(start), max(end)
FROM {{.DB}}.spans
GROUP BY trace_id
SETTINGS insert_deduplicate = 0;

-- name: old trace summaries table
DROP TABLE IF EXISTS {{.DB}}.{{.Local "trace_summaries"}} {{.OnCluster}} SYNC;
{{- if .Clustered}}

-- name: old trace summaries distributed table
DROP TABLE IF EXISTS {{.DB}}.trace_summaries {{.OnCluster}} SYNC;
{{- end}}

-- name: compact parts for spans
-- An insert writes a part; in the Wide format that is two files per column
-- (~80 files), and on ext4 creating files next to recently deleted ones
-- (merges delete parts all the time) was a quarter of ClickHouse's CPU in
-- the benchmark. Parts below 256 MiB now use the Compact format (one data
-- file); merges still produce Wide parts above that.
ALTER TABLE {{.DB}}.{{.Local "spans"}} {{.OnCluster}} MODIFY SETTING min_bytes_for_wide_part = 268435456;

-- name: LZ4 for the attribute JSON columns
-- The JSON columns are most of a span's bytes, and a part's bytes are
-- compressed again by every merge that rewrites it. With ZSTD(1) the merges
-- were the largest share of ClickHouse's CPU in the ingest benchmark; LZ4
-- compresses and decompresses several times faster for a larger file
-- (docs/bench-ingest.md). Existing parts keep ZSTD until merged.
ALTER TABLE {{.DB}}.{{.Local "spans"}} {{.OnCluster}}
    MODIFY COLUMN attributes String CODEC(LZ4),
    MODIFY COLUMN resource_attributes String CODEC(LZ4),
    MODIFY COLUMN events String CODEC(LZ4),
    MODIFY COLUMN links String CODEC(LZ4);
