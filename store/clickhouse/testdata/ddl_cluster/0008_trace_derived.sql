-- step: trace derived table
CREATE TABLE IF NOT EXISTS `loomwork`.trace_derived_local ON CLUSTER 'loomwork_cluster'
(
    project    LowCardinality(String),
    trace_id   String,
    kind       LowCardinality(String),
    span_count Int64,
    saved      DateTime64(9) DEFAULT now64(9),
    data       String CODEC(ZSTD(3))
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/trace_derived_local', '{replica}', saved)
ORDER BY (project, trace_id, kind);

-- step: trace derived distributed table
CREATE TABLE IF NOT EXISTS `loomwork`.trace_derived ON CLUSTER 'loomwork_cluster'
AS `loomwork`.trace_derived_local
ENGINE = Distributed('loomwork_cluster', 'loomwork', 'trace_derived_local', cityHash64(trace_id));

