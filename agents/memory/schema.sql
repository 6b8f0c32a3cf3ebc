-- Loomwork memory store schema, version 1.
CREATE TABLE IF NOT EXISTS memory_meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

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
