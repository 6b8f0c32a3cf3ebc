-- step: attributes held by typed columns
ALTER TABLE `loomwork`.spans_local ON CLUSTER 'loomwork_cluster'
    ADD COLUMN IF NOT EXISTS attributes_in_columns UInt32 CODEC(ZSTD(1)),
    MODIFY COLUMN attributes String CODEC(ZSTD(1)),
    MODIFY COLUMN resource_attributes String CODEC(ZSTD(1)),
    MODIFY COLUMN events String CODEC(ZSTD(1)),
    MODIFY COLUMN links String CODEC(ZSTD(1));

-- step: attributes held by typed columns, spans distributed table
ALTER TABLE `loomwork`.spans ON CLUSTER 'loomwork_cluster'
    ADD COLUMN IF NOT EXISTS attributes_in_columns UInt32;

-- step: wide parts from 10 MiB for spans
-- Compact parts compress each column granule by granule; Wide parts
-- compress runs of granules together. Measured as-is after ingest, spans
-- took ~4 bytes more per span in Compact parts than in Wide ones
-- (docs/bench-store-clickhouse.md). Migration 3 kept parts below 256 MiB
-- Compact to spare the file creation of ~90 files per insert; inserts
-- (up to tens of thousands of spans, a few MiB) stay Compact at 10 MiB,
-- ClickHouse's default, and only merges into parts of ~200k spans and more
-- write Wide ones, rarely enough that their files cost nothing measurable.
ALTER TABLE `loomwork`.spans_local ON CLUSTER 'loomwork_cluster' MODIFY SETTING min_bytes_for_wide_part = 10485760;

