-- Version 8: traces read by the window a user looks at (issue 36).
--
-- What a reader derived from a trace's spans and keeps, so the next read of
-- a huge trace does not derive it again: the trace's summary (TraceHead:
-- ClickHouse keeps none at ingest, see migration 3) and its rollup's tree
-- part (critical path, tops, aggregates), each with the number of distinct
-- span ids it was derived from; a reader derives again when the trace's
-- count has changed. The latest save of a key wins (ReplacingMergeTree on
-- the server's insert time; readers take the newest row). Under a cluster
-- the table is sharded by trace id, like the spans, so a trace's rows live
-- where its spans do. No TTL: a row is a few kilobytes, and the summary
-- of a trace whose billed calls run to hundreds of thousands a few
-- megabytes, compressed.

-- name: trace derived table
CREATE TABLE IF NOT EXISTS {{.DB}}.{{.Local "trace_derived"}} {{.OnCluster}}
(
    project    LowCardinality(String),
    trace_id   String,
    kind       LowCardinality(String),
    span_count Int64,
    saved      DateTime64(9) DEFAULT now64(9),
    data       String CODEC(ZSTD(3))
)
ENGINE = {{.EngineArgs "ReplacingMergeTree" "saved" "trace_derived"}}
ORDER BY (project, trace_id, kind);
{{- if .Clustered}}

-- name: trace derived distributed table
CREATE TABLE IF NOT EXISTS {{.DB}}.trace_derived {{.OnCluster}}
AS {{.DB}}.{{.Local "trace_derived"}}
ENGINE = Distributed({{.ClusterName}}, {{.DatabaseName}}, '{{.Local "trace_derived"}}', cityHash64(trace_id));
{{- end}}
