// Package journaldb is the journal's durable store, one implementation of
// the port journal.Journal: an embedded SQLite file (pure Go, WAL,
// synchronous=FULL) in which each event's sequence number and chain hash
// are allocated in the transaction that writes it. Its AppendEffect is a
// transaction of that database, and it offers the port's optional
// capabilities: tables for effects (EnsureSchema, journal.SchemaEnsurer)
// and the effect transaction through which a side-effecting tool commits
// its writes to them together with its journal events, exactly once
// (EffectTx, journal.SQLTx). The event format and the JSONL codec are in
// package journal; the schema is in docs/format/journal.md.
package journaldb

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver

	"github.com/loomwork/loomwork/agents/journal"
	"github.com/loomwork/loomwork/internal/sqlmigrate"
)

// SchemaVersion is the database schema version this build writes: the
// number of its migrations.
const SchemaVersion = 1

// The schema's migrations (migrations/NNNN_description.sql), applied by
// internal/sqlmigrate.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

var migrations = sync.OnceValues(func() ([]sqlmigrate.Migration, error) {
	return sqlmigrate.Load(migrationFS, "migrations")
})

// Config configures a journal Store.
type Config struct {
	// Path is the journal's database file, created when missing. It must be
	// a file of its own (not the trace store's).
	Path string
	// Clock stamps events. Default time.Now.
	Clock func() time.Time
	// BusyTimeout is how long a writer waits for another process's write
	// lock. Default 5s.
	BusyTimeout time.Duration
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger

	_ struct{} // prevent unkeyed literals
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("path must be set"))
	} else if c.Path == ":memory:" || strings.HasPrefix(c.Path, "file:") {
		errs = append(errs, fmt.Errorf("path must be a file path (got %q): a journal must survive the process", c.Path))
	}
	if c.BusyTimeout < 0 {
		errs = append(errs, fmt.Errorf("busy_timeout must not be negative (got %s)", c.BusyTimeout))
	}
	return errors.Join(errs...)
}

// Store is the durable journal: an append-only event log per run in its own
// SQLite file (WAL, synchronous=FULL, so a commit is on disk before Append
// returns). Every event's sequence number and chain hash are allocated in
// the transaction that writes it.
//
// One process writes a journal file at a time; readers in other processes
// may read it concurrently.
type Store struct {
	cfg    Config
	db     *sql.DB
	mu     sync.Mutex // serialises this process's write transactions
	closed bool
}

// New returns a Store for cfg. It does no I/O; call Start.
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("journal config: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.BusyTimeout == 0 {
		cfg.BusyTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Store{cfg: cfg}, nil
}

// Open is New followed by Start.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Start opens the database and creates or checks its schema.
func (s *Store) Start(ctx context.Context) error {
	db, err := sqlmigrate.OpenDurable(s.cfg.Path, s.cfg.BusyTimeout, true)
	if err != nil {
		return fmt.Errorf("open journal %s: %w", s.cfg.Path, err)
	}
	s.db = db
	if err := s.migrate(ctx); err != nil {
		return errors.Join(err, s.Shutdown(ctx))
	}
	return nil
}

// migrate brings the file's schema up to date. Its errors name the file.
// The migrations are stamped with the wall clock, not cfg.Clock: a
// logical clock's readings belong to the events.
func (s *Store) migrate(ctx context.Context) error {
	name := "journal " + s.cfg.Path
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	_, _, err = sqlmigrate.Apply(ctx, s.db, name, ms, sqlmigrate.Options{
		Adopt:  adoptLegacy,
		Logger: s.cfg.Logger,
	})
	return err
}

// adoptLegacy maps a journal made before the journal used
// internal/sqlmigrate (user_version 0) to its migration version. Those
// builds ran one schema.sql and recorded schema_version in journal_meta;
// it was 1 in every build, and that schema is migration 1. A file without
// the row (a new file) starts from 0. journal_meta is left as it is:
// nothing reads it any more.
func adoptLegacy(ctx context.Context, tx *sql.Tx) (int, error) {
	return sqlmigrate.LegacyVersion(ctx, tx, "journal_meta")
}

// Shutdown closes the database. It is safe to call more than once and
// without Start.
func (s *Store) Shutdown(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil || s.closed {
		return nil
	}
	s.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close journal %s: %w", s.cfg.Path, err)
	}
	return nil
}

// DB returns the underlying database, for reading the tables side-effecting
// tools write (they live in the same file as the journal). Writing to it
// directly bypasses the journal.
func (s *Store) DB() *sql.DB { return s.db }

// EnsureSchema runs idempotent DDL (CREATE TABLE IF NOT EXISTS ...) for the
// tables a side-effecting tool writes. The DDL is not journaled: it creates
// the place effects go, it is not an effect.
func (s *Store) EnsureSchema(ctx context.Context, ddl string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.db.ExecContext(ctx, ddl); err != nil {
		return fmt.Errorf("ensure effect schema: %w", err)
	}
	return nil
}

// Append appends recs to run's journal in one transaction and returns the
// events as stored. Either all are durable when it returns or none is.
func (s *Store) Append(ctx context.Context, runID string, recs ...journal.Record) ([]journal.Event, error) {
	if runID == "" {
		return nil, errors.New("append events: empty run id")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("append events to run %s: begin: %w", runID, err)
	}
	defer tx.Rollback() //nolint:errcheck
	out := make([]journal.Event, 0, len(recs))
	for _, r := range recs {
		e, err := s.insert(ctx, tx, runID, r, "")
		if err != nil {
			return nil, fmt.Errorf("append %s to run %s: %w", r.Kind, runID, err)
		}
		out = append(out, e)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("append events to run %s: commit: %w", runID, err)
	}
	return out, nil
}

var (
	_ journal.Journal       = (*Store)(nil)
	_ journal.SchemaEnsurer = (*Store)(nil)
	_ journal.SQLTx         = (*EffectTx)(nil)
)

// AppendEffect implements journal.Journal.AppendEffect with one write
// transaction of the journal database: fn runs inside it, every statement
// fn executes through its *EffectTx (journal.SQLTx) is appended as one
// journal.KindEffect event in that same transaction, then the record fn
// returns. The effects and their events therefore commit together or not
// at all: after a crash either both exist (the call is complete and is
// never run again) or neither does (the call runs again, and nothing was
// applied). That is exactly-once for effects stored in this database.
//
// The completing record carries the key in its effect_key column, so a
// second call with the key finds it and returns the events recorded for it
// without calling fn (the unique index on effect_key also refuses a second
// application of a statement). If fn returns an error or panics, or ctx
// ends, the transaction is rolled back — none of its effects persist — and
// nothing is appended.
func (s *Store) AppendEffect(ctx context.Context, runID string, call journal.EffectCall, fn journal.EffectFunc) (events []journal.Event, err error) {
	if runID == "" || call.Key == "" {
		return nil, errors.New("append effect: run id and idempotency key must be set")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("append effect to run %s: begin: %w", runID, cause(ctx, err))
	}
	defer tx.Rollback() //nolint:errcheck
	if done, err := s.completed(ctx, tx, runID, call.Key); err != nil || done != nil {
		if err != nil {
			return nil, fmt.Errorf("append effect to run %s: %w", runID, cause(ctx, err))
		}
		return done, nil
	}
	etx := &EffectTx{s: s, tx: tx, runID: runID, call: call}
	rec, err := journal.CallEffect(ctx, fn, etx)
	etx.done = true
	if err != nil {
		return nil, err
	}
	if etx.err != nil {
		return nil, etx.err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("append effect to run %s: %w", runID, err)
	}
	last, err := s.insert(ctx, tx, runID, rec, call.Key)
	if err != nil {
		return nil, fmt.Errorf("append %s to run %s: %w", rec.Kind, runID, cause(ctx, err))
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("append effect to run %s: commit: %w", runID, cause(ctx, err))
	}
	return append(etx.events, last), nil
}

// cause is err, or ctx's error when ctx has ended: database/sql rolls a
// transaction back when its context ends, and what the next statement then
// reports (sql.ErrTxDone) hides why.
func cause(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// completed returns the events recorded for the effect that completed key
// — its effect events, then its completing record — or nil when none did.
// They were appended in one transaction, so they are consecutive.
func (s *Store) completed(ctx context.Context, tx *sql.Tx, runID, key string) ([]journal.Event, error) {
	var owner string
	var seq int64
	err := tx.QueryRowContext(ctx, `SELECT run_id, seq FROM journal_events WHERE effect_key = ?`, key).Scan(&owner, &seq)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("look up idempotency key %s: %w", key, err)
	case owner != runID:
		return nil, fmt.Errorf("idempotency key %s belongs to run %s", key, owner)
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+eventColumns+`, COALESCE(effect_key, '')
		FROM journal_events WHERE run_id=? AND seq<=? ORDER BY seq DESC`, runID, seq)
	if err != nil {
		return nil, fmt.Errorf("read effect %s: %w", key, err)
	}
	defer rows.Close()
	var out []journal.Event
	for rows.Next() {
		var ek string
		e, err := scanEvent(rows, &ek)
		if err != nil {
			return nil, fmt.Errorf("read effect %s: %w", key, err)
		}
		if len(out) > 0 && !isEffectOf(ek, key) {
			break
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read effect %s: %w", key, err)
	}
	slices.Reverse(out)
	return out, nil
}

// isEffectOf reports whether effectKey is that of one of key's statements
// ("<key>#<index>").
func isEffectOf(effectKey, key string) bool {
	n, ok := strings.CutPrefix(effectKey, key+"#")
	if !ok || n == "" {
		return false
	}
	_, err := strconv.Atoi(n)
	return err == nil
}

// EffectTx is a side-effecting tool's handle to the journal's transaction
// (journal.SQLTx). Statements run through Exec are applied in the journal's
// database and journaled as effect events in the same transaction, so they
// commit exactly once with the tool's result. Key is the call's
// idempotency key; store it with the effect (e.g. in a UNIQUE column) so
// the data itself also proves uniqueness.
//
// For an effect outside this database (an HTTP call, an email) the journal
// can only promise at-least-once: a crash after the external call and
// before the commit re-runs the call after restart with the same Key, and
// the receiver must deduplicate on it.
type EffectTx struct {
	s      *Store
	tx     *sql.Tx
	runID  string
	call   journal.EffectCall
	n      int
	events []journal.Event
	err    error // first journaling failure; poisons the transaction
	done   bool
}

// Key returns the idempotency key of the call.
func (t *EffectTx) Key() string { return t.call.Key }

// Exec applies a statement and journals it as an effect event. Arguments
// must be JSON-encodable (strings, numbers, booleans, nil, []byte).
func (t *EffectTx) Exec(ctx context.Context, query string, args ...any) error {
	if t.done {
		return errors.New("effect exec: transaction already finished")
	}
	if t.err != nil {
		return t.err
	}
	if args == nil {
		args = []any{}
	}
	rawArgs, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("effect exec: arguments are not JSON-encodable: %w", err)
	}
	if _, err := t.tx.ExecContext(ctx, query, args...); err != nil {
		return fmt.Errorf("effect exec: %w", err)
	}
	eff := journal.Effect{Key: t.call.Key, Index: t.n, Statement: query, Args: rawArgs}
	h, err := journal.HashValue(struct {
		Statement string          `json:"statement"`
		Args      json.RawMessage `json:"args"`
	}{query, rawArgs})
	if err != nil {
		t.err = err
		return err
	}
	rec := journal.Record{Kind: journal.KindEffect, ArgsHash: h, Payload: eff, Step: t.call.Step, Tool: t.call.Tool, CallID: t.call.CallID}
	e, err := t.s.insert(ctx, t.tx, t.runID, rec, t.call.Key+"#"+strconv.Itoa(t.n))
	if err != nil {
		t.err = fmt.Errorf("journal effect %d of %s: %w", t.n, t.call.Key, err)
		return t.err
	}
	t.n++
	t.events = append(t.events, e)
	return nil
}

// QueryRow runs a read inside the transaction (not journaled: reads change
// nothing).
func (t *EffectTx) QueryRow(ctx context.Context, query string, args ...any) journal.Row {
	return t.tx.QueryRowContext(ctx, query, args...)
}

func (s *Store) insert(ctx context.Context, tx *sql.Tx, runID string, r journal.Record, effectKey string) (journal.Event, error) {
	if r.Kind == journal.KindSeal {
		return journal.Event{}, errors.New("seal events exist only in exported journals")
	}
	var head journal.Event
	err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM journal_events WHERE run_id=? ORDER BY seq DESC LIMIT 1`, runID).Scan(&head.Seq, &head.Hash)
	var prev *journal.Event
	switch {
	case err == nil:
		prev = &head
	case !errors.Is(err, sql.ErrNoRows):
		return journal.Event{}, fmt.Errorf("read journal head: %w", err)
	}
	e, err := journal.Next(runID, prev, r, s.cfg.Clock())
	if err != nil {
		return journal.Event{}, err
	}
	if err := insertEvent(ctx, tx, e, effectKey); err != nil {
		return journal.Event{}, err
	}
	return e, nil
}

func insertEvent(ctx context.Context, tx *sql.Tx, e journal.Event, effectKey string) error {
	var ek any
	if effectKey != "" {
		ek = effectKey
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO journal_events
		(run_id, seq, kind, step, tool, call_id, args_hash, label, time_ns, payload, prev_hash, hash, effect_key)
		VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		e.RunID, e.Seq, string(e.Kind), e.Step, e.Tool, e.CallID, e.ArgsHash, e.Label,
		e.Time.UnixNano(), string(e.Payload), e.Prev, e.Hash, ek)
	if err != nil {
		return fmt.Errorf("insert event seq %d: %w", e.Seq, err)
	}
	return nil
}

// eventColumns are the columns scanEvent reads, in its order.
const eventColumns = `run_id, seq, kind, step, tool, call_id, args_hash, label, time_ns, payload, prev_hash, hash`

// scanEvent reads one row of eventColumns, and then any further columns
// into more.
func scanEvent(rows *sql.Rows, more ...any) (journal.Event, error) {
	var (
		e       journal.Event
		kind    string
		ns      int64
		payload string
	)
	dest := append([]any{&e.RunID, &e.Seq, &kind, &e.Step, &e.Tool, &e.CallID, &e.ArgsHash, &e.Label, &ns, &payload, &e.Prev, &e.Hash}, more...)
	if err := rows.Scan(dest...); err != nil {
		return journal.Event{}, err
	}
	e.Kind = journal.Kind(kind)
	e.Time = time.Unix(0, ns).UTC()
	e.Payload = json.RawMessage(payload)
	return e, nil
}

// Events returns run's events in sequence order (none for an unknown run).
func (s *Store) Events(ctx context.Context, runID string) ([]journal.Event, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+eventColumns+` FROM journal_events WHERE run_id=? ORDER BY seq`, runID)
	if err != nil {
		return nil, fmt.Errorf("read events of run %s: %w", runID, err)
	}
	defer rows.Close()
	var out []journal.Event
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("read events of run %s: %w", runID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read events of run %s: %w", runID, err)
	}
	return out, nil
}

// Runs returns the ids of the runs in the journal, sorted.
func (s *Store) Runs(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT run_id FROM journal_events ORDER BY run_id`)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// Verify checks run's hash chain in the database and returns an error
// naming the first event that does not hold.
func (s *Store) Verify(ctx context.Context, runID string) error {
	evs, err := s.Events(ctx, runID)
	if err != nil {
		return err
	}
	return journal.VerifyChain(evs)
}

// Export writes the given runs (all runs when none is named) as JSONL.
func (s *Store) Export(ctx context.Context, w io.Writer, runIDs ...string) error {
	if len(runIDs) == 0 {
		var err error
		if runIDs, err = s.Runs(ctx); err != nil {
			return err
		}
	}
	all := make([][]journal.Event, 0, len(runIDs))
	for _, id := range runIDs {
		evs, err := s.Events(ctx, id)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return fmt.Errorf("export journal: run %s not found", id)
		}
		all = append(all, evs)
	}
	return journal.WriteJSONL(w, all...)
}

// Import stores verified runs (from ReadJSONL) in one transaction: all of
// them or none. A run that already exists in the store is refused, so an
// import can neither double nor overwrite events.
func (s *Store) Import(ctx context.Context, runs []journal.Run) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("import journal: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck
	for _, r := range runs {
		if err := journal.VerifyChain(r.Events); err != nil {
			return fmt.Errorf("import journal: %w", err)
		}
		var exists int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM journal_events WHERE run_id=?`, r.ID).Scan(&exists); err != nil {
			return fmt.Errorf("import journal: run %s: %w", r.ID, err)
		}
		if exists > 0 {
			return fmt.Errorf("import journal: run %s already exists in %s", r.ID, s.cfg.Path)
		}
		if err := importEvents(ctx, tx, r); err != nil {
			return fmt.Errorf("import journal: run %s: %w", r.ID, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("import journal: commit: %w", err)
	}
	return nil
}

// importEvents inserts a run's events with the effect keys AppendEffect
// would have written: "<key>#<index>" on each effect event, and "<key>" on
// the event after a call's last effect event (its completing record, which
// was committed with them). A call whose effect executed no statement
// leaves nothing to recognise it by, so its record gets no key.
func importEvents(ctx context.Context, tx *sql.Tx, r journal.Run) error {
	pending := "" // the key of the effect events just inserted
	for _, e := range r.Events {
		ek := ""
		if e.Kind == journal.KindEffect {
			var eff journal.Effect
			if err := json.Unmarshal(e.Payload, &eff); err == nil && eff.Key != "" {
				ek, pending = fmt.Sprintf("%s#%d", eff.Key, eff.Index), eff.Key
			}
		} else if pending != "" {
			ek, pending = pending, ""
		}
		if err := insertEvent(ctx, tx, e, ek); err != nil {
			return err
		}
	}
	return nil
}

// DeterministicClock is the logical clock of `loom-eval run --deterministic`
// and of the CI recipe's fresh run (baselines/ci): 2026-01-01T00:00:00Z
// plus 1 ms per reading. One definition, so a fresh run on unchanged code
// reproduces the committed baseline journals byte for byte.
func DeterministicClock() func() time.Time {
	return LogicalClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Millisecond)
}

// LogicalClock is a Config.Clock for recordings that must be byte-identical
// on every machine (the committed baselines): each reading is start plus
// step more than the last, whatever the wall clock says. Durations recorded
// with it are logical, not measured.
func LogicalClock(start time.Time, step time.Duration) func() time.Time {
	var mu sync.Mutex
	t := start
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(step)
		return t
	}
}
