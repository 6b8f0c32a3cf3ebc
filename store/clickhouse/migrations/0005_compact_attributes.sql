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
