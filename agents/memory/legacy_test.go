package memory

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomwork/loomwork/internal/sqlmigrate"
)

// legacySchema is schema.sql as every build before internal/sqlmigrate
// ran it (SchemaVersion was 1 in all of them), verbatim.
const legacySchema = `-- Loomwork memory store schema, version 1.
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
`

// legacyMeta is how those builds recorded the version
// (the deleted agents/internal/sqlmeta.Apply, with meta = "memory_meta").
const legacyMeta = `INSERT INTO memory_meta(key, value) VALUES ('schema_version', ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`

// legacyInsert is how they wrote a record.
const legacyInsert = `INSERT INTO memory_records(tenant, agent, namespace, key, kind, text, salience, hits, written_ns, source_runs, provenance) VALUES (?,?,?,?,?,?,?,?,?,?,?)`

// makeLegacyStore writes a memory file as the builds before
// internal/sqlmigrate did — their DSN, schema, meta row and insert — with
// one record.
func makeLegacyStore(t *testing.T, path, version string) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlmigrate.OpenDurable(path, 5*time.Second, false) // sqlmeta.Open, moved
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
	if _, err := db.ExecContext(ctx, legacyInsert, scope.Tenant, scope.Agent, scope.Namespace, "deploy-freeze", string(Procedural),
		"freeze deploys on friday afternoons", 0.9, 2, epoch.UnixNano(), `["run-7"]`, "journal run-7 seq 12"); err != nil {
		t.Fatal(err)
	}
}

// A memory store made before internal/sqlmigrate (user_version 0,
// memory_meta schema_version 1) opens at version 1 with its records, and
// takes writes.
func TestALegacyMemoryStoreIsAdoptedAtVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.db")
	makeLegacyStore(t, path, "1")

	s := open(t, path)
	r, err := s.Get(ctx, scope, "deploy-freeze")
	if err != nil {
		t.Fatalf("the legacy record: %v", err)
	}
	if r.Text != "freeze deploys on friday afternoons" || r.Kind != Procedural || r.Hits != 2 || r.Salience != 0.9 ||
		!r.Written.Equal(epoch) || len(r.SourceRuns) != 1 || r.SourceRuns[0] != "run-7" || r.Provenance != "journal run-7 seq 12" {
		t.Errorf("legacy record read back as %+v", r)
	}
	v, err := sqlmigrate.Version(ctx, s.db)
	if err != nil || v != 1 {
		t.Errorf("user_version %d (%v), want 1", v, err)
	}
	var n int
	var name string
	if err := s.db.QueryRowContext(ctx, `SELECT count(*), max(name) FROM schema_migrations`).Scan(&n, &name); err != nil || n != 1 || name != "0001_init.sql" {
		t.Errorf("schema_migrations: %d rows, last %q (%v)", n, name, err)
	}
	var meta string
	if err := s.db.QueryRowContext(ctx, `SELECT value FROM memory_meta WHERE key = 'schema_version'`).Scan(&meta); err != nil || meta != "1" {
		t.Errorf("memory_meta left as it was? %q, %v", meta, err)
	}
	if _, _, err := s.Write(ctx, scope, Record{Key: "rollback", Kind: Semantic, Text: "roll back with the previous tag", Salience: 0.8}); err != nil {
		t.Fatalf("write after adoption: %v", err)
	}
	if recs, err := s.Records(ctx, scope); err != nil || len(recs) != 2 {
		t.Errorf("records after a write: %+v, %v", recs, err)
	}
}

// A legacy store recording a version this build does not know is refused,
// naming the file.
func TestALegacyMemoryStoreOfANewerVersionIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	makeLegacyStore(t, path, "2")
	_, err := Open(context.Background(), Config{Path: path})
	var newer *sqlmigrate.NewerError
	if !errors.As(err, &newer) || !strings.Contains(err.Error(), path) || newer.Have != 2 || newer.Latest != SchemaVersion {
		t.Fatalf("Open = %v; want a NewerError naming %s", err, path)
	}
}

// A new store is at SchemaVersion, recorded, with no memory_meta; a file
// at a newer version is refused.
func TestANewMemoryStoreRecordsItsVersion(t *testing.T) {
	ctx := context.Background()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != SchemaVersion {
		t.Fatalf("SchemaVersion %d, %d migrations", SchemaVersion, len(ms))
	}
	path := filepath.Join(t.TempDir(), "memory.db")
	s := open(t, path)
	v, err := sqlmigrate.Version(ctx, s.db)
	if err != nil || v != SchemaVersion {
		t.Errorf("user_version %d (%v), want %d", v, err, SchemaVersion)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name = 'memory_meta'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("a new store has memory_meta (%d, %v)", n, err)
	}
	if _, err := s.db.ExecContext(ctx, `PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, Config{Path: path})
	if err == nil || !strings.Contains(err.Error(), "memory store "+path+" has schema version 99, newer than this binary supports (1)") {
		t.Fatalf("Open of a newer store = %v", err)
	}
}
