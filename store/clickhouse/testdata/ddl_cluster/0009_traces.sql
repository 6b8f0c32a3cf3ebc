-- step: traces table
CREATE TABLE IF NOT EXISTS `loomwork`.traces_local ON CLUSTER 'loomwork_cluster'
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
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/traces_local', '{replica}', version)
ORDER BY (project, trace_id)
TTL least(toDateTime(toDate(start) + INTERVAL 30 DAY, 'UTC'), expire_at)
SETTINGS index_granularity = 1024, non_replicated_deduplication_window = 10000;

-- step: traces distributed table
CREATE TABLE IF NOT EXISTS `loomwork`.traces ON CLUSTER 'loomwork_cluster'
AS `loomwork`.traces_local
ENGINE = Distributed('loomwork_cluster', 'loomwork', 'traces_local', cityHash64(trace_id));

-- step: attribute keys of spans
-- Search reads spans. attr_keys lists the keys of a span's attribute JSON
-- (the attributes no typed column holds), computed by ClickHouse when a
-- part is written: "is the key set" reads it instead of the JSON, and a
-- clause on a value reads the JSON of the spans that have the key only.
-- Parts written before this version compute it when read, until merged.
ALTER TABLE `loomwork`.spans_local ON CLUSTER 'loomwork_cluster'
    ADD COLUMN IF NOT EXISTS attr_keys Array(LowCardinality(String)) MATERIALIZED JSONExtractKeys(attributes) CODEC(ZSTD(1));

-- step: attribute keys of the spans distributed table
ALTER TABLE `loomwork`.spans ON CLUSTER 'loomwork_cluster'
    ADD COLUMN IF NOT EXISTS attr_keys Array(LowCardinality(String)) MATERIALIZED JSONExtractKeys(attributes);

-- step: skip indexes for search
-- Skip indexes, so that a search reads the granules that may match: an
-- equality clause asks for the value's tokens in the attribute JSON
-- (hasToken, idx_attr_tokens) or the value in the typed column holding
-- the attribute; a key, for attr_keys (idx_attr_keys); tool call ids and
-- evidence ids (unique per span) have bloom filters of their own. A few
-- bytes a span (docs/bench-bigdata.md). Parts written before this version
-- get them when merges rewrite them.
ALTER TABLE `loomwork`.spans_local ON CLUSTER 'loomwork_cluster'
    ADD INDEX IF NOT EXISTS idx_attr_tokens attributes TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 1,
    ADD INDEX IF NOT EXISTS idx_attr_keys attr_keys TYPE bloom_filter(0.01) GRANULARITY 1,
    ADD INDEX IF NOT EXISTS idx_tool_call_id tool_call_id TYPE bloom_filter(0.01) GRANULARITY 1,
    ADD INDEX IF NOT EXISTS idx_retrieved_docs retrieved_docs TYPE bloom_filter(0.01) GRANULARITY 1,
    ADD INDEX IF NOT EXISTS idx_cited_docs cited_docs TYPE bloom_filter(0.01) GRANULARITY 1;

