-- step: project and expiry of spans
ALTER TABLE `loomwork`.spans_local ON CLUSTER 'loomwork_cluster'
    ADD COLUMN IF NOT EXISTS project LowCardinality(String) CODEC(ZSTD(1)),
    ADD COLUMN IF NOT EXISTS expire_at DateTime DEFAULT toDateTime('2106-01-01 00:00:00', 'UTC') CODEC(Delta, ZSTD(1)),
    MODIFY ORDER BY (toStartOfHour(start), trace_id, span_id, project);

-- step: TTL of spans
ALTER TABLE `loomwork`.spans_local ON CLUSTER 'loomwork_cluster'
    MODIFY TTL least(toDateTime(toDate(start) + INTERVAL 30 DAY, 'UTC'), expire_at)
    SETTINGS materialize_ttl_after_modify = 0;

-- step: row-level TTL for spans
ALTER TABLE `loomwork`.spans_local ON CLUSTER 'loomwork_cluster' MODIFY SETTING ttl_only_drop_parts = 0;

-- step: project and expiry of the spans distributed table
ALTER TABLE `loomwork`.spans ON CLUSTER 'loomwork_cluster'
    ADD COLUMN IF NOT EXISTS project LowCardinality(String),
    ADD COLUMN IF NOT EXISTS expire_at DateTime DEFAULT toDateTime('2106-01-01 00:00:00', 'UTC');

-- step: project and expiry of the trace index
-- expire_at is the latest expiry of the trace's rows: the index row stays
-- while any of the trace's spans may.
ALTER TABLE `loomwork`.trace_index_local ON CLUSTER 'loomwork_cluster'
    ADD COLUMN IF NOT EXISTS project LowCardinality(String) CODEC(ZSTD(1)),
    ADD COLUMN IF NOT EXISTS expire_at SimpleAggregateFunction(max, DateTime) DEFAULT toDateTime('2106-01-01 00:00:00', 'UTC') CODEC(ZSTD(1)),
    MODIFY ORDER BY (trace_id, project);

-- step: TTL of the trace index
ALTER TABLE `loomwork`.trace_index_local ON CLUSTER 'loomwork_cluster'
    MODIFY TTL least(toDateTime(day + INTERVAL 30 DAY, 'UTC'), expire_at)
    SETTINGS materialize_ttl_after_modify = 0;

-- step: row-level TTL for the trace index
ALTER TABLE `loomwork`.trace_index_local ON CLUSTER 'loomwork_cluster' MODIFY SETTING ttl_only_drop_parts = 0;

-- step: project and expiry of the trace index distributed table
ALTER TABLE `loomwork`.trace_index ON CLUSTER 'loomwork_cluster'
    ADD COLUMN IF NOT EXISTS project LowCardinality(String),
    ADD COLUMN IF NOT EXISTS expire_at SimpleAggregateFunction(max, DateTime) DEFAULT toDateTime('2106-01-01 00:00:00', 'UTC');

