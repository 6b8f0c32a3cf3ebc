-- step: traces table
CREATE TABLE IF NOT EXISTS `loomwork`.traces 
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
ENGINE = ReplacingMergeTree(version)
ORDER BY (project, trace_id)
TTL expire_at
SETTINGS index_granularity = 1024, non_replicated_deduplication_window = 10000;

-- step: skip indexes for search
-- Attribute search reads spans: an equality
-- clause first asks for the value's tokens in the attribute JSON
-- (hasToken, idx_attr_tokens) or the value in the typed column that holds
-- the attribute, so granules whose bloom filters hold neither are not read;
-- evidence ids and tool call ids (unique per span) have bloom filters of
-- their own. About 4 bytes a span (docs/bench-bigdata.md). Parts written
-- before this version get them when merges rewrite them.
ALTER TABLE `loomwork`.spans 
    ADD INDEX IF NOT EXISTS idx_attr_tokens attributes TYPE tokenbf_v1(32768, 3, 0) GRANULARITY 1,
    ADD INDEX IF NOT EXISTS idx_tool_call_id tool_call_id TYPE bloom_filter(0.01) GRANULARITY 1,
    ADD INDEX IF NOT EXISTS idx_retrieved_docs retrieved_docs TYPE bloom_filter(0.01) GRANULARITY 1,
    ADD INDEX IF NOT EXISTS idx_cited_docs cited_docs TYPE bloom_filter(0.01) GRANULARITY 1;

