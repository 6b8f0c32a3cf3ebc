-- step: spans table
-- One row per span. Typed columns carry what queries filter and aggregate
-- on; the exact store.Attributes JSON of attributes, resource, events and
-- links is kept as ZSTD-compressed strings (queryable with JSONExtract*).
-- ReplacingMergeTree collapses a re-sent (trace_id, span_id) in background
-- merges; readers collapse what is not merged yet (LIMIT 1 BY).
CREATE TABLE IF NOT EXISTS `loomwork`.spans_local ON CLUSTER 'loomwork_cluster'
(
    trace_id              String CODEC(ZSTD(1)),
    span_id               String CODEC(ZSTD(1)),
    parent_span_id        String CODEC(ZSTD(1)),
    trace_state           String CODEC(ZSTD(1)),
    name                  LowCardinality(String) CODEC(ZSTD(1)),
    kind                  LowCardinality(String) CODEC(ZSTD(1)),
    start                 DateTime64(9) CODEC(Delta, ZSTD(1)),
    end                   DateTime64(9) CODEC(Delta, ZSTD(1)),
    status_code           LowCardinality(String) CODEC(ZSTD(1)),
    status_message        String CODEC(ZSTD(1)),
    service_name          LowCardinality(String) CODEC(ZSTD(1)),
    scope_name            LowCardinality(String) CODEC(ZSTD(1)),
    scope_version         LowCardinality(String) CODEC(ZSTD(1)),
    operation             LowCardinality(String) CODEC(ZSTD(1)),
    provider              LowCardinality(String) CODEC(ZSTD(1)),
    request_model         LowCardinality(String) CODEC(ZSTD(1)),
    response_model        LowCardinality(String) CODEC(ZSTD(1)),
    agent_name            LowCardinality(String) CODEC(ZSTD(1)),
    conversation_id       String CODEC(ZSTD(1)),
    tool_name             LowCardinality(String) CODEC(ZSTD(1)),
    tool_call_id          String CODEC(ZSTD(1)),
    model_call            Bool CODEC(ZSTD(1)),
    has_usage             Bool CODEC(ZSTD(1)),
    input_tokens          Int64 CODEC(T64, ZSTD(1)),
    output_tokens         Int64 CODEC(T64, ZSTD(1)),
    cache_read_tokens     Int64 CODEC(T64, ZSTD(1)),
    cache_creation_tokens Int64 CODEC(T64, ZSTD(1)),
    reasoning_tokens      Int64 CODEC(T64, ZSTD(1)),
    cost_usd              Nullable(Float64) CODEC(ZSTD(1)),
    retrieved_docs        Array(String) CODEC(ZSTD(1)),
    cited_docs            Array(String) CODEC(ZSTD(1)),
    attributes            String CODEC(ZSTD(1)),
    resource_attributes   String CODEC(ZSTD(1)),
    events                String CODEC(ZSTD(1)),
    links                 String CODEC(ZSTD(1)),
    INDEX idx_trace_id trace_id TYPE bloom_filter(0.001) GRANULARITY 1,
    INDEX idx_conversation_id conversation_id TYPE bloom_filter(0.01) GRANULARITY 4
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/spans_local', '{replica}')
PARTITION BY toDate(start)
ORDER BY (toStartOfHour(start), trace_id, span_id)
TTL toDate(start) + INTERVAL 30 DAY
SETTINGS index_granularity = 8192, non_replicated_deduplication_window = 10000, ttl_only_drop_parts = 1;

-- step: spans distributed table
-- Sharded by trace id: a trace lives on one shard, so its summary is
-- complete there and a trace lookup touches one shard.
CREATE TABLE IF NOT EXISTS `loomwork`.spans ON CLUSTER 'loomwork_cluster'
AS `loomwork`.spans_local
ENGINE = Distributed('loomwork_cluster', 'loomwork', 'spans_local', cityHash64(trace_id));

