// Package memjournal is the in-memory journal: an implementation of the
// journal port (journal.Journal) that keeps runs in the process's memory,
// for replays and tests, which need a journal for as long as one run lasts
// and no file. Within that lifetime it keeps the port's promises — events
// numbered from 1 per run and hash-chained, appends all-or-nothing, an
// effect run once per idempotency key — and nothing survives the process.
//
// It has no tables: its effect transactions give the call's key and no
// SQL (journal.SQLTx), so a tool that keeps tables in the journal's
// database (runtime.Tool.EffectSchema) needs journaldb.
package memjournal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/loomwork/loomwork/agents/journal"
)

// Config configures a Journal.
type Config struct {
	// Clock stamps events. Default time.Now.
	Clock func() time.Time

	_ struct{} // prevent unkeyed literals
}

// Journal is an in-memory journal. It is safe for concurrent use; writes
// are serialised, and an effect function runs under the write lock (so it
// must not call the journal, as the port says).
type Journal struct {
	clock   func() time.Time
	mu      sync.Mutex
	runs    map[string][]journal.Event
	effects map[string]effect // completed effects, by idempotency key
}

// effect is a completed AppendEffect: the run it belongs to and the events
// it appended.
type effect struct {
	runID  string
	events []journal.Event
}

var _ journal.Journal = (*Journal)(nil)

// New returns an empty journal.
func New(cfg Config) *Journal {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Journal{clock: cfg.Clock, runs: map[string][]journal.Event{}, effects: map[string]effect{}}
}

// Events returns run's events in sequence order (none for an unknown run).
func (j *Journal) Events(ctx context.Context, runID string) ([]journal.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("read events of run %s: %w", runID, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return clone(j.runs[runID]), nil
}

// Runs returns the ids of the runs in the journal, sorted.
func (j *Journal) Runs(context.Context) ([]string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]string, 0, len(j.runs))
	for id := range j.runs {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// Append appends recs to run's events, all of them or none.
func (j *Journal) Append(ctx context.Context, runID string, recs ...journal.Record) ([]journal.Event, error) {
	if runID == "" {
		return nil, errors.New("append events: empty run id")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("append events to run %s: %w", runID, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	evs, err := j.appendLocked(runID, recs)
	if err != nil {
		return nil, err
	}
	return clone(evs), nil
}

// appendLocked builds the events that follow run's last one and stores
// them; on an error it stores none. j.mu must be held.
func (j *Journal) appendLocked(runID string, recs []journal.Record) ([]journal.Event, error) {
	run := j.runs[runID]
	var prev *journal.Event
	if len(run) > 0 {
		prev = &run[len(run)-1]
	}
	out := make([]journal.Event, 0, len(recs))
	for _, r := range recs {
		if r.Kind == journal.KindSeal {
			return nil, fmt.Errorf("append %s to run %s: seal events exist only in exported journals", r.Kind, runID)
		}
		e, err := journal.Next(runID, prev, r, j.clock())
		if err != nil {
			return nil, fmt.Errorf("append %s to run %s: %w", r.Kind, runID, err)
		}
		out = append(out, e)
		prev = &out[len(out)-1]
	}
	j.runs[runID] = append(run, out...)
	return out, nil
}

// AppendEffect implements journal.Journal.AppendEffect. There is no
// transaction to share: fn's effects are its own (at-least-once, on its
// key), and what the journal guarantees is that fn runs once per key and
// its record is appended only if it succeeded and ctx is still live.
func (j *Journal) AppendEffect(ctx context.Context, runID string, call journal.EffectCall, fn journal.EffectFunc) ([]journal.Event, error) {
	if runID == "" || call.Key == "" {
		return nil, errors.New("append effect: run id and idempotency key must be set")
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if done, ok := j.effects[call.Key]; ok {
		if done.runID != runID {
			return nil, fmt.Errorf("append effect to run %s: idempotency key %s belongs to run %s", runID, call.Key, done.runID)
		}
		return clone(done.events), nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("append effect to run %s: %w", runID, err)
	}
	rec, err := journal.CallEffect(ctx, fn, effectTx{key: call.Key})
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("append effect to run %s: %w", runID, err)
	}
	evs, err := j.appendLocked(runID, []journal.Record{rec})
	if err != nil {
		return nil, err
	}
	j.effects[call.Key] = effect{runID: runID, events: evs}
	return clone(evs), nil
}

// effectTx is the handle an effect function gets: the key, nothing more.
type effectTx struct{ key string }

func (t effectTx) Key() string { return t.key }

// clone copies events so that a caller cannot change what is stored.
func clone(evs []journal.Event) []journal.Event {
	out := slices.Clone(evs)
	for i := range out {
		out[i].Payload = bytes.Clone(out[i].Payload)
	}
	return out
}
