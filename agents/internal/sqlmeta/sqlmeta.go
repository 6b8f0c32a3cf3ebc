// Package sqlmeta applies a versioned schema to an agent-side SQLite
// database (the journal, the memory store): each keeps its schema version
// in a key/value table of its own, and a file written by a newer build is
// refused rather than silently downgraded.
package sqlmeta

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Apply runs schemaSQL (idempotent CREATE … IF NOT EXISTS statements that
// include the meta table, whose key column is its primary key) in one
// transaction and records version under key 'schema_version' in table
// meta (columns key, value), raising the recorded version when the file
// was made by an older build. It refuses a database whose recorded
// version is newer than version.
func Apply(ctx context.Context, db *sql.DB, meta, schemaSQL string, version int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var have string
	err = tx.QueryRowContext(ctx, `SELECT value FROM `+meta+` WHERE key='schema_version'`).Scan(&have)
	switch {
	case err == nil:
		v, perr := strconv.Atoi(have)
		if perr != nil {
			return fmt.Errorf("read schema version: %q is not a number", have)
		}
		if v > version {
			return fmt.Errorf("schema version %d is newer than this build supports (%d)", v, version)
		}
	case errors.Is(err, sql.ErrNoRows) || strings.Contains(err.Error(), "no such table"):
	default:
		return fmt.Errorf("read schema version: %w", err)
	}
	if _, err := tx.ExecContext(ctx, schemaSQL); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	// The version this build applied is recorded on every upgrade, not
	// only when the file is made: INSERT OR IGNORE kept a file made at
	// version 1 at 1 forever, so a later build could not tell it had been
	// upgraded. The meta table's key is its primary key.
	if _, err := tx.ExecContext(ctx, `INSERT INTO `+meta+`(key, value) VALUES ('schema_version', ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, strconv.Itoa(version)); err != nil {
		return fmt.Errorf("record schema version: %w", err)
	}
	return tx.Commit()
}

// Open opens the SQLite file at path (made absolute) for a durable store:
// WAL, synchronous FULL, the given busy timeout, foreign keys when asked,
// and write transactions that take the lock at BEGIN (no lock upgrade, so
// no SQLITE_BUSY in the middle of one). The caller's package registers the
// "sqlite" driver.
func Open(path string, busy time.Duration, foreignKeys bool) (*sql.DB, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busy.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	if foreignKeys {
		q.Add("_pragma", "foreign_keys(1)")
	}
	q.Set("_txlock", "immediate")
	return sql.Open("sqlite", "file:"+abs+"?"+q.Encode())
}
