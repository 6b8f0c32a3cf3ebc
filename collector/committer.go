package collector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomwork/loomwork/store"
)

// errShutDown is returned to writes that arrive after Shutdown began.
var errShutDown = errors.New("exporter is shutting down")

// errBacklog is returned to a write that would wait longer than maxWait
// behind the writes already queued: refused at once, retryably, instead of
// queueing until the sender's deadline (where the sender gives up with
// nothing but a timeout, and the server may still spend the work).
var errBacklog = errors.New("the store is behind")

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
	// maxWait bounds how long a write may expect to queue behind others,
	// judged from the spans queued and the store's recent rate; 0: no bound.
	maxWait time.Duration
	queued  atomic.Int64 // spans handed over or waiting to be, not yet written
	rate    atomic.Int64 // recent store rate, spans per second (0: unknown)
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
	n := int64(len(spans))
	queued := c.queued.Add(n)
	defer c.queued.Add(-n)
	// A full batch's worth is always let in: the rate is measured on the
	// writes so far, which may have been small ones that understate what
	// the store does with a full batch.
	if rate := c.rate.Load(); rate > 0 && queued-n >= int64(c.maxSpans) {
		wait := time.Duration(float64(queued) / float64(rate) * float64(time.Second))
		if c.maxWait > 0 && wait > c.maxWait {
			return fmt.Errorf("%w: behind %d queued spans at ~%d spans/s this request would wait ~%s (more than %s)",
				errBacklog, queued-n, rate, wait.Round(time.Millisecond), c.maxWait)
		}
		// Refused now rather than written after the sender gave up: a
		// write that ends past the deadline is work spent for no
		// acknowledgement, and the sender sends it again.
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return fmt.Errorf("%w: behind %d queued spans at ~%d spans/s this request would wait ~%s, past the sender's deadline in %s",
				errBacklog, queued-n, rate, wait.Round(time.Millisecond), time.Until(dl).Round(time.Millisecond))
		}
	}
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

// behind reports whether a write arriving now would be refused for the
// backlog (as write judges it, less the write's own spans): the admission
// tap asks, so the refusal comes before the request is read and decoded.
func (c *committer) behind() bool {
	queued, rate := c.queued.Load(), c.rate.Load()
	if c.maxWait <= 0 || rate <= 0 || queued < int64(c.maxSpans) {
		return false
	}
	return time.Duration(float64(queued)/float64(rate)*float64(time.Second)) > c.maxWait
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
	took := time.Since(began)
	if err == nil && took > 0 {
		// An average over recent writes, weighting the newest by 1/4.
		r := int64(float64(n) / took.Seconds())
		if old := c.rate.Load(); old > 0 {
			r = old + (r-old)/4
		}
		c.rate.Store(max(r, 1))
	}
	if c.onBatch != nil {
		c.onBatch(len(batch), n, took, err)
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
