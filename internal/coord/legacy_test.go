package coord

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/sqlmigrate"
)

// legacySchemas are schema.sql as the coordinator ran it on every Start
// before internal/sqlmigrate (no version recorded), verbatim: the last one,
// and the first (f028d4a: the proposal's result in the task row, and the
// publications table deleted since).
var legacySchemas = map[string]string{
	"last": `-- The coordinator's tables (package coord). One file, shared by every
-- process of one host; see docs/coordination.md.
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
`,
	"first": `-- The coordinator's tables (package coord). One file, shared by every
-- process of one host; see docs/coordination.md.
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
  result     BLOB,
  claims     INTEGER NOT NULL DEFAULT 0,
  note       TEXT NOT NULL DEFAULT '',
  created    INTEGER NOT NULL,
  updated    INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS tasks_state ON tasks (state, kind, seq);
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
CREATE TABLE IF NOT EXISTS publications (
  key           TEXT PRIMARY KEY,
  candidate     TEXT NOT NULL,
  expected_base TEXT NOT NULL,
  state         TEXT NOT NULL CHECK (state IN ('intended','published','held')),
  decision      TEXT NOT NULL DEFAULT '',
  remote_head   TEXT NOT NULL DEFAULT '',
  updated       INTEGER NOT NULL
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
`,
}

// The statements those builds wrote a task, its dependency and a meta
// value with (Enqueue, SetMeta).
const (
	legacyEnqueue = `INSERT INTO tasks (key, kind, payload, occurrence, state, created, updated)
			VALUES (?, ?, ?, ?, 'pending', ?, ?)`
	legacyDep  = `INSERT INTO deps (task, dep) VALUES (?, ?)`
	legacyMeta = `INSERT INTO meta (name, value) VALUES (?, ?)`
)

// A coordinator file made before the schema was versioned (user_version
// 0, its tables there) opens at version 1 with its tasks, dependencies
// and meta values, and keeps working: migration 1 runs on it again, and
// is idempotent.
func TestALegacyCoordinatorFileIsMigratedKeepingItsTasks(t *testing.T) {
	for which, schema := range legacySchemas {
		t.Run(which, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "tasks.sqlite")
			db, err := sqlmigrate.OpenDurable(path, 10*time.Second, false) // the DSN Start built, moved
			if err != nil {
				t.Fatal(err)
			}
			ns := epoch.UnixNano()
			for _, st := range []struct {
				q    string
				args []any
			}{
				{schema, nil},
				{legacyEnqueue, []any{"build", "trial", []byte(`{"case":1}`), "", ns, ns}},
				{legacyEnqueue, []any{"publish", "publish", []byte(`{}`), "nightly/v1/2026-09-30T02:00:00Z", ns, ns}},
				{legacyDep, []any{"publish", "build"}},
				{legacyMeta, []any{"suite", []byte("definition")}},
			} {
				if _, err := db.ExecContext(ctx, st.q, st.args...); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()

			clk := &manualClock{}
			clk.at(5)
			c := open(t, path, clk)
			pub, err := c.Get(ctx, "publish")
			if err != nil || pub.State != Pending || pub.Occurrence != "nightly/v1/2026-09-30T02:00:00Z" || len(pub.Deps) != 1 || pub.Deps[0] != "build" {
				t.Fatalf("legacy task read back as %+v, %v", pub, err)
			}
			if m, err := c.Meta(ctx, "suite"); err != nil || string(m) != "definition" {
				t.Errorf("legacy meta: %q, %v", m, err)
			}
			g, err := c.ClaimNext(ctx, "trial", "w1", 10*sec)
			if err != nil || g == nil || g.Key != "build" || g.Fence != 1 {
				t.Fatalf("claim a legacy task: %+v, %v", g, err)
			}
			if err := c.Submit(ctx, *g, "cand-1", []byte("result")); err != nil {
				t.Fatalf("submit: %v", err)
			}
			if got, err := c.Get(ctx, "build"); err != nil || got.State != Proposed || got.Candidate != "cand-1" {
				t.Errorf("after submit: %+v, %v", got, err)
			}
			if ts, err := c.Tasks(ctx, "trial", true); err != nil || len(ts) != 1 || string(ts[0].Result) != "result" {
				t.Errorf("result of a legacy task: %+v, %v", ts, err)
			}

			v, err := sqlmigrate.Version(ctx, c.db)
			if err != nil || v != 1 {
				t.Errorf("user_version %d (%v), want 1", v, err)
			}
			var n int
			var name string
			if err := c.db.QueryRowContext(ctx, `SELECT count(*), max(name) FROM schema_migrations`).Scan(&n, &name); err != nil || n != 1 || name != "0001_init.sql" {
				t.Errorf("schema_migrations: %d rows, last %q (%v)", n, name, err)
			}
		})
	}
}

// A new coordinator file records its version; one from a newer build is
// refused, naming the file.
func TestACoordinatorFileOfANewerVersionIsRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tasks.sqlite")
	c, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if v, err := sqlmigrate.Version(ctx, c.db); err != nil || v != len(ms) {
		t.Errorf("user_version %d (%v), want %d", v, err, len(ms))
	}
	if _, err := c.db.ExecContext(ctx, `PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, Config{Path: path})
	if err == nil || !strings.Contains(err.Error(), "coordinator "+path+" has schema version 99, newer than this binary supports") {
		t.Fatalf("Open of a newer file = %v", err)
	}
}
