package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/loomwork/loomwork/internal/sqlmigrate"
)

// The schema's migrations, applied by internal/sqlmigrate.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

// migrations returns the embedded migrations in version order.
var migrations = sync.OnceValues(func() ([]sqlmigrate.Migration, error) {
	return sqlmigrate.Load(migrationFS, "migrations")
})

// schemaVersion is the version this binary writes.
func schemaVersion() int {
	ms, err := migrations()
	if err != nil {
		return 0
	}
	return len(ms)
}

// migrate brings the schema of db (the writer connection) of the file at
// path up to date (sqlmigrate.Apply, logging upgrades to log: a migration per transaction, recorded
// in schema_migrations and PRAGMA user_version; a file from a newer binary
// is refused). after runs in a migration's transaction after its SQL, for
// the steps SQL cannot do. A file at version 0 that already has tables is
// some other program's and is refused.
func migrate(ctx context.Context, db *sql.DB, path string, now func() time.Time, log *slog.Logger, after func(ctx context.Context, tx *sql.Tx, version int) error) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	_, _, err = sqlmigrate.Apply(ctx, db, "trace store "+path, ms, sqlmigrate.Options{
		After:  after,
		Now:    now,
		Logger: log,
		Adopt: func(ctx context.Context, tx *sql.Tx) (int, error) {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'`).Scan(&n); err != nil {
				return 0, fmt.Errorf("inspect: %w", err)
			}
			if n > 0 {
				return 0, fmt.Errorf("not a Loomwork trace store (schema version 0 but %d tables present)", n)
			}
			return 0, nil
		},
	})
	return err
}
