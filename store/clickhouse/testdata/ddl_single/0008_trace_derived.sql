-- step: trace derived table
CREATE TABLE IF NOT EXISTS `loomwork`.trace_derived 
(
    project    LowCardinality(String),
    trace_id   String,
    kind       LowCardinality(String),
    span_count Int64,
    saved      DateTime64(9) DEFAULT now64(9),
    data       String CODEC(ZSTD(3))
)
ENGINE = ReplacingMergeTree(saved)
ORDER BY (project, trace_id, kind);

