-- Loomwork memory store schema, version 1.
--
-- This is the schema.sql every memory store was made with before the store
-- used internal/sqlmigrate, without its memory_meta table (key, value),
-- which held schema_version = 1: a file that has one is adopted at this
-- version (store.go, adoptLegacy). The statements stay IF NOT EXISTS.

CREATE TABLE IF NOT EXISTS memory_records (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant      TEXT    NOT NULL,
  agent       TEXT    NOT NULL,
  namespace   TEXT    NOT NULL,
  key         TEXT    NOT NULL,
  kind        TEXT    NOT NULL,
  text        TEXT    NOT NULL,
  salience    REAL    NOT NULL,
  hits        INTEGER NOT NULL DEFAULT 0,
  written_ns  INTEGER NOT NULL,
  source_runs TEXT    NOT NULL DEFAULT '[]',
  provenance  TEXT    NOT NULL DEFAULT '',
  UNIQUE (tenant, agent, namespace, key)
);
