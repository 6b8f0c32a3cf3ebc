// Package coord is Loomwork's job layer: durable tasks with intent keys and
// dependencies, claimed under leases with fencing tokens, proposals
// accepted only against a validation receipt for the exact candidate, and
// schedule occurrences deduplicated by (routine, schedule version, nominal
// UTC time). It owns one SQLite file that several processes of one host
// share; every decision is one short transaction, and no transaction is
// held while a worker calls a model or runs a trial.
//
// The two invariants (docs/coordination.md):
//
//   - a worker's mutation (Renew, Submit, Release) is accepted only when the
//     task's state is running or proposed, its owner is the worker, its fence
//     is the grant's fence and the coordinator's time — read after the
//     transaction holds the write lock — is before the deadline (exclusive);
//   - Accept takes a task's candidate only when it is the candidate the
//     current grant submitted and a passing receipt names that candidate,
//     environment and check policy.
package coord

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver the journal and the embedded store use

	"github.com/loomwork/loomwork/internal/sqlmigrate"
)

// The schema's migrations (migrations/NNNN_description.sql), applied by
// internal/sqlmigrate.
//
//go:embed migrations/*.sql
var migrationFS embed.FS

var migrations = sync.OnceValues(func() ([]sqlmigrate.Migration, error) {
	return sqlmigrate.Load(migrationFS, "migrations")
})

// Task states.
const (
	Pending  = "pending"
	Running  = "running"
	Proposed = "proposed"
	Accepted = "accepted"
	Failed   = "failed"
)

// Errors, matched with errors.Is.
var (
	// ErrStaleGrant: a Renew, Submit or Release whose grant no longer holds
	// (the wrapping message says which of the four conditions failed).
	ErrStaleGrant = errors.New("stale grant")
	// ErrIntentConflict: an Enqueue of an existing intent key with another
	// kind, payload or dependency set. The same key must mean the same work.
	ErrIntentConflict = errors.New("intent key already names different work")
	// ErrNotAccepted: Accept refused (wrong state, wrong candidate, no
	// passing receipt for the candidate in that environment and policy).
	ErrNotAccepted = errors.New("not accepted")
	// ErrUnknownTask: no task has the key.
	ErrUnknownTask = errors.New("unknown task")
	// ErrClosed: an operation on a coordinator after (or interrupted by)
	// Shutdown.
	ErrClosed = errors.New("coordinator closed")
)

// Config configures a Coordinator.
type Config struct {
	// Path is the SQLite file every process of the host shares.
	Path string
	// Clock is the coordinator's clock, read inside each transaction after
	// the write lock is held. Default time.Now. Workers' clocks are never
	// consulted.
	Clock func() time.Time
	// BusyTimeout is how long a transaction waits for another process's
	// write lock. Default 10s.
	BusyTimeout time.Duration
	// Logger receives operational messages. Default slog.Default().
	Logger *slog.Logger

	_ struct{}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("path must be set"))
	} else if c.Path == ":memory:" || strings.HasPrefix(c.Path, "file:") {
		errs = append(errs, fmt.Errorf("path must be a file path shared by the workers (got %q)", c.Path))
	}
	if c.BusyTimeout < 0 {
		errs = append(errs, fmt.Errorf("busy_timeout must not be negative (got %s)", c.BusyTimeout))
	}
	return errors.Join(errs...)
}

// Coordinator is the job layer over one SQLite file.
type Coordinator struct {
	cfg Config

	mu     sync.RWMutex // guards db and closed
	db     *sql.DB      // nil before Start
	closed bool         // set by Shutdown; never cleared
}

// New returns a Coordinator for cfg. It does no I/O; call Start.
func New(cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("coordinator config: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.BusyTimeout == 0 {
		cfg.BusyTimeout = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Coordinator{cfg: cfg}, nil
}

// Open is New followed by Start.
func Open(ctx context.Context, cfg Config) (*Coordinator, error) {
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Start opens (creating if needed) the database and brings its schema up
// to date. A coordinator that was shut down does not start again
// (ErrClosed).
func (c *Coordinator) Start(ctx context.Context) error {
	// WAL, synchronous FULL, and BEGIN IMMEDIATE: the write lock is taken
	// at BEGIN, before the clock is read, so a transaction that waited for
	// the lock never decides on a time sampled before it waited.
	db, err := sqlmigrate.OpenDurable(c.cfg.Path, c.cfg.BusyTimeout, false)
	if err != nil {
		return fmt.Errorf("open coordinator %s: %w", c.cfg.Path, err)
	}
	c.mu.Lock()
	if c.closed || c.db != nil {
		c.mu.Unlock()
		db.Close()
		if c.closed {
			return fmt.Errorf("open coordinator %s: %w", c.cfg.Path, ErrClosed)
		}
		return fmt.Errorf("open coordinator %s: already started", c.cfg.Path)
	}
	c.db = db
	c.mu.Unlock()
	if err := c.migrate(ctx, db); err != nil {
		return errors.Join(c.closing(err), c.Shutdown(ctx))
	}
	return nil
}

// migrate brings the file's schema up to date. Its errors name the file.
// A coordinator file made before the schema was versioned is at version 0
// with its tables; migration 1 is that schema, idempotent, and runs on it
// again. The migrations are stamped with the wall clock, not cfg.Clock.
func (c *Coordinator) migrate(ctx context.Context, db *sql.DB) error {
	name := "coordinator " + c.cfg.Path
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	_, _, err = sqlmigrate.Apply(ctx, db, name, ms, sqlmigrate.Options{Logger: c.cfg.Logger})
	return err
}

// Shutdown closes the database, after the operations under way finish
// (database/sql's Close waits for them); every operation after it fails
// with ErrClosed. Safe without Start, concurrently with operations and
// more than once.
func (c *Coordinator) Shutdown(context.Context) error {
	c.mu.Lock()
	db := c.db
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if db == nil || already {
		return nil
	}
	return db.Close()
}

// conn is the database handle for one operation: ErrClosed after
// Shutdown, an error before Start.
func (c *Coordinator) conn() (*sql.DB, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	switch {
	case c.closed:
		return nil, ErrClosed
	case c.db == nil:
		return nil, errors.New("coordinator not started")
	}
	return c.db, nil
}

// closing marks err (from an operation that a concurrent Shutdown
// interrupted, e.g. "sql: database is closed") as ErrClosed.
func (c *Coordinator) closing(err error) error {
	if err == nil || errors.Is(err, ErrClosed) {
		return err
	}
	c.mu.RLock()
	closed := c.closed
	c.mu.RUnlock()
	if closed {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// tx runs fn in one write transaction. now is the coordinator's clock read
// after BEGIN IMMEDIATE returned, i.e. with the write lock held.
func (c *Coordinator) tx(ctx context.Context, fn func(tx *sql.Tx, now time.Time) error) error {
	db, err := c.conn()
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return c.closing(fmt.Errorf("begin: %w", err))
	}
	now := c.cfg.Clock()
	if err := fn(tx, now); err != nil {
		return c.closing(errors.Join(err, tx.Rollback()))
	}
	if err := tx.Commit(); err != nil {
		return c.closing(fmt.Errorf("commit: %w", err))
	}
	return nil
}

// TaskSpec is what Enqueue records.
type TaskSpec struct {
	// Key is the intent key: one task per key, whoever enqueues it.
	Key string
	// Kind lets workers claim only what they can run (e.g. "trial").
	Kind    string
	Payload []byte
	// Dependencies are intent keys that must be accepted before this task
	// can be claimed.
	Dependencies []string
	// Occurrence names the schedule occurrence that proposed the work
	// (recorded on first enqueue only).
	Occurrence string
}

// Task is a task's row.
type Task struct {
	Key        string    `json:"key"`
	Kind       string    `json:"kind"`
	Payload    []byte    `json:"payload,omitempty"`
	Occurrence string    `json:"occurrence,omitempty"`
	State      string    `json:"state"`
	Owner      string    `json:"owner,omitempty"`
	Fence      int64     `json:"fence"`
	Deadline   time.Time `json:"deadline"`
	Candidate  string    `json:"candidate,omitempty"`
	Result     []byte    `json:"result,omitempty"`
	Claims     int       `json:"claims"`
	Note       string    `json:"note,omitempty"`
	Deps       []string  `json:"dependencies,omitempty"`
}

// Grant is a worker's time-limited ownership of a task. Fence increases on
// every grant of the task, so an older grant is told apart from a newer one
// whatever the workers' clocks say.
type Grant struct {
	Key      string    `json:"key"`
	Worker   string    `json:"worker"`
	Fence    int64     `json:"fence"`
	Deadline time.Time `json:"deadline"`
}

// Enqueue records a task for spec.Key, or returns the existing one: the
// second enqueue of an intent is the same task (created false). An existing
// key with a different kind, payload or dependency set is refused with
// ErrIntentConflict rather than silently changing what the key means.
func (c *Coordinator) Enqueue(ctx context.Context, spec TaskSpec) (created bool, err error) {
	if spec.Key == "" || spec.Kind == "" {
		return false, errors.New("enqueue: key and kind must be set")
	}
	if spec.Payload == nil {
		spec.Payload = []byte{}
	}
	deps := normDeps(spec.Dependencies)
	for _, d := range deps {
		if d == spec.Key {
			return false, fmt.Errorf("enqueue %s: a task cannot depend on itself", spec.Key)
		}
	}
	err = c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		var created0 bool
		created0, err = enqueueTx(ctx, tx, now, spec, deps)
		created = created0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("enqueue %s: %w", spec.Key, err)
	}
	return created, nil
}

func enqueueTx(ctx context.Context, tx *sql.Tx, now time.Time, spec TaskSpec, deps []string) (bool, error) {
	if spec.Key == "" || spec.Kind == "" {
		return false, errors.New("key and kind must be set")
	}
	if spec.Payload == nil {
		spec.Payload = []byte{}
	}
	var kind string
	var payload []byte
	err := tx.QueryRowContext(ctx, `SELECT kind, payload FROM tasks WHERE key = ?`, spec.Key).Scan(&kind, &payload)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO tasks (key, kind, payload, occurrence, state, created, updated)
			VALUES (?, ?, ?, ?, 'pending', ?, ?)`, spec.Key, spec.Kind, spec.Payload, spec.Occurrence, now.UnixNano(), now.UnixNano()); err != nil {
			return false, err
		}
		for _, d := range deps {
			if _, err := tx.ExecContext(ctx, `INSERT INTO deps (task, dep) VALUES (?, ?)`, spec.Key, d); err != nil {
				return false, err
			}
		}
		return true, nil
	case err != nil:
		return false, err
	}
	have, err := depsOf(ctx, tx, spec.Key)
	if err != nil {
		return false, err
	}
	if kind != spec.Kind || string(payload) != string(spec.Payload) || strings.Join(have, "\x00") != strings.Join(deps, "\x00") {
		return false, fmt.Errorf("%w (kind %q, payload %s, dependencies %v; enqueued again with kind %q, payload %s, dependencies %v)",
			ErrIntentConflict, kind, digest(payload), have, spec.Kind, digest(spec.Payload), deps)
	}
	return false, nil
}

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

func depsOf(ctx context.Context, q querier, key string) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT dep FROM deps WHERE task = ? ORDER BY dep`, key)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

func normDeps(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range in {
		if d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// Digest is the candidate name of a result: its SHA-256, hex.
func Digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func digest(b []byte) string { return "sha256:" + Digest(b)[:12] }

// claimable is the claim condition of one task row (alias t): pending, or
// running/proposed with an expired lease (deadline <= now: the deadline is
// exclusive), and every dependency accepted.
const claimable = `(t.state = 'pending' OR (t.state IN ('running','proposed') AND t.deadline <= :now))
  AND NOT EXISTS (SELECT 1 FROM deps d LEFT JOIN tasks p ON p.key = d.dep
                  WHERE d.task = t.key AND (p.state IS NULL OR p.state <> 'accepted'))`

// Claim grants key to worker for ttl, or returns nil when the task is not
// claimable (held by a live grant, waiting on a dependency, accepted or
// failed). The claim is one conditional UPDATE in one transaction: it sets
// the owner, increments the fence, sets the deadline from the coordinator's
// clock and clears a reclaimed proposal's candidate.
func (c *Coordinator) Claim(ctx context.Context, key, worker string, ttl time.Duration) (*Grant, error) {
	if worker == "" || ttl <= 0 {
		return nil, fmt.Errorf("claim %s: need a worker id and a positive ttl", key)
	}
	var g *Grant
	err := c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		var err error
		g, err = claimTx(ctx, tx, now, `t.key = :key`, key, "", worker, ttl)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", key, err)
	}
	return g, nil
}

// ClaimNext grants the first claimable task of kind (in enqueue order) to
// worker, or returns nil when none is claimable now.
func (c *Coordinator) ClaimNext(ctx context.Context, kind, worker string, ttl time.Duration) (*Grant, error) {
	if worker == "" || ttl <= 0 {
		return nil, fmt.Errorf("claim next %s: need a worker id and a positive ttl", kind)
	}
	var g *Grant
	err := c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		var err error
		g, err = claimTx(ctx, tx, now, `t.kind = :kind`, "", kind, worker, ttl)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim next %s: %w", kind, err)
	}
	return g, nil
}

func claimTx(ctx context.Context, tx *sql.Tx, now time.Time, which, key, kind, worker string, ttl time.Duration) (*Grant, error) {
	deadline := now.Add(ttl)
	row := tx.QueryRowContext(ctx, `UPDATE tasks SET owner = :worker, fence = fence + 1, deadline = :deadline,
		state = 'running', candidate = '', claims = claims + 1, updated = :now
		WHERE key = (SELECT t.key FROM tasks t WHERE `+which+` AND `+claimable+` ORDER BY t.seq LIMIT 1)
		RETURNING key, fence`,
		sql.Named("worker", worker), sql.Named("deadline", deadline.UnixNano()), sql.Named("now", now.UnixNano()),
		sql.Named("key", key), sql.Named("kind", kind))
	var g Grant
	if err := row.Scan(&g.Key, &g.Fence); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil
		}
		return nil, err
	}
	// A reclaimed proposal's result goes with its candidate.
	if _, err := tx.ExecContext(ctx, `DELETE FROM results WHERE key = ?`, g.Key); err != nil {
		return nil, err
	}
	g.Worker, g.Deadline = worker, time.Unix(0, deadline.UnixNano())
	return &g, nil
}

// checkGrant is the four-condition invariant, evaluated inside the
// transaction that writes: state running or proposed, owner, fence, and
// now strictly before the deadline. It returns why the grant fails ("" when
// it holds).
func checkGrant(ctx context.Context, tx *sql.Tx, g Grant, now time.Time) (string, error) {
	var state, owner string
	var fence, deadline int64
	err := tx.QueryRowContext(ctx, `SELECT state, owner, fence, deadline FROM tasks WHERE key = ?`, g.Key).Scan(&state, &owner, &fence, &deadline)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w %q", ErrUnknownTask, g.Key)
	}
	if err != nil {
		return "", err
	}
	switch {
	case state != Running && state != Proposed:
		return fmt.Sprintf("task is %s", state), nil
	case owner != g.Worker:
		return fmt.Sprintf("owner is %s, not %s", owner, g.Worker), nil
	case fence != g.Fence:
		return fmt.Sprintf("fence is %d, grant has %d", fence, g.Fence), nil
	case now.UnixNano() >= deadline:
		return fmt.Sprintf("lease expired at %s (now %s)", time.Unix(0, deadline).UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano)), nil
	}
	return "", nil
}

func refuse(ctx context.Context, tx *sql.Tx, g Grant, op, reason string, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO refusals (key, worker, fence, op, reason, at) VALUES (?, ?, ?, ?, ?, ?)`,
		g.Key, g.Worker, g.Fence, op, reason, now.UnixNano())
	return err
}

// guarded runs write under the four-condition invariant. A refusal is
// recorded (refusals table) and committed, and returned as ErrStaleGrant.
func (c *Coordinator) guarded(ctx context.Context, g Grant, op string, write func(tx *sql.Tx, now time.Time) error) error {
	var reason string
	err := c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		var err error
		if reason, err = checkGrant(ctx, tx, g, now); err != nil {
			return err
		}
		if reason != "" {
			return refuse(ctx, tx, g, op, reason, now)
		}
		return write(tx, now)
	})
	if err != nil {
		return fmt.Errorf("%s %s (fence %d): %w", op, g.Key, g.Fence, err)
	}
	if reason != "" {
		return fmt.Errorf("%s %s by %s (fence %d): %w: %s", op, g.Key, g.Worker, g.Fence, ErrStaleGrant, reason)
	}
	return nil
}

// Renew extends a live grant to now+ttl and returns the new grant.
func (c *Coordinator) Renew(ctx context.Context, g Grant, ttl time.Duration) (Grant, error) {
	if ttl <= 0 {
		return g, fmt.Errorf("renew %s: ttl must be positive", g.Key)
	}
	out := g
	err := c.guarded(ctx, g, "renew", func(tx *sql.Tx, now time.Time) error {
		d := now.Add(ttl)
		out.Deadline = time.Unix(0, d.UnixNano())
		_, err := tx.ExecContext(ctx, `UPDATE tasks SET deadline = ?, updated = ? WHERE key = ?`, d.UnixNano(), now.UnixNano(), g.Key)
		return err
	})
	return out, err
}

// Submit records candidate (and its result bytes) as the task's proposal
// under a live grant; a live grant may replace its own earlier proposal.
func (c *Coordinator) Submit(ctx context.Context, g Grant, candidate string, result []byte) error {
	if candidate == "" {
		return fmt.Errorf("submit %s: empty candidate", g.Key)
	}
	return c.guarded(ctx, g, "submit", func(tx *sql.Tx, now time.Time) error {
		if result == nil {
			result = []byte{}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET state = 'proposed', candidate = ?, updated = ? WHERE key = ?`,
			candidate, now.UnixNano(), g.Key); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO results (key, result) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET result = excluded.result`, g.Key, result)
		return err
	})
}

// Release gives a live grant back: the task is pending again at once, with
// why recorded (a worker cancelled or shutting down).
func (c *Coordinator) Release(ctx context.Context, g Grant, why string) error {
	return c.guarded(ctx, g, "release", func(tx *sql.Tx, now time.Time) error {
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET state = 'pending', owner = '', deadline = 0, candidate = '',
			note = ?, updated = ? WHERE key = ?`, why, now.UnixNano(), g.Key); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM results WHERE key = ?`, g.Key)
		return err
	})
}

// Fail marks a task failed (a trusted caller's decision, e.g. after too
// many claims); dependents stay blocked.
func (c *Coordinator) Fail(ctx context.Context, key, why string) error {
	return c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		r, err := tx.ExecContext(ctx, `UPDATE tasks SET state = 'failed', note = ?, updated = ? WHERE key = ? AND state <> 'accepted'`,
			why, now.UnixNano(), key)
		if err != nil {
			return fmt.Errorf("fail %s: %w", key, err)
		}
		if n, _ := r.RowsAffected(); n == 0 {
			return fmt.Errorf("fail %s: %w or already accepted", key, ErrUnknownTask)
		}
		return nil
	})
}

// Receipt is a trusted runner's record of the checks run on one candidate
// in one environment under one check policy.
type Receipt struct {
	Candidate   string `json:"candidate"`
	Environment string `json:"environment"`
	Policy      string `json:"policy"`
	Passed      bool   `json:"passed"`
	Report      string `json:"report"`
}

// RecordValidation stores a receipt (replacing one for the same candidate,
// environment and policy). A privileged operation: only the trusted runner
// calls it, never a worker's model tools.
func (c *Coordinator) RecordValidation(ctx context.Context, r Receipt) error {
	if r.Candidate == "" || r.Environment == "" || r.Policy == "" {
		return errors.New("record validation: candidate, environment and policy must be set")
	}
	return c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO receipts (candidate, environment, policy, passed, report, recorded) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (candidate, environment, policy) DO UPDATE SET passed = excluded.passed, report = excluded.report, recorded = excluded.recorded`,
			r.Candidate, r.Environment, r.Policy, r.Passed, r.Report, now.UnixNano())
		if err != nil {
			return fmt.Errorf("record validation of %s: %w", r.Candidate, err)
		}
		return nil
	})
}

// Accept accepts the task's proposal when candidate is the task's current
// candidate and a passing receipt exists for (candidate, environment,
// policy). Accepting releases the task's dependents. A privileged operation.
func (c *Coordinator) Accept(ctx context.Context, key, candidate, environment, policy string) error {
	var reason string
	err := c.tx(ctx, func(tx *sql.Tx, now time.Time) error {
		var state, cand string
		err := tx.QueryRowContext(ctx, `SELECT state, candidate FROM tasks WHERE key = ?`, key).Scan(&state, &cand)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w %q", ErrUnknownTask, key)
		}
		if err != nil {
			return err
		}
		if state != Proposed {
			reason = fmt.Sprintf("task is %s, not proposed", state)
			return nil
		}
		if cand != candidate {
			reason = fmt.Sprintf("the task's candidate is %s, not %s", cand, candidate)
			return nil
		}
		var passed bool
		err = tx.QueryRowContext(ctx, `SELECT passed FROM receipts WHERE candidate = ? AND environment = ? AND policy = ?`,
			candidate, environment, policy).Scan(&passed)
		if errors.Is(err, sql.ErrNoRows) {
			reason = fmt.Sprintf("no receipt for candidate %s in environment %s under policy %s", candidate, environment, policy)
			return nil
		}
		if err != nil {
			return err
		}
		if !passed {
			reason = fmt.Sprintf("the receipt for %s says the checks failed", candidate)
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE tasks SET state = 'accepted', updated = ? WHERE key = ?`, now.UnixNano(), key)
		return err
	})
	if err != nil {
		return fmt.Errorf("accept %s: %w", key, err)
	}
	if reason != "" {
		return fmt.Errorf("accept %s: %w: %s", key, ErrNotAccepted, reason)
	}
	return nil
}

// Get returns the task of key.
func (c *Coordinator) Get(ctx context.Context, key string) (Task, error) {
	ts, err := c.tasks(ctx, `WHERE t.key = ?`, key)
	if err != nil {
		return Task{}, fmt.Errorf("get %s: %w", key, err)
	}
	if len(ts) == 0 {
		return Task{}, fmt.Errorf("get %s: %w", key, ErrUnknownTask)
	}
	db, err := c.conn()
	if err != nil {
		return Task{}, fmt.Errorf("get %s: %w", key, err)
	}
	deps, err := depsOf(ctx, db, key)
	if err != nil {
		return Task{}, fmt.Errorf("get %s: %w", key, c.closing(err))
	}
	ts[0].Deps = deps
	return ts[0], nil
}

// Tasks returns the tasks of kind ("" for all) in enqueue order, results
// included when withResults.
func (c *Coordinator) Tasks(ctx context.Context, kind string, withResults bool) ([]Task, error) {
	where, args := "", []any{}
	if kind != "" {
		where, args = `WHERE t.kind = ?`, []any{kind}
	}
	ts, err := c.tasksCols(ctx, withResults, where, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return ts, nil
}

// InState returns the tasks of kind in one state, in enqueue order, with
// their results (e.g. the proposals a validator has yet to judge).
func (c *Coordinator) InState(ctx context.Context, kind, state string) ([]Task, error) {
	ts, err := c.tasksCols(ctx, true, `WHERE t.kind = ? AND t.state = ?`, kind, state)
	if err != nil {
		return nil, fmt.Errorf("list %s tasks: %w", state, err)
	}
	return ts, nil
}

func (c *Coordinator) tasks(ctx context.Context, where string, args ...any) ([]Task, error) {
	return c.tasksCols(ctx, true, where, args...)
}

func (c *Coordinator) tasksCols(ctx context.Context, withResults bool, where string, args ...any) ([]Task, error) {
	db, err := c.conn()
	if err != nil {
		return nil, err
	}
	ts, err := queryTasks(ctx, db, withResults, where, args...)
	return ts, c.closing(err)
}

func queryTasks(ctx context.Context, db *sql.DB, withResults bool, where string, args ...any) ([]Task, error) {
	res, join := "NULL", ""
	if withResults {
		res, join = "r.result", "LEFT JOIN results r ON r.key = t.key"
	}
	rows, err := db.QueryContext(ctx, `SELECT t.key, t.kind, t.payload, t.occurrence, t.state, t.owner, t.fence, t.deadline, t.candidate, `+res+`, t.claims, t.note
		FROM tasks t `+join+` `+where+` ORDER BY t.seq`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		var t Task
		var dl int64
		if err := rows.Scan(&t.Key, &t.Kind, &t.Payload, &t.Occurrence, &t.State, &t.Owner, &t.Fence, &dl, &t.Candidate, &t.Result, &t.Claims, &t.Note); err != nil {
			return nil, err
		}
		t.Deadline = time.Unix(0, dl)
		out = append(out, t)
	}
	return out, rows.Err()
}

// Counts are the number of tasks of a kind in each state, the claims made
// (a task claimed twice was reclaimed once) and the worker mutations
// refused.
type Counts struct {
	Pending, Running, Proposed, Accepted, Failed int
	Claims                                       int
	Refused                                      int
}

// Total is the number of tasks counted.
func (n Counts) Total() int { return n.Pending + n.Running + n.Proposed + n.Accepted + n.Failed }

// Count counts the tasks of kind ("" for all) and the refusals on them.
func (c *Coordinator) Count(ctx context.Context, kind string) (Counts, error) {
	db, err := c.conn()
	if err != nil {
		return Counts{}, fmt.Errorf("count tasks: %w", err)
	}
	n, err := countTasks(ctx, db, kind)
	return n, c.closing(err)
}

func countTasks(ctx context.Context, db *sql.DB, kind string) (Counts, error) {
	var n Counts
	rows, err := db.QueryContext(ctx, `SELECT state, count(*), sum(claims) FROM tasks WHERE ? = '' OR kind = ? GROUP BY state`, kind, kind)
	if err != nil {
		return n, fmt.Errorf("count tasks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var k, cl int
		if err := rows.Scan(&s, &k, &cl); err != nil {
			return n, fmt.Errorf("count tasks: %w", err)
		}
		n.Claims += cl
		switch s {
		case Pending:
			n.Pending = k
		case Running:
			n.Running = k
		case Proposed:
			n.Proposed = k
		case Accepted:
			n.Accepted = k
		case Failed:
			n.Failed = k
		}
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("count tasks: %w", err)
	}
	err = db.QueryRowContext(ctx, `SELECT count(*) FROM refusals r JOIN tasks t ON t.key = r.key WHERE ? = '' OR t.kind = ?`, kind, kind).Scan(&n.Refused)
	if err != nil {
		return n, fmt.Errorf("count refusals: %w", err)
	}
	return n, nil
}

// Refusal is one refused worker mutation.
type Refusal struct {
	Key    string    `json:"key"`
	Worker string    `json:"worker"`
	Fence  int64     `json:"fence"`
	Op     string    `json:"op"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Refusals lists the refused mutations in order.
func (c *Coordinator) Refusals(ctx context.Context) ([]Refusal, error) {
	db, err := c.conn()
	if err != nil {
		return nil, fmt.Errorf("list refusals: %w", err)
	}
	rs, err := queryRefusals(ctx, db)
	return rs, c.closing(err)
}

func queryRefusals(ctx context.Context, db *sql.DB) ([]Refusal, error) {
	rows, err := db.QueryContext(ctx, `SELECT key, worker, fence, op, reason, at FROM refusals ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list refusals: %w", err)
	}
	defer rows.Close()
	var out []Refusal
	for rows.Next() {
		var r Refusal
		var at int64
		if err := rows.Scan(&r.Key, &r.Worker, &r.Fence, &r.Op, &r.Reason, &at); err != nil {
			return nil, fmt.Errorf("list refusals: %w", err)
		}
		r.At = time.Unix(0, at)
		out = append(out, r)
	}
	return out, rows.Err()
}

// SetMeta stores a named value once: a second SetMeta of the same name with
// another value is refused (a suite's definition never changes under its
// workers).
func (c *Coordinator) SetMeta(ctx context.Context, name string, value []byte) error {
	return c.tx(ctx, func(tx *sql.Tx, _ time.Time) error {
		var have []byte
		err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = ?`, name).Scan(&have)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = tx.ExecContext(ctx, `INSERT INTO meta (name, value) VALUES (?, ?)`, name, value)
			return err
		case err != nil:
			return err
		case string(have) != string(value):
			return fmt.Errorf("meta %s: already set to another value (%s, not %s)", name, digest(have), digest(value))
		}
		return nil
	})
}

// Meta reads a named value (nil, nil when unset).
func (c *Coordinator) Meta(ctx context.Context, name string) ([]byte, error) {
	db, err := c.conn()
	if err != nil {
		return nil, fmt.Errorf("meta %s: %w", name, err)
	}
	var v []byte
	err = db.QueryRowContext(ctx, `SELECT value FROM meta WHERE name = ?`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("meta %s: %w", name, c.closing(err))
	}
	return v, nil
}
