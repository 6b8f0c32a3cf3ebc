package memory

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver

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

// Kind is a class of memory.
type Kind string

// The three kinds a store keeps (working memory is the context window).
const (
	Episodic   Kind = "episodic"
	Semantic   Kind = "semantic"
	Procedural Kind = "procedural"
)

// ParseKind checks a kind name.
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case Episodic, Semantic, Procedural:
		return k, nil
	}
	return "", fmt.Errorf("unknown memory kind %q (want episodic, semantic or procedural)", s)
}

// Scope is where a record lives; no operation crosses scopes.
type Scope struct {
	Tenant    string `json:"tenant"`
	Agent     string `json:"agent"`
	Namespace string `json:"namespace"`
}

// Validate requires every part.
func (s Scope) Validate() error {
	var errs []error
	if s.Tenant == "" {
		errs = append(errs, errors.New("scope tenant must be set"))
	}
	if s.Agent == "" {
		errs = append(errs, errors.New("scope agent must be set"))
	}
	if s.Namespace == "" {
		errs = append(errs, errors.New("scope namespace must be set"))
	}
	return errors.Join(errs...)
}

func (s Scope) String() string { return s.Tenant + "/" + s.Agent + "/" + s.Namespace }

// Record is one memory.
type Record struct {
	Key      string  `json:"key"`
	Kind     Kind    `json:"kind"`
	Text     string  `json:"text"`
	Salience float64 `json:"salience"`
	Hits     int     `json:"hits"`
	// Written is when the record was written or last merged into: the
	// start of its decay. Zero on a write means "now" (the store's clock).
	Written time.Time `json:"written"`
	// SourceRuns are the runs that wrote or merged into the record.
	SourceRuns []string `json:"source_runs,omitempty"`
	// Provenance says what the record was distilled from (a journal
	// event, a document id).
	Provenance string `json:"provenance,omitempty"`
}

// Outcome is the answer to a write.
type Outcome string

// The four answers to a write.
const (
	Written             Outcome = "written"
	RejectedLowSalience Outcome = "rejected_low_salience"
	Merged              Outcome = "merged"
	Replaced            Outcome = "replaced" // same key, new text: the new record replaces the old
)

// Config configures a Store.
type Config struct {
	// Path is the SQLite file, created when missing (conventionally beside
	// the run journal).
	Path string
	// MinSalience admits writes and forgets decayed records (default 0.6).
	MinSalience float64
	// HalfLife is the decay half-life (default 30 days).
	HalfLife time.Duration
	// MergeThreshold is the token Jaccard at which a write merges into an
	// existing record of the same kind and scope (default 0.8).
	MergeThreshold float64
	// KindWeights multiply a kind's retrieval score (default
	// DefaultKindWeights).
	KindWeights map[Kind]float64
	// Clock stamps writes whose time is zero. Default time.Now.
	Clock func() time.Time

	_ struct{}
}

// DefaultKindWeights weigh a procedure three times a fact or an episode.
// The weight is not in the reference design's formula, but its printed
// scores (2.050 for the procedure, 0.109 for the fact) are reproduced only
// with it: overlap 4/6 × 0.9·2^(5/100) × 1.1 = 0.683 is a third of 2.050.
var DefaultKindWeights = map[Kind]float64{Procedural: 3, Semantic: 1, Episodic: 1}

// Validate reports every configuration problem.
func (c Config) Validate() error {
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("path must be set"))
	} else if c.Path == ":memory:" || strings.HasPrefix(c.Path, "file:") {
		errs = append(errs, fmt.Errorf("path must be a file path (got %q): memory must survive the process", c.Path))
	}
	if c.MinSalience < 0 || c.MinSalience > 1 {
		errs = append(errs, fmt.Errorf("min_salience must be in [0, 1] (got %v)", c.MinSalience))
	}
	if c.HalfLife < 0 {
		errs = append(errs, fmt.Errorf("half_life must not be negative (got %s)", c.HalfLife))
	}
	if c.MergeThreshold < 0 || c.MergeThreshold > 1 {
		errs = append(errs, fmt.Errorf("merge_threshold must be in [0, 1] (got %v)", c.MergeThreshold))
	}
	for k, w := range c.KindWeights {
		if _, err := ParseKind(string(k)); err != nil {
			errs = append(errs, fmt.Errorf("kind_weights: %w", err))
		}
		if w < 0 || math.IsNaN(w) {
			errs = append(errs, fmt.Errorf("kind_weights[%s] must not be negative (got %v)", k, w))
		}
	}
	return errors.Join(errs...)
}

// Store is the durable memory store.
type Store struct {
	cfg Config
	db  *sql.DB
	mu  sync.Mutex // serialises this process's writes
}

// New returns a Store for cfg; it does no I/O (call Start).
func New(cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("memory config: %w", err)
	}
	if cfg.MinSalience == 0 {
		cfg.MinSalience = 0.6
	}
	if cfg.HalfLife == 0 {
		cfg.HalfLife = 30 * 24 * time.Hour
	}
	if cfg.MergeThreshold == 0 {
		cfg.MergeThreshold = 0.8
	}
	if cfg.KindWeights == nil {
		cfg.KindWeights = DefaultKindWeights
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
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
	db, err := sqlmigrate.OpenDurable(s.cfg.Path, 5*time.Second, false)
	if err != nil {
		return fmt.Errorf("open memory %s: %w", s.cfg.Path, err)
	}
	s.db = db
	if err := s.migrate(ctx); err != nil {
		return errors.Join(err, db.Close())
	}
	return nil
}

// migrate brings the file's schema up to date. Its errors name the file.
// The migrations are stamped with the wall clock, not cfg.Clock.
func (s *Store) migrate(ctx context.Context) error {
	name := "memory store " + s.cfg.Path
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	_, _, err = sqlmigrate.Apply(ctx, s.db, name, ms, sqlmigrate.Options{Adopt: adoptLegacy})
	return err
}

// adoptLegacy maps a memory store made before it used internal/sqlmigrate
// (user_version 0) to its migration version. Those builds ran one
// schema.sql and recorded schema_version in memory_meta; it was 1 in
// every build, and that schema is migration 1. A file without the row (a
// new file) starts from 0. memory_meta is left as it is: nothing reads it
// any more.
func adoptLegacy(ctx context.Context, tx *sql.Tx) (int, error) {
	return sqlmigrate.LegacyVersion(ctx, tx, "memory_meta")
}

// Shutdown closes the database; safe to call twice and without Start.
func (s *Store) Shutdown(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	if err != nil {
		return fmt.Errorf("close memory %s: %w", s.cfg.Path, err)
	}
	return nil
}

// Config returns the store's configuration with defaults filled.
func (s *Store) Config() Config { return s.cfg }

var tokenRE = regexp.MustCompile(`[\p{L}\p{N}]+`)

// Tokens are the distinct lower-cased letter/digit runs of text.
func Tokens(text string) map[string]bool {
	out := map[string]bool{}
	for _, t := range tokenRE.FindAllString(strings.ToLower(text), -1) {
		out[t] = true
	}
	return out
}

// Jaccard is the token-set similarity used for near-duplicate merges.
func Jaccard(a, b string) float64 {
	ta, tb := Tokens(a), Tokens(b)
	if len(ta) == 0 && len(tb) == 0 {
		return 1
	}
	inter := 0
	for t := range ta {
		if tb[t] {
			inter++
		}
	}
	return float64(inter) / float64(len(ta)+len(tb)-inter)
}

// Overlap is the share of the query's distinct tokens that text contains.
func Overlap(query, text string) float64 {
	q, r := Tokens(query), Tokens(text)
	if len(q) == 0 {
		return 0
	}
	n := 0
	for t := range q {
		if r[t] {
			n++
		}
	}
	return float64(n) / float64(len(q))
}

// Decayed is salience s written at t0, seen at now: s·2^(-(now-t0)/h).
// The age is not clamped at zero, so a record seen before its (merged)
// write time counts slightly more than its salience; with a real clock
// that cannot happen, and the reference example depends on it.
func Decayed(s float64, t0, now time.Time, halfLife time.Duration) float64 {
	age := now.Sub(t0).Seconds()
	return s * math.Exp2(-age/halfLife.Seconds())
}

func (s *Store) check(scope Scope) error {
	if s.db == nil {
		return errors.New("memory store is not started")
	}
	return scope.Validate()
}

// Write applies the write policy to r in scope and says what happened;
// the key is the record now holding the knowledge (the existing record's
// on a merge).
func (s *Store) Write(ctx context.Context, scope Scope, r Record) (Outcome, string, error) {
	if err := s.check(scope); err != nil {
		return "", "", fmt.Errorf("memory write %q: %w", r.Key, err)
	}
	if r.Key == "" {
		return "", "", errors.New("memory write: record has no key")
	}
	if _, err := ParseKind(string(r.Kind)); err != nil {
		return "", "", fmt.Errorf("memory write %q: %w", r.Key, err)
	}
	if r.Salience < 0 || r.Salience > 1 || math.IsNaN(r.Salience) {
		return "", "", fmt.Errorf("memory write %q: salience must be in [0, 1] (got %v)", r.Key, r.Salience)
	}
	if strings.TrimSpace(r.Text) == "" {
		return "", "", fmt.Errorf("memory write %q: empty text", r.Key)
	}
	if r.Salience < s.cfg.MinSalience {
		return RejectedLowSalience, "", nil
	}
	if r.Written.IsZero() {
		r.Written = s.cfg.Clock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return "", "", fmt.Errorf("memory write %q: %w", r.Key, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	existing, err := scan(tx.QueryContext(ctx, selectCols+` WHERE tenant=? AND agent=? AND namespace=? ORDER BY seq`, scope.Tenant, scope.Agent, scope.Namespace))
	if err != nil {
		return "", "", fmt.Errorf("memory write %q: %w", r.Key, err)
	}
	for _, e := range existing {
		// The same key with a near-duplicate text is the same knowledge
		// written again (a run distilled twice): merged below, counting a
		// hit. The same key with new text replaces the record.
		if e.Key == r.Key && (e.Kind != r.Kind || Jaccard(e.Text, r.Text) < s.cfg.MergeThreshold) {
			if _, err := tx.ExecContext(ctx, `DELETE FROM memory_records WHERE tenant=? AND agent=? AND namespace=? AND key=?`, scope.Tenant, scope.Agent, scope.Namespace, r.Key); err != nil {
				return "", "", fmt.Errorf("memory write %q: %w", r.Key, err)
			}
			if err := insert(ctx, tx, scope, r); err != nil {
				return "", "", err
			}
			return Replaced, r.Key, tx.Commit()
		}
	}
	best, bestSim := -1, 0.0
	for i, e := range existing {
		if e.Kind != r.Kind {
			continue
		}
		sim := Jaccard(e.Text, r.Text)
		if e.Key == r.Key {
			sim = 2 // above any other candidate
		}
		if sim >= s.cfg.MergeThreshold && sim > bestSim {
			best, bestSim = i, sim
		}
	}
	if best >= 0 {
		e := existing[best]
		e.Salience = max(e.Salience, r.Salience)
		e.Hits++
		if r.Written.After(e.Written) {
			e.Written = r.Written
		}
		for _, run := range r.SourceRuns {
			if !contains(e.SourceRuns, run) {
				e.SourceRuns = append(e.SourceRuns, run)
			}
		}
		runs, _ := json.Marshal(e.SourceRuns)
		if _, err := tx.ExecContext(ctx, `UPDATE memory_records SET salience=?, hits=?, written_ns=?, source_runs=? WHERE tenant=? AND agent=? AND namespace=? AND key=?`,
			e.Salience, e.Hits, e.Written.UnixNano(), string(runs), scope.Tenant, scope.Agent, scope.Namespace, e.Key); err != nil {
			return "", "", fmt.Errorf("memory write %q: merge into %q: %w", r.Key, e.Key, err)
		}
		return Merged, e.Key, tx.Commit()
	}
	if err := insert(ctx, tx, scope, r); err != nil {
		return "", "", err
	}
	return Written, r.Key, tx.Commit()
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func insert(ctx context.Context, tx *sql.Tx, scope Scope, r Record) error {
	runs, err := json.Marshal(r.SourceRuns)
	if err != nil {
		return err
	}
	if r.SourceRuns == nil {
		runs = []byte("[]")
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO memory_records(tenant, agent, namespace, key, kind, text, salience, hits, written_ns, source_runs, provenance) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		scope.Tenant, scope.Agent, scope.Namespace, r.Key, string(r.Kind), r.Text, r.Salience, r.Hits, r.Written.UnixNano(), string(runs), r.Provenance)
	if err != nil {
		return fmt.Errorf("memory write %q: %w", r.Key, err)
	}
	return nil
}

const selectCols = `SELECT key, kind, text, salience, hits, written_ns, source_runs, provenance FROM memory_records`

func scan(rows *sql.Rows, err error) ([]Record, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Record
	for rows.Next() {
		var r Record
		var kind, runs string
		var ns int64
		if err := rows.Scan(&r.Key, &kind, &r.Text, &r.Salience, &r.Hits, &ns, &runs, &r.Provenance); err != nil {
			return nil, err
		}
		r.Kind = Kind(kind)
		r.Written = time.Unix(0, ns).UTC()
		if err := json.Unmarshal([]byte(runs), &r.SourceRuns); err != nil {
			return nil, fmt.Errorf("record %q: source_runs: %w", r.Key, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Records lists a scope's records in write order.
func (s *Store) Records(ctx context.Context, scope Scope) ([]Record, error) {
	if err := s.check(scope); err != nil {
		return nil, fmt.Errorf("memory records: %w", err)
	}
	recs, err := scan(s.db.QueryContext(ctx, selectCols+` WHERE tenant=? AND agent=? AND namespace=? ORDER BY seq`, scope.Tenant, scope.Agent, scope.Namespace))
	if err != nil {
		return nil, fmt.Errorf("memory records %s: %w", scope, err)
	}
	return recs, nil
}

// Scopes lists the scopes that hold records.
func (s *Store) Scopes(ctx context.Context) ([]Scope, error) {
	if s.db == nil {
		return nil, errors.New("memory store is not started")
	}
	rows, err := s.db.QueryContext(ctx, `SELECT DISTINCT tenant, agent, namespace FROM memory_records ORDER BY 1, 2, 3`)
	if err != nil {
		return nil, fmt.Errorf("memory scopes: %w", err)
	}
	defer rows.Close()
	var out []Scope
	for rows.Next() {
		var sc Scope
		if err := rows.Scan(&sc.Tenant, &sc.Agent, &sc.Namespace); err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, rows.Err()
}

// ErrNotFound is returned for a key a scope does not hold.
var ErrNotFound = errors.New("no such memory record")

// Get returns one record.
func (s *Store) Get(ctx context.Context, scope Scope, key string) (Record, error) {
	if err := s.check(scope); err != nil {
		return Record{}, fmt.Errorf("memory get %q: %w", key, err)
	}
	recs, err := scan(s.db.QueryContext(ctx, selectCols+` WHERE tenant=? AND agent=? AND namespace=? AND key=?`, scope.Tenant, scope.Agent, scope.Namespace, key))
	if err != nil {
		return Record{}, fmt.Errorf("memory get %q: %w", key, err)
	}
	if len(recs) == 0 {
		return Record{}, fmt.Errorf("memory get %q in %s: %w", key, scope, ErrNotFound)
	}
	return recs[0], nil
}

// Scored is a retrieved record and its score.
type Scored struct {
	Record  Record  `json:"record"`
	Score   float64 `json:"score"`
	Overlap float64 `json:"overlap"`
	Decayed float64 `json:"decayed_salience"`
}

// Retrieve returns up to k records of scope with positive overlap with
// query, best first (ties by key), scored at now. It only reads.
func (s *Store) Retrieve(ctx context.Context, scope Scope, query string, k int, now time.Time) ([]Scored, error) {
	recs, err := s.Records(ctx, scope)
	if err != nil {
		return nil, err
	}
	var out []Scored
	for _, r := range recs {
		ov := Overlap(query, r.Text)
		if ov == 0 {
			continue
		}
		d := Decayed(r.Salience, r.Written, now, s.cfg.HalfLife)
		w, ok := s.cfg.KindWeights[r.Kind]
		if !ok {
			w = 1
		}
		out = append(out, Scored{Record: r, Overlap: ov, Decayed: d, Score: ov * d * (1 + 0.1*float64(r.Hits)) * w})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].Record.Key < out[j].Record.Key
	})
	if k > 0 && len(out) > k {
		out = out[:k]
	}
	return out, nil
}

// Touch counts a use of a record (a hit): it raises its retrieval rank but
// neither renews its salience nor restarts its decay.
func (s *Store) Touch(ctx context.Context, scope Scope, key string) error {
	if err := s.check(scope); err != nil {
		return fmt.Errorf("memory touch %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.db.ExecContext(ctx, `UPDATE memory_records SET hits=hits+1 WHERE tenant=? AND agent=? AND namespace=? AND key=?`, scope.Tenant, scope.Agent, scope.Namespace, key)
	if err != nil {
		return fmt.Errorf("memory touch %q: %w", key, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("memory touch %q in %s: %w", key, scope, ErrNotFound)
	}
	return nil
}

// Forget deletes the scope's records whose salience has decayed below the
// threshold at now, and returns their keys in write order.
func (s *Store) Forget(ctx context.Context, scope Scope, now time.Time) ([]string, error) {
	recs, err := s.Records(ctx, scope)
	if err != nil {
		return nil, err
	}
	var gone []string
	for _, r := range recs {
		if Decayed(r.Salience, r.Written, now, s.cfg.HalfLife) < s.cfg.MinSalience {
			gone = append(gone, r.Key)
		}
	}
	for _, k := range gone {
		if err := s.Delete(ctx, scope, k); err != nil {
			return nil, err
		}
	}
	return gone, nil
}

// Delete removes one record.
func (s *Store) Delete(ctx context.Context, scope Scope, key string) error {
	if err := s.check(scope); err != nil {
		return fmt.Errorf("memory delete %q: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.db.ExecContext(ctx, `DELETE FROM memory_records WHERE tenant=? AND agent=? AND namespace=? AND key=?`, scope.Tenant, scope.Agent, scope.Namespace, key)
	if err != nil {
		return fmt.Errorf("memory delete %q: %w", key, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("memory delete %q in %s: %w", key, scope, ErrNotFound)
	}
	return nil
}
