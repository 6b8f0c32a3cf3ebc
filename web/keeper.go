package web

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/loomwork/loomwork/store"
)

// Keeper derives the kept window (the bounded rollup, keptWindow) of each
// huge trace behind ingest, so the first person to open a million-span
// trace reads one small row instead of waiting for its million spans'
// bones to be analysed (issue 36: 10.9 s on SQLite, 39–55 s on ClickHouse).
//
// It polls rather than hooking the collector: any number of collectors,
// and any process, may write the store. Each pass lists, per project, the
// largest traces that started within Lookback (the stores keep span counts
// at ingest and sort by them on an index); a trace over Config.WindowSpans
// whose span count has not moved since the previous pass is quiet, and is
// derived once for that count. A trace still growing is left until it
// stops, so the keeper never analyses a trace twice for one burst.
//
// A reader who opens a huge trace before it is kept asks the running
// Keeper for it (web/analysis.go): asked traces are derived first, at
// once, by the same goroutine as the passes, so analyses never run side
// by side.
type Keeper struct {
	cfg KeeperConfig
	srv *Server

	// counts: each listed huge trace's span count at the previous pass;
	// kept: the count it was derived for.
	counts map[keeperKey]int64
	kept   map[keeperKey]int64

	// asks are the traces readers are waiting for, in order; asked finds
	// one by key (a second reader joins the first's ask). wake tells the
	// loop there is one.
	askMu sync.Mutex
	asks  []*ask
	asked map[keeperKey]*ask
	wake  chan struct{}
	// stopped: the loop has ended; asks are refused.
	stopped bool

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// ask is one trace readers are waiting for: done is closed once kw (or
// err) is set.
type ask struct {
	key   keeperKey
	spans int64
	since time.Time
	done  chan struct{}
	kw    keptWindow
	err   error
}

// maxAsks bounds the traces waiting for analysis; a reader past it is
// told the trace is being analysed and asks again on its next refresh.
const maxAsks = 64

type keeperKey struct{ project, traceID string }

// KeeperConfig configures a Keeper.
type KeeperConfig struct {
	// Interval between passes (default 5 s): a huge trace is derived one
	// to two intervals after its last span arrived.
	Interval time.Duration
	// Lookback bounds which traces a pass lists, by start time (default
	// 24 h).
	Lookback time.Duration
	// PerPass is how many of the largest traces a pass looks at per
	// project (default 20, at most store.MaxPageSize).
	PerPass int
	// Projects lists the projects to keep (nil: the default project
	// only). It is called at every pass, so a project added later is kept
	// too.
	Projects func() []string
}

// Validate reports the first bad field.
func (c KeeperConfig) Validate() error {
	switch {
	case c.Interval < 0:
		return errors.New("keeper interval must not be negative")
	case c.Lookback < 0:
		return errors.New("keeper lookback must not be negative")
	case c.PerPass < 0 || c.PerPass > store.MaxPageSize:
		return fmt.Errorf("keeper per_pass %d is not from 0 to %d", c.PerPass, store.MaxPageSize)
	}
	return nil
}

// NewKeeper returns a Keeper for s's store and prices; it does no I/O
// until Start (or Pass).
func (s *Server) NewKeeper(cfg KeeperConfig) (*Keeper, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Interval == 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Lookback == 0 {
		cfg.Lookback = 24 * time.Hour
	}
	if cfg.PerPass == 0 {
		cfg.PerPass = 20
	}
	if cfg.Projects == nil {
		cfg.Projects = func() []string { return []string{""} }
	}
	return &Keeper{cfg: cfg, srv: s, counts: map[keeperKey]int64{}, kept: map[keeperKey]int64{},
		asked: map[keeperKey]*ask{}, wake: make(chan struct{}, 1)}, nil
}

// Start runs a pass every Interval until Shutdown, and derives the traces
// readers ask for as they ask. A store without the window capability has
// nothing to keep: Start then does nothing.
func (k *Keeper) Start(ctx context.Context) error {
	if _, ok := k.srv.windowOf(); !ok {
		return nil
	}
	ctx, k.cancel = context.WithCancel(context.WithoutCancel(ctx))
	k.done = make(chan struct{})
	k.srv.analysis.set(k)
	go func() {
		defer close(k.done)
		defer k.refuseAsks()
		t := time.NewTicker(k.cfg.Interval)
		defer t.Stop()
		failing := false
		for {
			select {
			case <-ctx.Done():
				return
			case <-k.wake:
				k.answerAsks(ctx)
				continue
			case <-t.C:
			}
			k.answerAsks(ctx)
			// Once per failing stretch at warn (a store outage fails every
			// pass), then at debug.
			switch _, err := k.Pass(ctx); {
			case err == nil:
				failing = false
			case ctx.Err() != nil:
			case !failing:
				failing = true
				k.srv.log.Warn("keep huge traces' rollups: pass failed; the next passes retry", "err", err)
			default:
				k.srv.log.Debug("keep huge traces' rollups: pass failed again", "err", err)
			}
		}
	}()
	return nil
}

// Shutdown stops the passes, waiting for one in flight until ctx ends.
func (k *Keeper) Shutdown(ctx context.Context) error {
	if k.cancel == nil {
		return nil
	}
	k.srv.analysis.clear(k)
	k.once.Do(k.cancel)
	select {
	case <-k.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("keeper shutdown: %w", ctx.Err())
	}
}

// Pass looks at each project's largest recent traces once and derives the
// quiet ones not yet kept for their span count; it returns how many quiet
// traces it made sure are kept (derived now, or found kept by a reader who
// opened one first). Passes must not overlap (Start runs them one at a
// time).
func (k *Keeper) Pass(ctx context.Context) (int, error) {
	w, ok := k.srv.windowOf()
	if !ok {
		return 0, nil
	}
	derived := 0
	listed := map[keeperKey]bool{}
	var errs []error
	for _, project := range k.cfg.Projects() {
		pctx := store.WithProject(ctx, project)
		page, err := k.srv.deps.Traces.ListTraces(pctx, store.TraceQuery{
			Start: k.srv.cfg.Now().Add(-k.cfg.Lookback), SortBy: store.SortSpans, Limit: k.cfg.PerPass})
		if err != nil {
			errs = append(errs, fmt.Errorf("project %q: list the largest traces: %w", project, err))
			continue
		}
		for _, t := range page.Traces {
			if t.SpanCount <= int64(k.srv.cfg.WindowSpans) {
				break // sorted by span count, largest first
			}
			key := keeperKey{project, t.TraceID}
			listed[key] = true
			before, seen := k.counts[key]
			k.counts[key] = t.SpanCount
			if !seen || before != t.SpanCount || k.kept[key] == t.SpanCount {
				continue // new or still growing: wait for a quiet pass
			}
			kw, err := k.srv.keptWindow(pctx, w, t.TraceID, t.SpanCount)
			if err != nil {
				if ctx.Err() != nil {
					return derived, ctx.Err()
				}
				errs = append(errs, fmt.Errorf("project %q: trace %s: %w", project, t.TraceID, err))
				continue
			}
			if kw.SpanCount == t.SpanCount {
				k.kept[key] = t.SpanCount
				derived++
			}
		}
	}
	// Forget traces that left the lists, so the maps stay the size of
	// one pass's lists.
	for key := range k.counts {
		if !listed[key] {
			delete(k.counts, key)
			delete(k.kept, key)
		}
	}
	return derived, errors.Join(errs...)
}

// request asks the running keeper for trace id of project, with spans
// spans, and returns the ask to wait on: a new one, or the one already
// waiting for the trace. It returns nil when too many traces wait or the
// keeper has stopped.
func (k *Keeper) request(project, id string, spans int64) *ask {
	key := keeperKey{project, id}
	k.askMu.Lock()
	defer k.askMu.Unlock()
	if a, ok := k.asked[key]; ok {
		return a
	}
	if k.stopped || len(k.asks) >= maxAsks {
		return nil
	}
	a := &ask{key: key, spans: spans, since: k.srv.cfg.Now(), done: make(chan struct{})}
	k.asks = append(k.asks, a)
	k.asked[key] = a
	select {
	case k.wake <- struct{}{}:
	default:
	}
	return a
}

// answerAsks derives every asked trace, oldest ask first, including those
// asked meanwhile.
func (k *Keeper) answerAsks(ctx context.Context) {
	w, _ := k.srv.windowOf()
	for ctx.Err() == nil {
		k.askMu.Lock()
		if len(k.asks) == 0 {
			k.askMu.Unlock()
			return
		}
		a := k.asks[0]
		k.asks = k.asks[1:]
		k.askMu.Unlock()

		a.kw, a.err = k.srv.keptWindow(store.WithProject(ctx, a.key.project), w, a.key.traceID, a.spans)
		switch {
		case ctx.Err() != nil:
			a.err = stoppedError(a.key.traceID)
		case a.err == nil && a.kw.SpanCount == a.spans:
			k.kept[a.key] = a.spans
		case a.err != nil:
			k.srv.log.Warn("analyse a huge trace a reader opened", "trace", a.key.traceID, "err", a.err)
		}
		k.askMu.Lock()
		delete(k.asked, a.key)
		k.askMu.Unlock()
		close(a.done)
	}
}

// refuseAsks ends the asks still waiting when the keeper stops.
func (k *Keeper) refuseAsks() {
	k.askMu.Lock()
	defer k.askMu.Unlock()
	k.stopped = true
	for _, a := range k.asks {
		a.err = stoppedError(a.key.traceID)
		delete(k.asked, a.key)
		close(a.done)
	}
	k.asks = nil
}

// stoppedError is a waiting reader's answer when the keeper stops (the
// server is shutting down): unavailable, so the reader is told to retry.
func stoppedError(traceID string) error {
	return fmt.Errorf("trace %s: its analysis stopped, the server is shutting down: %w", traceID, store.ErrUnavailable)
}
