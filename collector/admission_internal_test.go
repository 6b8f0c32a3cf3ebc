package collector

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// Eight calls admitted on a quarter-size estimate all learn their real
// size at once (what a loaded machine does to a flood that arrived
// together). Judged against each other's estimates they would all be
// refused and nothing stored; judged against the confirmed bytes, as many
// as fit are admitted and the rest refused.
func TestAdmissionEstimatesDoNotRefuseEachOther(t *testing.T) {
	const budget = 2 << 20
	a := newAdmission(budget, time.Second)
	a.avg.Store(budget / 8)
	var tickets []*ticket
	for range 8 {
		tk := a.reserve(a.estimate(), protoGRPC)
		if tk == nil {
			t.Fatalf("estimate %d refused with %d of %d used", a.estimate(), a.used.Load(), budget)
		}
		tickets = append(tickets, tk)
	}
	if tk := a.reserve(a.estimate(), protoGRPC); tk != nil {
		t.Fatalf("a ninth estimate admitted over a %d-byte budget (%d used)", budget, a.used.Load())
	}
	// One after another, as the worst interleaving of the concurrent case
	// would have it: each grows while the other seven still hold estimates.
	var admitted []int
	for i, tk := range tickets {
		if tk.resize(1_000_000) {
			admitted = append(admitted, i)
		}
	}
	if len(admitted) != 2 || admitted[0] != 0 || admitted[1] != 1 {
		t.Fatalf("requests %v of 8 one-megabyte requests admitted under a 2 MiB budget, want [0 1]", admitted)
	}
	if c := a.confirmed.Load(); c != 2_000_000 {
		t.Errorf("confirmed %d bytes, want 2000000", c)
	}
	for _, tk := range tickets {
		tk.release()
		tk.release() // twice: the handler and the stats handler both release
	}
	if u, c := a.used.Load(), a.confirmed.Load(); u != 0 || c != 0 {
		t.Errorf("after every release: %d used, %d confirmed, want 0 and 0", u, c)
	}
}

// A request larger than the whole budget is admitted when it is alone, so
// a request under the size limit can always be stored eventually; beside a
// confirmed one it is refused.
func TestAdmissionLoneLargeRequest(t *testing.T) {
	a := newAdmission(1<<20, time.Second)
	big := a.reserve(a.estimate(), protoGRPC)
	if big == nil || !big.resize(3<<20) {
		t.Fatal("a lone 3 MiB request refused under a 1 MiB budget")
	}
	other := a.reserve(a.estimate(), protoGRPC)
	if other != nil {
		t.Fatalf("a second call admitted at the tap with %d of %d bytes in use", a.used.Load(), a.budget)
	}
	big.release()
	small := a.reserve(a.estimate(), protoGRPC)
	if small == nil || !small.resize(100<<10) {
		t.Fatal("a 100 KiB request refused once the budget was free")
	}
	small.release()
	if a.used.Load() != 0 || a.confirmed.Load() != 0 {
		t.Errorf("left reserved: %d used, %d confirmed", a.used.Load(), a.confirmed.Load())
	}
}

// The tap refuses, before the message is read, a request that the ones
// already admitted would keep from finishing within the horizon every
// protocol shares (half the exporters' 10 s timeout, judged from the drain
// rate measured while requests were being refused), and a request of any
// deadline when the store path says it is behind.
func TestAdmissionRefusesWhatCannotFinishWithinTheHorizon(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	a := newAdmission(64<<20, time.Second)
	a.now = func() time.Time { return now }
	a.sampleAt.Store(now.UnixNano())
	gate := a.tap(authenticator{})
	info := &tap.Info{FullMethodName: exportMethod}
	call := func(left time.Duration) (*ticket, error) {
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(left))
		defer cancel()
		ctx, err := gate(ctx, info)
		if err != nil {
			return nil, err
		}
		return ticketFrom(ctx), nil
	}

	// No rate measured yet: admitted whatever the deadline.
	first, err := call(time.Millisecond)
	if err != nil {
		t.Fatalf("refused before any rate was measured: %v", err)
	}
	if !first.resize(1 << 20) {
		t.Fatal("resize refused")
	}
	// Drain 1 MiB per 250 ms sample while something is refused: 4 MiB/s.
	for range 8 {
		a.refused.Add(1)
		now = now.Add(rateSample)
		a.finished(1 << 20)
	}
	if r := a.rate.Load(); r < 3<<20 || r > 5<<20 {
		t.Fatalf("drain rate %d B/s, want ~4 MiB/s", r)
	}
	// An idle interval (nothing refused) leaves the rate alone.
	before := a.rate.Load()
	now = now.Add(time.Second)
	a.finished(1)
	if a.rate.Load() != before {
		t.Errorf("the rate moved from %d to %d over an interval without refusals", before, a.rate.Load())
	}
	// 1 MiB admitted and a 1 MiB estimate: ~0.5 s to drain, within the
	// horizon: admitted with 10 s left, and with 0.6 s left too, as an
	// HTTP request (which cannot state a deadline) would be. Refusing
	// gRPC alone for its own deadline put the refusals of a busy machine
	// on gRPC (make test: 17% of gRPC senders' spans acknowledged, 37% of
	// HTTP's).
	a.avg.Store(1 << 20)
	for _, left := range []time.Duration{10 * time.Second, 600 * time.Millisecond} {
		if tk, err := call(left); err != nil {
			t.Fatalf("%s left behind ~0.5 s of work: %v", left, err)
		} else {
			tk.release()
		}
	}
	// One horizon for every request: half the exporters' default timeout
	// (5 s). Behind ~8 s of work, a gRPC request with a minute left and an
	// HTTP request (which states no deadline) are both refused; behind
	// ~0.5 s, an HTTP request is admitted.
	a.avg.Store(32 << 20)
	if _, err := call(time.Minute); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "would not finish within 5s") {
		t.Fatalf("a minute left behind ~8 s of work: %v, want RESOURCE_EXHAUSTED naming the horizon", err)
	}
	if _, st := a.admit(32<<20, protoHTTP, "test"); st == nil || st.Code() != codes.ResourceExhausted {
		t.Fatalf("an HTTP request behind ~8 s of work: %v, want RESOURCE_EXHAUSTED", st)
	}
	if tk, st := a.admit(1<<20, protoHTTP, "test"); st != nil {
		t.Fatalf("an HTTP request behind ~0.5 s of work: %v", st)
	} else {
		tk.release()
	}
	a.avg.Store(1 << 20)
	// The store path is behind: refused before reading, deadline or not.
	a.behind = func() bool { return true }
	if _, err := call(time.Hour); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "store is behind") {
		t.Fatalf("store behind: %v, want RESOURCE_EXHAUSTED saying so", err)
	}
	first.release()
}

// While both protocols ask for admission, neither holds more than half the
// budget (beyond one request); alone, one protocol may use all of it.
func TestAdmissionSharesTheBudgetBetweenProtocols(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	a := newAdmission(8<<20, time.Second)
	a.now = func() time.Time { return now }
	var held []*ticket
	defer func() {
		for _, tk := range held {
			tk.release()
		}
	}()
	take := func(p protocol) bool {
		tk, st := a.admit(1<<20, p, "test")
		if st != nil {
			return false
		}
		held = append(held, tk)
		return true
	}
	// gRPC alone: the whole budget.
	for i := range 8 {
		if !take(protoGRPC) {
			t.Fatalf("gRPC alone: request %d of 8 × 1 MiB refused under an 8 MiB budget", i)
		}
	}
	if take(protoGRPC) {
		t.Fatal("a ninth 1 MiB request admitted under an 8 MiB budget")
	}
	for _, tk := range held[4:] {
		tk.release()
	}
	held = held[:4]
	// HTTP asks too: gRPC, holding half, is held to it; HTTP gets the rest.
	if !take(protoHTTP) {
		t.Fatal("HTTP refused with half the budget free")
	}
	if take(protoGRPC) {
		t.Error("gRPC, holding half the budget while HTTP asks, was admitted more")
	}
	for i := range 3 {
		if !take(protoHTTP) {
			t.Fatalf("HTTP request %d refused while it holds under half", i+2)
		}
	}
	if take(protoHTTP) {
		t.Error("HTTP admitted past half the budget while gRPC asks")
	}
	// A second later gRPC has stopped asking: HTTP may grow again.
	now = now.Add(2 * shareWindow)
	for _, tk := range held[:4] {
		tk.release()
	}
	held = held[4:]
	for i := range 4 {
		if !take(protoHTTP) {
			t.Fatalf("HTTP alone again: request %d refused with the budget free", i)
		}
	}
}
