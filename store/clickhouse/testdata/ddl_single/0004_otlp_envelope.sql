-- step: OTLP envelope columns of spans
ALTER TABLE `loomwork`.spans 
    ADD COLUMN IF NOT EXISTS flags UInt32 CODEC(ZSTD(1)),
    ADD COLUMN IF NOT EXISTS dropped_attributes_count UInt32 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS dropped_events_count UInt32 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS dropped_links_count UInt32 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS scope_attributes String CODEC(ZSTD(1)),
    ADD COLUMN IF NOT EXISTS scope_dropped_attributes_count UInt32 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS scope_schema_url LowCardinality(String) CODEC(ZSTD(1)),
    ADD COLUMN IF NOT EXISTS resource_schema_url LowCardinality(String) CODEC(ZSTD(1)),
    ADD COLUMN IF NOT EXISTS resource_dropped_attributes_count UInt32 CODEC(T64, ZSTD(1));

