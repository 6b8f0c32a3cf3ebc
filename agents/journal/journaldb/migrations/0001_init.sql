-- Loomwork journal schema, version 1. See docs/format/journal.md.
--
-- This is the schema.sql every journal was made with before the journal
-- used internal/sqlmigrate, without its journal_meta table (key, value),
-- which held schema_version = 1: a file that has one is adopted at this
-- version (store.go, adoptLegacy). The statements stay IF NOT EXISTS.

CREATE TABLE IF NOT EXISTS journal_events (
  run_id     TEXT    NOT NULL,
  seq        INTEGER NOT NULL,
  kind       TEXT    NOT NULL,
  step       INTEGER NOT NULL,
  tool       TEXT    NOT NULL DEFAULT '',
  call_id    TEXT    NOT NULL DEFAULT '',
  args_hash  TEXT    NOT NULL DEFAULT '',
  label      TEXT    NOT NULL DEFAULT '',
  time_ns    INTEGER NOT NULL,
  payload    TEXT    NOT NULL,
  prev_hash  TEXT    NOT NULL,
  hash       TEXT    NOT NULL,
  -- effect_key is "<idempotency key>#<index>" on effect events, the key
  -- itself on the record that completed the call (AppendEffect), NULL
  -- otherwise; the unique index makes a second application of the same
  -- effect fail instead of being recorded twice, and finds a key's
  -- completing record, so a repeated call answers with it.
  effect_key TEXT,
  PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

CREATE UNIQUE INDEX IF NOT EXISTS journal_events_effect_key
  ON journal_events (effect_key) WHERE effect_key IS NOT NULL;

CREATE TRIGGER IF NOT EXISTS journal_events_append_only_update
  BEFORE UPDATE ON journal_events
  BEGIN SELECT RAISE(ABORT, 'journal events are append-only'); END;

CREATE TRIGGER IF NOT EXISTS journal_events_append_only_delete
  BEFORE DELETE ON journal_events
  BEGIN SELECT RAISE(ABORT, 'journal events are append-only'); END;
