-- The coordinator's tables (package coord). One file, shared by every
-- process of one host; see docs/coordination.md.
--
-- This is the schema.sql the coordinator ran on every Start before it used
-- internal/sqlmigrate, which recorded no version: a file made then is at
-- user_version 0 with these tables, and this migration runs on it again.
-- So every statement stays IF NOT EXISTS.
CREATE TABLE IF NOT EXISTS tasks (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT, -- enqueue order: the claim order
  key        TEXT NOT NULL UNIQUE,              -- the intent key: enqueue twice, one task
  kind       TEXT NOT NULL,
  payload    BLOB NOT NULL,
  occurrence TEXT NOT NULL DEFAULT '',          -- the schedule occurrence that first proposed it
  state      TEXT NOT NULL CHECK (state IN ('pending','running','proposed','accepted','failed')),
  owner      TEXT NOT NULL DEFAULT '',
  fence      INTEGER NOT NULL DEFAULT 0,        -- +1 on every grant
  deadline   INTEGER NOT NULL DEFAULT 0,        -- unix ns, exclusive
  candidate  TEXT NOT NULL DEFAULT '',
  claims     INTEGER NOT NULL DEFAULT 0,
  note       TEXT NOT NULL DEFAULT '',
  created    INTEGER NOT NULL,
  updated    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_state ON tasks (state, kind, seq);
-- A proposal's result bytes, apart from the task row: the claim and count
-- queries scan task rows, and a large blob in the row would make every
-- scan read its overflow pages.
CREATE TABLE IF NOT EXISTS results (
  key    TEXT PRIMARY KEY,
  result BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS deps (
  task TEXT NOT NULL,
  dep  TEXT NOT NULL,
  PRIMARY KEY (task, dep)
);
CREATE TABLE IF NOT EXISTS receipts (
  candidate   TEXT NOT NULL,
  environment TEXT NOT NULL,
  policy      TEXT NOT NULL,
  passed      INTEGER NOT NULL,
  report      TEXT NOT NULL,
  recorded    INTEGER NOT NULL,
  PRIMARY KEY (candidate, environment, policy)
);
CREATE TABLE IF NOT EXISTS refusals (
  id     INTEGER PRIMARY KEY AUTOINCREMENT,
  key    TEXT NOT NULL,
  worker TEXT NOT NULL,
  fence  INTEGER NOT NULL,
  op     TEXT NOT NULL,
  reason TEXT NOT NULL,
  at     INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
  name  TEXT PRIMARY KEY,
  value BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS occurrences (
  key      TEXT PRIMARY KEY,         -- routine/vVERSION/NOMINAL (UTC, RFC 3339)
  routine  TEXT NOT NULL,
  version  INTEGER NOT NULL,
  nominal  INTEGER NOT NULL,         -- unix ns, the intended time
  arrival  INTEGER NOT NULL,         -- unix ns, the first delivery
  deliveries INTEGER NOT NULL DEFAULT 1,
  decision TEXT NOT NULL,            -- dispatched | buffered | skipped | coalesced | no-op | paused | over-budget
  reason   TEXT NOT NULL DEFAULT '',
  task     TEXT NOT NULL DEFAULT '', -- the inspection task's key
  evidence TEXT NOT NULL DEFAULT '',
  tokens   INTEGER NOT NULL DEFAULT 0,
  spend_microusd INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS occurrences_routine ON occurrences (routine, nominal);
CREATE TABLE IF NOT EXISTS switches (
  routine TEXT PRIMARY KEY,
  paused  INTEGER NOT NULL,
  reason  TEXT NOT NULL,
  at      INTEGER NOT NULL
);
