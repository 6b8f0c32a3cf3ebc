package sqlmigrate_test

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	_ "modernc.org/sqlite"

	"github.com/loomwork/loomwork/internal/sqlmigrate"
)

// Three migrations that fail when run twice (no IF NOT EXISTS), so a
// migration applied twice is an error, not a silent no-op.
var three = fstest.MapFS{
	"m/0001_init.sql":   {Data: []byte(`CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1);`)},
	"m/0002_b.sql":      {Data: []byte(`CREATE TABLE b (y TEXT);`)},
	"m/0003_a_more.sql": {Data: []byte(`ALTER TABLE a ADD COLUMN z TEXT NOT NULL DEFAULT ''; INSERT INTO a (x) VALUES (3);`)},
}

func load(t *testing.T, fsys fstest.MapFS) []sqlmigrate.Migration {
	t.Helper()
	ms, err := sqlmigrate.Load(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func open(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sqlmigrate.OpenDurable(path, 10*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func tempDB(t *testing.T) (*sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.db")
	return open(t, path), path
}

func userVersion(t *testing.T, db *sql.DB) int {
	t.Helper()
	v, err := sqlmigrate.Version(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

type row struct {
	version int
	name    string
	at      int64
}

func recorded(t *testing.T, db *sql.DB) []row {
	t.Helper()
	rows, err := db.Query(`SELECT version, name, applied_at_ns FROM schema_migrations ORDER BY version`)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil
		}
		t.Fatal(err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.version, &r.name, &r.at); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func tableExists(t *testing.T, db *sql.DB, name string) bool {
	t.Helper()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func TestLoadReadsMigrationsInVersionOrder(t *testing.T) {
	fsys := fstest.MapFS{
		"m/0010_j.sql": {Data: []byte("x10")},
		"m/0002_b.sql": {Data: []byte("x2")},
		"m/0001_a.sql": {Data: []byte("x1")},
	}
	for i := 3; i <= 9; i++ {
		n := "m/000" + string(rune('0'+i)) + "_c.sql"
		fsys[n] = &fstest.MapFile{Data: []byte("x")}
	}
	ms := load(t, fsys)
	if len(ms) != 10 {
		t.Fatalf("%d migrations, want 10", len(ms))
	}
	for i, m := range ms {
		if m.Version != i+1 {
			t.Errorf("ms[%d] is version %d (%s)", i, m.Version, m.Name)
		}
	}
	if ms[0].Name != "0001_a.sql" || ms[0].SQL != "x1" || ms[9].Name != "0010_j.sql" || ms[9].SQL != "x10" {
		t.Errorf("first %+v, last %+v", ms[0], ms[9])
	}
}

func TestLoadRefusesGapsRepeatsAndBadNames(t *testing.T) {
	f := func(names ...string) fstest.MapFS {
		fsys := fstest.MapFS{}
		for _, n := range names {
			fsys["m/"+n] = &fstest.MapFile{Data: []byte("SELECT 1;")}
		}
		return fsys
	}
	for _, tc := range []struct {
		what string
		fsys fstest.MapFS
		want string // the error names this, and says why
	}{
		{"a gap", f("0001_a.sql", "0003_c.sql"), "m/0003_c.sql: expected version 2"},
		{"not starting at 1", f("0002_b.sql"), "m/0002_b.sql: expected version 1"},
		{"a repeated version", f("0001_a.sql", "0002_b.sql", "0002_c.sql"), "version 2 is also 0002_b.sql"},
		{"no number", f("0001_a.sql", "init.sql"), "m/init.sql: name must be NNNN_description.sql"},
		{"no underscore", f("0001.sql"), "m/0001.sql: name must be"},
		{"version zero", f("0000_zero.sql", "0001_a.sql"), "m/0000_zero.sql: name must be"},
		{"a sign", f("+001_a.sql"), "m/+001_a.sql: name must be"},
		{"not .sql", f("0001_a.sql", "0002_b.txt"), "m/0002_b.txt: name must be"},
		{"no description", f("0001_.sql"), "m/0001_.sql: name must be"},
		{"a directory", fstest.MapFS{"m/0001_a.sql": {Data: []byte("x")}, "m/0002_d/x.sql": {Data: []byte("x")}}, "m/0002_d: a directory"},
		{"nothing", fstest.MapFS{"m": {Mode: fs.ModeDir}}, "no migrations in m"},
	} {
		_, err := sqlmigrate.Load(tc.fsys, "m")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Load = %v; want an error containing %q", tc.what, err, tc.want)
		}
	}
	if _, err := sqlmigrate.Load(fstest.MapFS{"other/0001_a.sql": {Data: []byte("x")}}, "m"); err == nil {
		t.Error("Load of a missing directory: nil error")
	}
}

// A file is at version 1 after an Apply with UpTo 1, at the latest after
// the next Apply, and every version it went through is recorded.
func TestTheVersionIsRecordedOnEveryUpgrade(t *testing.T) {
	ctx := context.Background()
	db, _ := tempDB(t)
	ms := load(t, three)
	clock := int64(1000)
	now := func() time.Time { clock++; return time.Unix(0, clock) }

	from, to, err := sqlmigrate.Apply(ctx, db, "test db", ms, sqlmigrate.Options{UpTo: 1, Now: now})
	if err != nil || from != 0 || to != 1 {
		t.Fatalf("Apply(UpTo 1) = %d, %d, %v; want 0, 1, nil", from, to, err)
	}
	if v := userVersion(t, db); v != 1 {
		t.Fatalf("user_version %d after UpTo 1", v)
	}
	if tableExists(t, db, "b") {
		t.Fatal("UpTo 1 applied migration 2")
	}

	from, to, err = sqlmigrate.Apply(ctx, db, "test db", ms, sqlmigrate.Options{Now: now})
	if err != nil || from != 1 || to != 3 {
		t.Fatalf("Apply(latest) = %d, %d, %v; want 1, 3, nil", from, to, err)
	}
	if v := userVersion(t, db); v != 3 {
		t.Fatalf("user_version %d after the upgrade, want 3", v)
	}
	want := []row{{1, "0001_init.sql", 1001}, {2, "0002_b.sql", 1002}, {3, "0003_a_more.sql", 1003}}
	if got := recorded(t, db); !equalRows(got, want) {
		t.Fatalf("schema_migrations = %v, want %v", got, want)
	}

	// Nothing is applied twice, and an older UpTo does not go back.
	for _, upTo := range []int{0, 2} {
		from, to, err = sqlmigrate.Apply(ctx, db, "test db", ms, sqlmigrate.Options{UpTo: upTo, Now: now})
		if err != nil || from != 3 || to != 3 {
			t.Fatalf("Apply(UpTo %d) again = %d, %d, %v; want 3, 3, nil", upTo, from, to, err)
		}
	}
	if got := recorded(t, db); !equalRows(got, want) {
		t.Fatalf("after applying again, schema_migrations = %v, want %v", got, want)
	}
	if _, _, err := sqlmigrate.Apply(ctx, db, "test db", ms, sqlmigrate.Options{UpTo: 4}); err == nil || !strings.Contains(err.Error(), "cannot migrate to version 4") {
		t.Errorf("Apply(UpTo past the latest) = %v", err)
	}
}

func equalRows(a, b []row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A build that knows fewer migrations than the file has refuses it, naming
// the file and both versions, and leaves it alone.
func TestANewerFileIsRefused(t *testing.T) {
	ctx := context.Background()
	db, path := tempDB(t)
	ms := load(t, three)
	if _, _, err := sqlmigrate.Apply(ctx, db, "test db "+path, ms, sqlmigrate.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []sqlmigrate.Options{{}, {UpTo: 1}} {
		from, to, err := sqlmigrate.Apply(ctx, db, "test db "+path, ms[:2], opts)
		var newer *sqlmigrate.NewerError
		if !errors.As(err, &newer) || newer.Have != 3 || newer.Latest != 2 {
			t.Fatalf("Apply of an older build = %v; want a NewerError 3 > 2", err)
		}
		msg := err.Error()
		if !strings.Contains(msg, path) || !strings.Contains(msg, "schema version 3, newer than this binary supports (2)") {
			t.Errorf("error %q does not name the file and both versions", msg)
		}
		if from != 3 || to != 3 {
			t.Errorf("from, to = %d, %d; want 3, 3", from, to)
		}
	}
	if v := userVersion(t, db); v != 3 || len(recorded(t, db)) != 3 {
		t.Errorf("the refused file changed: user_version %d, %d rows", v, len(recorded(t, db)))
	}
}

// A migration that fails part-way leaves the file at the previous
// version: none of its statements, no row, no version bump. So does an
// After hook that fails. A corrected build then applies it.
func TestAFailingMigrationLeavesThePreviousVersion(t *testing.T) {
	ctx := context.Background()
	for _, failIn := range []string{"sql", "after"} {
		t.Run(failIn, func(t *testing.T) {
			db, _ := tempDB(t)
			bad := fstest.MapFS{
				"m/0001_init.sql": three["m/0001_init.sql"],
				"m/0002_b.sql":    {Data: []byte(`CREATE TABLE b (y TEXT); INSERT INTO a VALUES (2); INSERT INTO b VALUES ('half');`)},
			}
			var opts sqlmigrate.Options
			if failIn == "sql" {
				bad["m/0002_b.sql"] = &fstest.MapFile{Data: append(bad["m/0002_b.sql"].Data, " INSERT INTO nosuch VALUES (1);"...)}
			} else {
				opts.After = func(ctx context.Context, tx *sql.Tx, v int) error {
					if v == 2 {
						if _, err := tx.ExecContext(ctx, `INSERT INTO b VALUES ('from after')`); err != nil {
							return err
						}
						return errors.New("the step SQL cannot do failed")
					}
					return nil
				}
			}
			from, to, err := sqlmigrate.Apply(ctx, db, "test db", load(t, bad), opts)
			if err == nil || !strings.Contains(err.Error(), "test db: apply migration 0002_b.sql") {
				t.Fatalf("Apply = %v; want the failing migration named", err)
			}
			if from != 0 || to != 1 {
				t.Errorf("from, to = %d, %d; want 0, 1", from, to)
			}
			if v := userVersion(t, db); v != 1 {
				t.Errorf("user_version %d, want 1", v)
			}
			if got := recorded(t, db); len(got) != 1 || got[0].version != 1 {
				t.Errorf("schema_migrations = %v; want migration 1 only", got)
			}
			if tableExists(t, db, "b") {
				t.Error("table b of the failed migration exists")
			}
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM a`).Scan(&n); err != nil || n != 1 {
				t.Errorf("table a has %d rows (%v); want migration 1's one row", n, err)
			}

			from, to, err = sqlmigrate.Apply(ctx, db, "test db", load(t, three), sqlmigrate.Options{})
			if err != nil || from != 1 || to != 3 {
				t.Fatalf("Apply of the corrected migrations = %d, %d, %v; want 1, 3, nil", from, to, err)
			}
		})
	}
}

// Two *sql.DB on one file (as two processes would be) applying at once:
// every migration runs once, and both end at the latest version.
func TestConcurrentApplyRunsEachMigrationOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	dbs := []*sql.DB{open(t, path), open(t, path)}
	ms := load(t, three)
	var after [4]atomic.Int32
	opts := sqlmigrate.Options{After: func(_ context.Context, _ *sql.Tx, v int) error {
		after[v].Add(1)
		return nil
	}}
	const each = 4
	var wg sync.WaitGroup
	errs := make(chan error, 2*each)
	start := make(chan struct{})
	for _, db := range dbs {
		for range each {
			wg.Go(func() {
				<-start
				_, to, err := sqlmigrate.Apply(ctx, db, "test db", ms, opts)
				if err == nil && to != 3 {
					err = errors.New("ended below the latest version")
				}
				errs <- err
			})
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for v := 1; v <= 3; v++ {
		if n := after[v].Load(); n != 1 {
			t.Errorf("migration %d's After ran %d times", v, n)
		}
	}
	if got := recorded(t, dbs[1]); len(got) != 3 {
		t.Errorf("schema_migrations = %v", got)
	}
	var n int
	if err := dbs[0].QueryRow(`SELECT count(*) FROM a`).Scan(&n); err != nil || n != 2 {
		t.Errorf("table a has %d rows (%v); want 2 (migrations 1 and 3 once each)", n, err)
	}
}

// A file made before its store used the package: Adopt says which version
// its schema is, those versions are recorded without running, the rest run.
func TestAdoptRecordsTheLegacyVersionAndRunsTheRest(t *testing.T) {
	ctx := context.Background()
	db, _ := tempDB(t)
	// The legacy file: migrations 1 and 2's schema, a key/value meta table.
	if _, err := db.Exec(`CREATE TABLE a (x INTEGER); INSERT INTO a VALUES (1), (42); CREATE TABLE b (y TEXT);
		CREATE TABLE old_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO old_meta VALUES ('schema_version', '2');`); err != nil {
		t.Fatal(err)
	}
	calls := 0
	adopt := func(ctx context.Context, tx *sql.Tx) (int, error) {
		calls++
		return sqlmigrate.LegacyVersion(ctx, tx, "old_meta")
	}
	ran := map[int]bool{}
	opts := sqlmigrate.Options{Adopt: adopt, After: func(_ context.Context, _ *sql.Tx, v int) error { ran[v] = true; return nil }}
	from, to, err := sqlmigrate.Apply(ctx, db, "test db", load(t, three), opts)
	if err != nil || from != 2 || to != 3 {
		t.Fatalf("Apply = %d, %d, %v; want 2, 3, nil", from, to, err)
	}
	if ran[1] || ran[2] || !ran[3] {
		t.Errorf("migrations run: %v; want only 3", ran)
	}
	if got := recorded(t, db); len(got) != 3 || got[0].name != "0001_init.sql" || got[1].name != "0002_b.sql" {
		t.Errorf("schema_migrations = %v", got)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM a WHERE x = 42`).Scan(&n); err != nil || n != 1 {
		t.Errorf("the legacy row is gone (%d, %v)", n, err)
	}
	// Adopt is asked only while the file is at version 0.
	if _, _, err := sqlmigrate.Apply(ctx, db, "test db", load(t, three), opts); err != nil || calls != 1 {
		t.Errorf("second Apply: %v, Adopt called %d times", err, calls)
	}
}

func TestAdoptCanRefuseAFile(t *testing.T) {
	ctx := context.Background()
	ms := load(t, three)
	t.Run("foreign", func(t *testing.T) {
		db, _ := tempDB(t)
		if _, err := db.Exec(`CREATE TABLE theirs (x)`); err != nil {
			t.Fatal(err)
		}
		_, _, err := sqlmigrate.Apply(ctx, db, "test db", ms, sqlmigrate.Options{Adopt: func(context.Context, *sql.Tx) (int, error) {
			return 0, errors.New("not ours")
		}})
		if err == nil || err.Error() != "test db: not ours" {
			t.Fatalf("Apply = %v", err)
		}
		if userVersion(t, db) != 0 || tableExists(t, db, "a") || tableExists(t, db, "schema_migrations") {
			t.Error("a refused file was changed")
		}
	})
	t.Run("newer legacy version", func(t *testing.T) {
		db, _ := tempDB(t)
		_, _, err := sqlmigrate.Apply(ctx, db, "test db", ms, sqlmigrate.Options{Adopt: func(context.Context, *sql.Tx) (int, error) {
			return 4, nil
		}})
		var newer *sqlmigrate.NewerError
		if !errors.As(err, &newer) || newer.Have != 4 || newer.Latest != 3 {
			t.Fatalf("Apply = %v; want a NewerError 4 > 3", err)
		}
	})
}

func TestLegacyVersion(t *testing.T) {
	ctx := context.Background()
	db, _ := tempDB(t)
	read := func() (int, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		return sqlmigrate.LegacyVersion(ctx, tx, "t_meta")
	}
	if v, err := read(); v != 0 || err != nil {
		t.Errorf("no table: %d, %v", v, err)
	}
	if _, err := db.Exec(`CREATE TABLE t_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID`); err != nil {
		t.Fatal(err)
	}
	if v, err := read(); v != 0 || err != nil {
		t.Errorf("no row: %d, %v", v, err)
	}
	if _, err := db.Exec(`INSERT INTO t_meta VALUES ('schema_version', '1')`); err != nil {
		t.Fatal(err)
	}
	if v, err := read(); v != 1 || err != nil {
		t.Errorf("version 1: %d, %v", v, err)
	}
	if _, err := db.Exec(`UPDATE t_meta SET value = 'one'`); err != nil {
		t.Fatal(err)
	}
	if _, err := read(); err == nil || !strings.Contains(err.Error(), `"one" is not a version number`) {
		t.Errorf("a bad value: %v", err)
	}
}

func TestOpenDurableSetsThePragmas(t *testing.T) {
	for _, fk := range []bool{false, true} {
		db, err := sqlmigrate.OpenDurable(filepath.Join(t.TempDir(), "x.db"), 1500*time.Millisecond, fk)
		if err != nil {
			t.Fatal(err)
		}
		var mode string
		var sync, busy, keys int
		if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(`PRAGMA busy_timeout`).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(`PRAGMA foreign_keys`).Scan(&keys); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || sync != 2 || busy != 1500 || (keys == 1) != fk {
			t.Errorf("foreign keys %v: journal_mode %s, synchronous %d, busy_timeout %d, foreign_keys %d", fk, mode, sync, busy, keys)
		}
		db.Close()
	}
}
