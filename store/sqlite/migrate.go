package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations returns the embedded migrations in version order. File
// names are NNNN_description.sql; versions start at 1 with no gaps.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version number and '_'", e.Name())
		}
		b, err := migrationFS.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d (versions must have no gaps)", m.name, i+1)
		}
	}
	return ms, nil
}

// schemaVersion is the version this binary writes.
func schemaVersion() int {
	ms, err := loadMigrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

func userVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// migrate brings the schema of db (the writer connection) up to date. Each
// migration runs in its own immediate transaction, together with its record
// in schema_migrations and the user_version bump, so a crash mid-way leaves
// the file at the previous version. after, when not nil, runs in the same
// transaction after a migration's SQL, for the steps SQL cannot do.
func migrate(ctx context.Context, db *sql.DB, path string, now func() time.Time, after func(ctx context.Context, tx *sql.Tx, version int) error) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	for {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("begin migration of %s: %w", path, err)
		}
		cur, err := userVersion(ctx, tx)
		if err != nil {
			tx.Rollback()
			return fmt.Errorf("%s: %w", path, err)
		}
		if cur > len(ms) {
			tx.Rollback()
			return newerSchemaError(path, cur, len(ms))
		}
		if cur == len(ms) {
			return tx.Commit()
		}
		if cur == 0 {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'`).Scan(&n); err != nil {
				tx.Rollback()
				return fmt.Errorf("inspect %s: %w", path, err)
			}
			if n > 0 {
				tx.Rollback()
				return fmt.Errorf("open %s: not a Loomwork trace store (schema version 0 but %d tables present)", path, n)
			}
		}
		m := ms[cur]
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version       INTEGER PRIMARY KEY,
			name          TEXT    NOT NULL,
			applied_at_ns INTEGER NOT NULL)`); err != nil {
			tx.Rollback()
			return fmt.Errorf("create schema_migrations in %s: %w", path, err)
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			tx.Rollback()
			return fmt.Errorf("apply migration %s to %s: %w", m.name, path, err)
		}
		if after != nil {
			if err := after(ctx, tx, m.version); err != nil {
				tx.Rollback()
				return fmt.Errorf("apply migration %s to %s: %w", m.name, path, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at_ns) VALUES (?, ?, ?)`,
			m.version, m.name, now().UnixNano()); err != nil {
			tx.Rollback()
			return fmt.Errorf("record migration %s in %s: %w", m.name, path, err)
		}
		// PRAGMA takes no bound parameters; the version is an int from this binary.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version)); err != nil {
			tx.Rollback()
			return fmt.Errorf("set schema version %d in %s: %w", m.version, path, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit migration %s to %s: %w", m.name, path, err)
		}
	}
}

func newerSchemaError(path string, have, know int) error {
	return fmt.Errorf("trace store %s has schema version %d, newer than this binary supports (%d): upgrade loom-eval", path, have, know)
}
