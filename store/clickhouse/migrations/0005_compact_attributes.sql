-- Version 5: fewer bytes on disk per span.
--
-- Measured on agent-shaped spans (docs/bench-store-clickhouse.md), the
-- attribute JSON was over half of a span's bytes: it repeated what the
-- typed columns hold (operation, provider, models, agent, conversation,
-- tool, call id, token counts, documents), and LZ4 compresses JSON about
-- half as well as ZSTD. Now an attribute whose value a typed column holds
-- byte for byte is left out of the JSON and attributes_in_columns records
-- which (bit i: typedAttrs[i] in typedattrs.go); reads put it back, so a
-- span reads back as written. Rows stored before this version have 0 there
-- and their whole JSON.
--
-- ZSTD(1) again on the JSON columns: with the duplicates gone the attribute
-- JSON is about a third of its old size, so merges recompress far fewer
-- bytes than when LZ4 was chosen for their CPU (migration 3). Existing
-- parts keep their codec until merged.

-- name: attributes held by typed columns
ALTER TABLE {{.DB}}.{{.Local "spans"}} {{.OnCluster}}
    ADD COLUMN IF NOT EXISTS attributes_in_columns UInt32 CODEC(ZSTD(1)),
    MODIFY COLUMN attributes String CODEC(ZSTD(1)),
    MODIFY COLUMN resource_attributes String CODEC(ZSTD(1)),
    MODIFY COLUMN events String CODEC(ZSTD(1)),
    MODIFY COLUMN links String CODEC(ZSTD(1));
{{- if .Clustered}}

-- name: attributes held by typed columns, spans distributed table
ALTER TABLE {{.DB}}.spans {{.OnCluster}}
    ADD COLUMN IF NOT EXISTS attributes_in_columns UInt32;
{{- end}}

-- name: wide parts from 10 MiB for spans
-- Compact parts compress each column granule by granule; Wide parts
-- compress runs of granules together. Measured as-is after ingest, spans
-- took ~4 bytes more per span in Compact parts than in Wide ones
-- (docs/bench-store-clickhouse.md). Migration 3 kept parts below 256 MiB
-- Compact to spare the file creation of ~90 files per insert; inserts
-- (up to tens of thousands of spans, a few MiB) stay Compact at 10 MiB,
-- ClickHouse's default, and only merges into parts of ~200k spans and more
-- write Wide ones, rarely enough that their files cost nothing measurable.
ALTER TABLE {{.DB}}.{{.Local "spans"}} {{.OnCluster}} MODIFY SETTING min_bytes_for_wide_part = 10485760;
