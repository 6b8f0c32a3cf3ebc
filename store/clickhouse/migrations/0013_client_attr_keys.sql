-- Version 13: the writer gives attr_keys (issue 36).
--
-- attr_keys (migration 9) was MATERIALIZED: ClickHouse parsed each span's
-- attribute JSON on insert to list its keys (JSONExtractKeys), ~3 CPU-µs
-- a span, 9% of the insert's CPU on agent traffic that records its
-- messages (docs/bench-ingest.md), for keys the store had just written. Now the
-- column is DEFAULT with the same expression: the store's inserts give
-- the keys it wrote (store.Attributes.AppendStorableJSONKeys, the keys as
-- JSONExtractKeys reads them, in the same order), and an insert that does
-- not (a spool record written before this version, another writer) gets
-- them computed as before. Nothing stored changes; a DEFAULT column is
-- also listed by SELECT *, which nothing here uses on spans.

-- name: attribute keys given by the writer
ALTER TABLE {{.DB}}.{{.Local "spans"}} {{.OnCluster}}
    MODIFY COLUMN attr_keys Array(LowCardinality(String)) DEFAULT JSONExtractKeys(attributes) CODEC(ZSTD(1));
{{- if .Clustered}}

-- name: attribute keys given by the writer, spans distributed table
ALTER TABLE {{.DB}}.spans {{.OnCluster}}
    MODIFY COLUMN attr_keys Array(LowCardinality(String)) DEFAULT JSONExtractKeys(attributes);
{{- end}}
