-- Version 4: the rest of what OTLP sends with a span.
--
-- Span and link flags (W3C trace flags, whether the parent or the linked
-- span is remote), the SDK's dropped-attribute, -event and -link counts
-- (a non-zero count means the span is incomplete), the instrumentation
-- scope's attributes, dropped count and schema URL, and the resource's
-- schema URL and dropped count. Link flags and the dropped counts of events
-- and links travel inside the events and links JSON, which need no column.
-- Rows stored before this version read back as zero and empty, which is
-- what those spans would have had from a sender that set nothing.
--
-- scope_attributes is the exact store.Attributes JSON ('' for none), like
-- resource_attributes, and equal for every span of one OTLP ScopeSpans:
-- consecutive equal values compress to almost nothing.

-- name: OTLP envelope columns of spans
ALTER TABLE {{.DB}}.{{.Local "spans"}} {{.OnCluster}}
    ADD COLUMN IF NOT EXISTS flags UInt32 CODEC(ZSTD(1)),
    ADD COLUMN IF NOT EXISTS dropped_attributes_count UInt32 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS dropped_events_count UInt32 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS dropped_links_count UInt32 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS scope_attributes String CODEC(ZSTD(1)),
    ADD COLUMN IF NOT EXISTS scope_dropped_attributes_count UInt32 CODEC(T64, ZSTD(1)),
    ADD COLUMN IF NOT EXISTS scope_schema_url LowCardinality(String) CODEC(ZSTD(1)),
    ADD COLUMN IF NOT EXISTS resource_schema_url LowCardinality(String) CODEC(ZSTD(1)),
    ADD COLUMN IF NOT EXISTS resource_dropped_attributes_count UInt32 CODEC(T64, ZSTD(1));
{{- if .Clustered}}

-- name: OTLP envelope columns of the spans distributed table
ALTER TABLE {{.DB}}.spans {{.OnCluster}}
    ADD COLUMN IF NOT EXISTS flags UInt32,
    ADD COLUMN IF NOT EXISTS dropped_attributes_count UInt32,
    ADD COLUMN IF NOT EXISTS dropped_events_count UInt32,
    ADD COLUMN IF NOT EXISTS dropped_links_count UInt32,
    ADD COLUMN IF NOT EXISTS scope_attributes String,
    ADD COLUMN IF NOT EXISTS scope_dropped_attributes_count UInt32,
    ADD COLUMN IF NOT EXISTS scope_schema_url LowCardinality(String),
    ADD COLUMN IF NOT EXISTS resource_schema_url LowCardinality(String),
    ADD COLUMN IF NOT EXISTS resource_dropped_attributes_count UInt32;
{{- end}}
