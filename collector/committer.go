package collector

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/loomwork/loomwork/store"
)

// errShutDown is returned to writes that arrive after Shutdown began.
var errShutDown = errors.New("exporter is shutting down")

// committer coalesces concurrent writes (group commit). Each caller hands
// its spans over and waits; a writer goroutine takes every request waiting
// at that moment (up to maxSpans), writes them in one WriteSpans call and
// tells each caller the outcome. Nothing is acknowledged before the store
// returned, and no data waits in memory without a caller waiting for it.
type committer struct {
	w        store.Writer
	maxSpans int
	timeout  time.Duration // per store write
	reqs     chan *pending
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	onBatch  func(requests, spans int, d time.Duration, err error)
	// prep, when set (the store.PreparingWriter capability), lets each
	// caller do the store's encoding work concurrently before handing
	// over, so the serialised write does only the database part.
	prep store.PreparingWriter
}

type pending struct {
	spans    []store.Span
	prepared store.PreparedBatch // from prep.Prepare, when the store can prepare
	done     chan error          // buffered: the writer never blocks on a gone caller
}

func newCommitter(w store.Writer, maxSpans int, timeout time.Duration) *committer {
	return &committer{
		w:        w,
		maxSpans: maxSpans,
		timeout:  timeout,
		reqs:     make(chan *pending),
		stop:     make(chan struct{}),
	}
}

func (c *committer) start(writers int) {
	for range writers {
		c.wg.Go(c.loop)
	}
}

// write stores spans, coalesced with other concurrent writes. It returns
// when the write that carried them finished, or when ctx ends (the write may
// then still complete; a retry is harmless because stores are idempotent).
func (c *committer) write(ctx context.Context, spans []store.Span) error {
	p := &pending{spans: spans, done: make(chan error, 1)}
	if c.prep != nil {
		// In the caller's goroutine: concurrent requests encode in
		// parallel, and a request with a span the store rejects fails alone
		// instead of failing the group it would have joined.
		var err error
		if p.prepared, err = c.prep.Prepare(spans); err != nil {
			return err
		}
	}
	select {
	case c.reqs <- p:
	case <-c.stop:
		return errShutDown
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *committer) loop() {
	for {
		select {
		case p := <-c.reqs:
			c.commit(p)
		case <-c.stop:
			// Callers that already handed over were served by commit; a
			// caller still blocked in send sees stop too and fails.
			return
		}
	}
}

func (c *committer) commit(first *pending) {
	batch := []*pending{first}
	n := len(first.spans)
collect:
	for n < c.maxSpans {
		select {
		case p := <-c.reqs:
			batch = append(batch, p)
			n += len(p.spans)
		default:
			break collect
		}
	}
	ctx := context.Background()
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	began := time.Now()
	var err error
	if c.prep != nil {
		prepared := make([]store.PreparedBatch, len(batch))
		for i, p := range batch {
			prepared[i] = p.prepared
		}
		err = c.prep.WriteBatches(ctx, prepared)
	} else {
		spans := first.spans
		if len(batch) > 1 {
			spans = make([]store.Span, 0, n)
			for _, p := range batch {
				spans = append(spans, p.spans...)
			}
		}
		err = c.w.WriteSpans(ctx, spans)
	}
	if c.onBatch != nil {
		c.onBatch(len(batch), n, time.Since(began), err)
	}
	for _, p := range batch {
		p.done <- err
	}
}

// shutdown stops the writers after the write in progress (if any) ends.
// Callers must stop sending first (the receivers are shut down before the
// exporter), so nothing acknowledged is lost.
func (c *committer) shutdown(ctx context.Context) error {
	c.stopOnce.Do(func() { close(c.stop) })
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
