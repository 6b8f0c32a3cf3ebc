package collector

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomwork/loomwork/collector/agenttrace"
	"github.com/loomwork/loomwork/collector/genai"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/sqlite"
)

// gatedWriter holds the first write until released, so concurrent callers
// pile up behind it; it writes to the real store.
type gatedWriter struct {
	store.Writer
	once    sync.Once
	release chan struct{}
}

func (g *gatedWriter) WriteSpans(ctx context.Context, spans []store.Span) error {
	g.once.Do(func() { <-g.release })
	return g.Writer.WriteSpans(ctx, spans)
}

func TestCommitterCoalescesConcurrentWritesAndAcksEachCaller(t *testing.T) {
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "t.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(context.Background())
	gw := &gatedWriter{Writer: st, release: make(chan struct{})}
	c := newCommitter(gw, DefaultMaxBatchSpans, time.Minute)
	var mu sync.Mutex
	var batches []int
	c.onBatch = func(requests, spans int, _ time.Duration, err error) {
		mu.Lock()
		batches = append(batches, requests)
		mu.Unlock()
	}
	c.start(1)

	gen := agenttrace.NewGenerator(9, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const callers = 6
	inputs := make([][]store.Span, callers)
	for i := range inputs {
		inputs[i], _ = genai.MapTraces(gen.Batch(1, 5), genai.Options{})
	}
	errs := make(chan error, callers)
	go func() { errs <- c.write(context.Background(), inputs[0]) }()
	var wg sync.WaitGroup
	for i := 1; i < callers; i++ {
		wg.Go(func() { errs <- c.write(context.Background(), inputs[i]) })
	}
	// Let the other callers queue behind the held write; however many got
	// there, each must be acknowledged only after its spans are stored.
	time.Sleep(50 * time.Millisecond)
	close(gw.release)
	wg.Wait()
	for range callers {
		if err := <-errs; err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	for _, in := range inputs {
		got, err := st.GetTrace(context.Background(), in[0].TraceID)
		if err != nil || len(got) != 5 {
			t.Fatalf("acknowledged trace %s: %d spans, %v", in[0].TraceID, len(got), err)
		}
	}
	total := 0
	for _, n := range batches {
		total += n
	}
	if total != callers {
		t.Errorf("batches carried %d requests, want %d", total, callers)
	}
	t.Logf("requests per store write: %v", batches)

	if err := c.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.write(context.Background(), inputs[0]); !errors.Is(err, errShutDown) {
		t.Errorf("write after shutdown: %v, want errShutDown", err)
	}
}

func TestCommitterReportsStoreErrorToEveryCallerOfTheBatch(t *testing.T) {
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "t.db")})
	if err != nil {
		t.Fatal(err)
	}
	st.Shutdown(context.Background()) // a real store that fails every write
	c := newCommitter(st, DefaultMaxBatchSpans, time.Minute)
	c.start(1)
	defer c.shutdown(context.Background())
	spans, _ := genai.MapTraces(agenttrace.NewGenerator(1, time.Now()).Batch(1, 3), genai.Options{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := c.write(context.Background(), spans); err == nil {
				t.Error("write to a closed store was acknowledged")
			}
		})
	}
	wg.Wait()
}

// gatedPrep holds the first prepared write until released; it writes to the
// real embedded store.
type gatedPrep struct {
	store.PreparingWriter
	once    sync.Once
	release chan struct{}
}

func (g *gatedPrep) WriteBatches(ctx context.Context, batches []store.PreparedBatch) error {
	g.once.Do(func() { <-g.release })
	return g.PreparingWriter.WriteBatches(ctx, batches)
}

func TestCommitterWithPreparedWritesStoresEachAckedRequestAndFailsABadOneAlone(t *testing.T) {
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "t.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(context.Background())
	c := newCommitter(st, DefaultMaxBatchSpans, time.Minute)
	gp := &gatedPrep{PreparingWriter: st, release: make(chan struct{})}
	c.prep = gp
	var mu sync.Mutex
	maxRequests := 0
	c.onBatch = func(requests, _ int, _ time.Duration, _ error) {
		mu.Lock()
		maxRequests = max(maxRequests, requests)
		mu.Unlock()
	}
	c.start(1)
	defer c.shutdown(context.Background())

	gen := agenttrace.NewGenerator(11, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const callers = 6
	inputs := make([][]store.Span, callers)
	for i := range inputs {
		inputs[i], _ = genai.MapTraces(gen.Batch(2, 5), genai.Options{})
	}
	// The same spans again from another caller: stored once.
	inputs = append(inputs, inputs[1])
	bad := append([]store.Span{}, inputs[2][:3]...)
	bad[1].SpanID = "not-hex"

	errs := make(chan error, len(inputs))
	go func() { errs <- c.write(context.Background(), inputs[0]) }()
	time.Sleep(20 * time.Millisecond) // the first write is now held
	var wg sync.WaitGroup
	for i := 1; i < len(inputs); i++ {
		wg.Go(func() { errs <- c.write(context.Background(), inputs[i]) })
	}
	badErr := make(chan error, 1)
	wg.Go(func() { badErr <- c.write(context.Background(), bad) })
	time.Sleep(50 * time.Millisecond)
	close(gp.release)
	wg.Wait()
	for range inputs {
		if err := <-errs; err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	if err := <-badErr; err == nil || !strings.Contains(err.Error(), "not-hex") {
		t.Errorf("request with an invalid span id: %v, want an error naming it", err)
	}
	for _, in := range inputs {
		for _, id := range []string{in[0].TraceID, in[len(in)-1].TraceID} {
			got, err := st.GetTrace(context.Background(), id)
			if err != nil || len(got) != 5 {
				t.Fatalf("acknowledged trace %s: %d spans, %v", id, len(got), err)
			}
		}
	}
	t.Logf("most requests in one store write: %d", maxRequests)
}

// slowWriter is the real store, slowed down: every write takes at least d.
type slowWriter struct {
	store.Writer
	d time.Duration
}

func (s slowWriter) WriteSpans(ctx context.Context, spans []store.Span) error {
	time.Sleep(s.d)
	return s.Writer.WriteSpans(ctx, spans)
}

// When the store is behind, a request that would queue longer than
// maxWait is refused at once (errBacklog), instead of waiting until its
// sender's deadline; the requests that were queued are all written.
func TestCommitterRefusesWhatWouldWaitTooLongAndWritesTheRest(t *testing.T) {
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "t.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(context.Background())
	// 50 spans per write of 100 ms at most: ~500 spans/s, and a batch cap
	// of 50 spans keeps it there however many callers queue.
	c := newCommitter(slowWriter{Writer: st, d: 100 * time.Millisecond}, 50, time.Minute)
	c.maxWait = 300 * time.Millisecond
	c.start(1)
	defer c.shutdown(context.Background())
	gen := agenttrace.NewGenerator(10, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	first, _ := genai.MapTraces(gen.Batch(5, 10), genai.Options{})
	if err := c.write(context.Background(), first); err != nil { // the rate is known from here on
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var stored, refused int
	var storedIDs []string
	for range 20 {
		spans, _ := genai.MapTraces(gen.Batch(5, 10), genai.Options{})
		wg.Go(func() {
			began := time.Now()
			err := c.write(context.Background(), spans)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				stored++
				storedIDs = append(storedIDs, spans[0].TraceID)
			case errors.Is(err, errBacklog):
				refused++
				if d := time.Since(began); d > 50*time.Millisecond {
					t.Errorf("a refusal took %s; it must be immediate", d)
				}
			default:
				t.Errorf("write: %v", err)
			}
		})
	}
	wg.Wait()
	t.Logf("%d written, %d refused", stored, refused)
	if refused == 0 || stored == 0 {
		t.Fatalf("%d written, %d refused: 20 concurrent writes of 50 spans at ~500 spans/s with a 300 ms bound must do both", stored, refused)
	}
	for _, id := range storedIDs {
		if spans, err := st.GetTrace(context.Background(), id); err != nil || len(spans) != 10 {
			t.Errorf("acknowledged trace %s: %d spans, %v", id, len(spans), err)
		}
	}
}

// A write whose sender's deadline comes before its turn is refused at once
// (it would be written after the sender gave up, and sent again), even
// with no maxWait bound; behind() says so before any write is attempted.
func TestCommitterRefusesWhatCannotFinishBeforeTheDeadline(t *testing.T) {
	testtier.Slow(t)
	st, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "t.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Shutdown(context.Background())
	c := newCommitter(slowWriter{Writer: st, d: 100 * time.Millisecond}, 50, time.Minute)
	c.start(1)
	defer c.shutdown(context.Background())
	gen := agenttrace.NewGenerator(12, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	first, _ := genai.MapTraces(gen.Batch(5, 10), genai.Options{})
	if err := c.write(context.Background(), first); err != nil { // ~500 spans/s from here on
		t.Fatal(err)
	}
	// Hold the writer: ten writes queued behind it are ~1 s of work.
	var wg sync.WaitGroup
	for range 10 {
		spans, _ := genai.MapTraces(gen.Batch(5, 10), genai.Options{})
		wg.Go(func() {
			if err := c.write(context.Background(), spans); err != nil {
				t.Errorf("queued write without a deadline: %v", err)
			}
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.queued.Load() < 500 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	late, _ := genai.MapTraces(gen.Batch(5, 10), genai.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	err = c.write(ctx, late)
	if !errors.Is(err, errBacklog) || !strings.Contains(err.Error(), "past the sender's deadline") {
		t.Fatalf("write with 200 ms left behind ~1 s of queued work: %v, want an immediate errBacklog naming the deadline", err)
	}
	if d := time.Since(began); d > 50*time.Millisecond {
		t.Errorf("the refusal took %s; it must be immediate", d)
	}
	wg.Wait()
}

// behind() answers as write would judge a write arriving now: only with a
// maxWait bound, a known rate and more than a full batch queued.
func TestCommitterBehindJudgesAsWriteDoes(t *testing.T) {
	c := newCommitter(nil, 50, time.Minute)
	c.rate.Store(500) // spans per second
	c.queued.Store(600)
	c.maxWait = 300 * time.Millisecond
	if !c.behind() {
		t.Error("600 spans queued at 500 spans/s (1.2 s) under a 300 ms bound: not behind")
	}
	c.maxWait = 2 * time.Second
	if c.behind() {
		t.Error("1.2 s of queued work under a 2 s bound: behind")
	}
	c.maxWait = 0
	if c.behind() {
		t.Error("behind without a bound")
	}
	c.maxWait, c.queued = 300*time.Millisecond, atomic.Int64{}
	c.queued.Store(40)
	if c.behind() {
		t.Error("behind with less than a full batch queued")
	}
}
