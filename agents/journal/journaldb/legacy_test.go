package journaldb

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/internal/sqlmigrate"
)

// legacySchema is schema.sql as every build before internal/sqlmigrate
// ran it (SchemaVersion was 1 in all of them), verbatim.
const legacySchema = `-- Loomwork journal schema, version 1. See docs/format/journal.md.
CREATE TABLE IF NOT EXISTS journal_meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
) WITHOUT ROWID;

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
`

// legacyMeta is how those builds recorded the version
// (the deleted agents/internal/sqlmeta.Apply, with meta = "journal_meta").
const legacyMeta = `INSERT INTO journal_meta(key, value) VALUES ('schema_version', ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`

// legacyInsert is how they wrote an event.
const legacyInsert = `INSERT INTO journal_events
		(run_id, seq, kind, step, tool, call_id, args_hash, label, time_ns, payload, prev_hash, hash, effect_key)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`

// makeLegacyJournal writes a journal file as the builds before
// internal/sqlmigrate did — their DSN, schema, meta row and insert — with
// one run of three events and an effect table with a row, and returns the
// events.
func makeLegacyJournal(t *testing.T, path, version string) []journal.Event {
	t.Helper()
	ctx := context.Background()
	db, err := sqlmigrate.OpenDurable(path, 5*time.Second, true) // sqlmeta.Open, moved
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, legacySchema); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, legacyMeta, version); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	clock := stepClock()
	var evs []journal.Event
	var prev *journal.Event
	for i, r := range []journal.Record{
		{Kind: journal.KindRunStarted, Payload: map[string]string{"task": "legacy"}},
		{Kind: journal.KindToolCall, Step: 1, Tool: "search", CallID: "c1", Payload: map[string]int{"i": 1}},
		{Kind: journal.KindToolResult, Step: 1, Tool: "search", CallID: "c1", Payload: map[string]int{"i": 2}},
	} {
		e, err := journal.Next("r", prev, r, clock())
		if err != nil {
			t.Fatal(err)
		}
		var ek any
		if i == 2 {
			ek = "k1"
		}
		if _, err := db.ExecContext(ctx, legacyInsert, e.RunID, e.Seq, string(e.Kind), e.Step, e.Tool, e.CallID, e.ArgsHash, e.Label,
			e.Time.UnixNano(), string(e.Payload), e.Prev, e.Hash, ek); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
		prev = &evs[len(evs)-1]
	}
	if _, err := db.ExecContext(ctx, ledgerDDL); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO ledger VALUES ('k1', 7)`); err != nil {
		t.Fatal(err)
	}
	return evs
}

// A journal made before internal/sqlmigrate (user_version 0, journal_meta
// schema_version 1) opens at version 1 with its events, its effect
// tables and its chain intact, and takes appends.
func TestALegacyJournalIsAdoptedAtVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "legacy.db")
	want := makeLegacyJournal(t, path, "1")

	s, err := Open(ctx, Config{Path: path, Clock: stepClock()})
	if err != nil {
		t.Fatalf("open a legacy journal: %v", err)
	}
	defer s.Shutdown(ctx)
	got, err := s.Events(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Hash != want[i].Hash || got[i].Seq != want[i].Seq || !got[i].Time.Equal(want[i].Time) || string(got[i].Payload) != string(want[i].Payload) {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if err := s.Verify(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	var amount int
	if err := s.DB().QueryRowContext(ctx, `SELECT amount FROM ledger WHERE key = 'k1'`).Scan(&amount); err != nil || amount != 7 {
		t.Errorf("effect row: %d, %v", amount, err)
	}

	v, err := sqlmigrate.Version(ctx, s.DB())
	if err != nil || v != 1 {
		t.Errorf("user_version %d (%v), want 1", v, err)
	}
	var n int
	var name string
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*), max(name) FROM schema_migrations`).Scan(&n, &name); err != nil || n != 1 || name != "0001_init.sql" {
		t.Errorf("schema_migrations: %d rows, last %q (%v)", n, name, err)
	}
	var meta string
	if err := s.DB().QueryRowContext(ctx, `SELECT value FROM journal_meta WHERE key = 'schema_version'`).Scan(&meta); err != nil || meta != "1" {
		t.Errorf("journal_meta left as it was? %q, %v", meta, err)
	}

	// The chain goes on where the legacy build left it; the completing
	// record the legacy build keyed still answers its key.
	evs, err := s.Append(ctx, "r", journal.Record{Kind: journal.KindModelRequest})
	if err != nil || evs[0].Seq != 4 || evs[0].Prev != want[2].Hash {
		t.Fatalf("append after adoption: %+v, %v", evs, err)
	}
	if err := s.Verify(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	called := false
	done, err := s.AppendEffect(ctx, "r", journal.EffectCall{Step: 1, Tool: "search", CallID: "c1", Key: "k1"},
		func(context.Context, journal.EffectTx) (journal.Record, error) {
			called = true
			return journal.Record{}, nil
		})
	if err != nil || called || len(done) == 0 || done[len(done)-1].Hash != want[2].Hash {
		t.Errorf("a key completed before adoption: called %v, events %+v, %v", called, done, err)
	}
	s.Shutdown(ctx)

	// Reopening adopts nothing twice.
	s2, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Shutdown(ctx)
	if err := s2.DB().QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != 1 {
		t.Errorf("after reopening, %d schema_migrations rows (%v)", n, err)
	}
}

// A legacy journal recording a version this build does not know is
// refused, naming the file.
func TestALegacyJournalOfANewerVersionIsRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "legacy.db")
	makeLegacyJournal(t, path, "2")
	_, err := Open(ctx, Config{Path: path})
	var newer *sqlmigrate.NewerError
	if !errors.As(err, &newer) || !strings.Contains(err.Error(), path) || newer.Have != 2 || newer.Latest != SchemaVersion {
		t.Fatalf("Open = %v; want a NewerError naming %s", err, path)
	}
}

// A new journal is at SchemaVersion, recorded, with no journal_meta; a
// file at a newer version is refused.
func TestANewJournalRecordsItsVersion(t *testing.T) {
	ctx := context.Background()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != SchemaVersion {
		t.Fatalf("SchemaVersion %d, %d migrations", SchemaVersion, len(ms))
	}
	path := filepath.Join(t.TempDir(), "j.db")
	s, err := Open(ctx, Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	v, err := sqlmigrate.Version(ctx, s.DB())
	if err != nil || v != SchemaVersion {
		t.Errorf("user_version %d (%v), want %d", v, err, SchemaVersion)
	}
	var n int
	if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'journal_meta'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("a new journal has journal_meta (%d, %v)", n, err)
	}
	if _, err := s.DB().ExecContext(ctx, `PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	s.Shutdown(ctx)
	_, err = Open(ctx, Config{Path: path})
	if err == nil || !strings.Contains(err.Error(), "journal "+path+" has schema version 99, newer than this binary supports (1)") {
		t.Fatalf("Open of a newer journal = %v", err)
	}
}
