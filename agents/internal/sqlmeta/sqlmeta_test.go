package sqlmeta_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/loomwork/loomwork/agents/internal/sqlmeta"
)

const schema = `CREATE TABLE IF NOT EXISTS t_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS things (id INTEGER PRIMARY KEY);`

func version(t *testing.T, db *sql.DB) string {
	t.Helper()
	var v string
	if err := db.QueryRow(`SELECT value FROM t_meta WHERE key='schema_version'`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// A file made by an older build records the newer version once a newer
// build has applied its schema, and an older build then refuses it.
func TestTheRecordedVersionRisesOnUpgradeAndRefusesADowngrade(t *testing.T) {
	ctx := context.Background()
	db, err := sqlmeta.Open(filepath.Join(t.TempDir(), "x.db"), time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := sqlmeta.Apply(ctx, db, "t_meta", schema, 1); err != nil {
		t.Fatal(err)
	}
	if v := version(t, db); v != "1" {
		t.Fatalf("made at version 1, recorded %s", v)
	}
	if err := sqlmeta.Apply(ctx, db, "t_meta", schema, 2); err != nil {
		t.Fatal(err)
	}
	if v := version(t, db); v != "2" {
		t.Fatalf("upgraded to version 2, recorded %s", v)
	}
	err = sqlmeta.Apply(ctx, db, "t_meta", schema, 1)
	if err == nil || !strings.Contains(err.Error(), "schema version 2 is newer than this build supports (1)") {
		t.Fatalf("an older build on an upgraded file: %v", err)
	}
	if v := version(t, db); v != "2" {
		t.Fatalf("after a refused downgrade, recorded %s", v)
	}
}
