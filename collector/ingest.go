package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"

	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/collector/redact"
	"github.com/loomwork/loomwork/collector/spool"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storeurl"
)

// ingester is the write side every way into the store shares: it stamps
// each span with its project, drops content the project does not capture
// and redacts (projects.go), turns away what no store can hold
// (store.CheckStorable), and hands the rest to the committer — or to the
// spool — which acknowledges only once the store (or the fsynced spool)
// has them.
//
// Two callers drive it, and the Server wires both explicitly: serve's own
// OTLP front (front.go), which decodes protobuf straight into store spans
// and calls consume; and the Collector exporter (exporter.go), the
// component a custom otelcol build or `--receiver otlp` uses, which maps
// pdata and calls the same consume. There is no path from one to the
// other.
type ingester struct {
	cfg      Config
	log      *zap.Logger
	slog     *slog.Logger
	injected store.Writer     // nil: start opens cfg.Store and owns it
	policy   PolicyFunc       // nil: every project captures content
	redactor *redact.Redactor // nil: no redaction

	contentDropped atomic.Int64

	mu        sync.Mutex
	owned     store.Store // opened in start, shut down in shutdown
	committer *committer
	spooler   *spooler          // instead of the committer when Config.SpoolDir is set
	checker   store.SpanChecker // the store's, when it has spans it can never store
}

// unstorable moves the spans no store can hold (store.CheckStorable, the
// one rule for every backend) or this store never accepts (c, its
// store.SpanChecker when it has one) from spans to rejected, so each is
// refused alone through partial_success instead of failing its whole
// request with a status the sender retries for ever.
func unstorable(c store.SpanChecker, spans []store.Span, rejected []genai.Rejection) ([]store.Span, []genai.Rejection) {
	kept := spans[:0]
	// The spans of one OTLP resource or scope share its attribute map:
	// checked once, not once a span.
	var check store.StorableChecker
	for i := range spans {
		sp := &spans[i]
		err := check.Check(sp)
		if err == nil && c != nil {
			err = c.CheckSpan(sp)
		}
		if err != nil {
			rejected = append(rejected, genai.Rejection{TraceID: sp.TraceID, SpanID: sp.SpanID, SpanName: sp.Name, Reason: err.Error()})
			continue
		}
		kept = append(kept, *sp)
	}
	return kept, rejected
}

// start opens the store when none was injected and starts the committer
// or the spool.
func (e *ingester) start(ctx context.Context) error {
	w := e.injected
	if w == nil {
		st, err := storeurl.Open(ctx, e.cfg.Store, false)
		if err != nil {
			return fmt.Errorf("loomwork exporter: %w", err)
		}
		e.owned, w = st, st
	}
	// A store write always has a deadline, so a hung store cannot hold
	// the writers for ever; callers' own deadlines still apply.
	writeTimeout := e.cfg.Timeout
	if writeTimeout == 0 {
		writeTimeout = DefaultTimeout
	}
	checker, _ := w.(store.SpanChecker)
	if e.cfg.SpoolDir != "" {
		sw, ok := w.(store.SpoolingWriter)
		if !ok {
			e.closeOwned(ctx)
			return fmt.Errorf("loomwork exporter: spool_dir is set but the store (%T) cannot spool; the embedded store writes directly", w)
		}
		wal, err := spool.Open(ctx, spool.Options{Dir: e.cfg.SpoolDir, MaxBytes: e.cfg.spoolMaxBytes(), Logger: e.slog})
		if err != nil {
			e.closeOwned(ctx)
			return fmt.Errorf("loomwork exporter: open spool: %w", err)
		}
		sp := newSpooler(sw, wal, e.log, e.cfg.retryAfter(), writeTimeout, e.cfg.spoolBatchBytes())
		sp.start()
		e.mu.Lock()
		e.spooler, e.checker = sp, checker
		e.mu.Unlock()
		return nil
	}
	c := newCommitter(w, e.cfg.maxBatchSpans(), writeTimeout)
	c.maxWait = e.cfg.maxQueueWait()
	// A store that can split its writes encodes each request in the
	// request's goroutine (store.PreparingWriter, an optional capability).
	if pw, ok := w.(store.PreparingWriter); ok {
		c.prep = pw
	}
	c.onBatch = func(requests, spans int, d time.Duration, err error) {
		if err != nil {
			e.log.Warn("store write failed; senders are told to retry",
				zap.Int("requests", requests), zap.Int("spans", spans), zap.Duration("took", d), zap.Error(err))
			return
		}
		if ce := e.log.Check(zap.DebugLevel, "stored spans"); ce != nil {
			ce.Write(zap.Int("requests", requests), zap.Int("spans", spans), zap.Duration("took", d))
		}
	}
	c.start(e.cfg.writers())
	e.mu.Lock()
	e.committer, e.checker = c, checker
	e.mu.Unlock()
	return nil
}

// closeOwned shuts down a store start opened, when start fails after.
func (e *ingester) closeOwned(ctx context.Context) {
	if e.owned != nil {
		_ = e.owned.Shutdown(ctx)
		e.owned = nil
	}
}

// shutdown drains the writes in flight, stops the spool and shuts down a
// store start opened.
func (e *ingester) shutdown(ctx context.Context) error {
	e.mu.Lock()
	c, sp, owned := e.committer, e.spooler, e.owned
	e.committer, e.spooler, e.owned = nil, nil, nil
	e.mu.Unlock()
	var errs []error
	if c != nil {
		if err := c.shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("drain store writes: %w", err))
		}
	}
	if sp != nil {
		if err := sp.shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop spool: %w", err))
		}
	}
	if owned != nil {
		if err := owned.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shut down store: %w", err))
		}
	}
	return errors.Join(errs...)
}

// mapOptions is how OTLP becomes store spans for this ingester (attribute
// truncation): both decoders, genai.DecodeProto and genai.MapTraces, take it.
func (e *ingester) mapOptions() genai.Options { return e.cfg.mapOptions() }

// storeBehind reports whether the committer would refuse a write now for
// its backlog (never, with the spool: a full spool refuses on its own).
func (e *ingester) storeBehind() bool {
	e.mu.Lock()
	c := e.committer
	e.mu.Unlock()
	return c != nil && c.behind()
}

// consume stores spans already mapped. rejected are the request's spans
// the mapping refused; consume adds those the store can never hold and
// returns them all, for the caller to report (partial_success) or log. An
// error means nothing of this call is stored and the sender should retry:
// a retryable status says when.
func (e *ingester) consume(ctx context.Context, spans []store.Span, rejected []genai.Rejection) ([]genai.Rejection, error) {
	// Project, content capture and redaction, before anything is written
	// (projects.go).
	e.prepare(ctx, spans)
	e.mu.Lock()
	c, sp, checker := e.committer, e.spooler, e.checker
	e.mu.Unlock()
	spans, rejected = unstorable(checker, spans, rejected)
	if len(spans) == 0 {
		return rejected, nil
	}
	if sp != nil {
		return rejected, sp.write(ctx, spans)
	}
	if c == nil {
		return rejected, newRetryable(codes.Unavailable, errors.New("loomwork exporter is not started"), e.cfg.retryAfter())
	}
	if err := c.write(ctx, spans); err != nil {
		code := codes.Unavailable
		if errors.Is(err, errBacklog) {
			code = codes.ResourceExhausted
		}
		return rejected, newRetryable(code, fmt.Errorf("store %d spans: %w", len(spans), err), e.cfg.retryAfter())
	}
	return rejected, nil
}

// spoolHealth reports the spool's state; false when there is no spool.
func (e *ingester) spoolHealth() (SpoolHealth, bool) {
	e.mu.Lock()
	sp := e.spooler
	e.mu.Unlock()
	if sp == nil {
		return SpoolHealth{}, false
	}
	return sp.health(e.cfg.SpoolDir), true
}
