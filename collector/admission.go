package collector

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/loomwork/loomwork/store"
)

// admission bounds the request bytes the front holds at once, and refuses
// work it cannot take before spending memory on it: a request costs its
// wire bytes when read and several times that once decoded and mapped, so
// refusing after the decode (as the memory limiter does, measuring the heap
// once a second) comes too late under a flood. Refusals are retryable
// (RESOURCE_EXHAUSTED with RetryInfo, HTTP 429 with Retry-After), so the
// requests already admitted finish and goodput holds.
//
// gRPC reads a whole request message before any handler or interceptor
// runs; only the transport's tap sees a call before its message is read,
// and it does not know the size yet. So the tap reserves an estimate (the
// recent average request size) and the handler corrects it to the real
// size before decoding, refusing if that no longer fits.
//
// The correction is judged against the confirmed bytes only (requests
// whose real size is known), not against other calls' estimates: those are
// guesses still waiting for their own correction. Judged against
// everything, eight calls each holding a quarter-size estimate refuse one
// another when they all grow at once, and nothing is admitted at all.
type admission struct {
	budget     int64 // bytes of requests admitted at once
	retryAfter time.Duration
	now        func() time.Time
	// behind, when set, says the store path is behind (the committer
	// would refuse a write now): the tap refuses before the message is
	// read, instead of the handler refusing after decoding it.
	behind func() bool

	used      atomic.Int64 // estimates and confirmed sizes: the tap's gate
	confirmed atomic.Int64 // real sizes only: the gate before decoding
	avg       atomic.Int64 // running average request size, the tap's estimate
	refused   atomic.Int64 // refusals since start, for /healthz and tests
	// usedBy is used per protocol; seen is when each protocol last asked
	// for admission (unix nanoseconds): see reserve's fair shares.
	usedBy [protocols]atomic.Int64
	seen   [protocols]atomic.Int64

	// The measured drain rate, for refusing what cannot finish before the
	// sender's deadline (see fitsDeadline).
	done       atomic.Int64 // bytes of requests finished since start
	sampleAt   atomic.Int64 // unix nanoseconds of the last rate sample
	sampleDone atomic.Int64 // done at the last sample
	sampleRef  atomic.Int64 // refused at the last sample
	rate       atomic.Int64 // bytes per second finished while saturated (0: unknown)
}

// rateSample is how often the drain rate is sampled.
const rateSample = 250 * time.Millisecond

// minEstimate is the smallest reservation the tap makes: small requests
// are cheap, and a flood of them is bounded by their count times this.
const minEstimate = 64 << 10

func newAdmission(budget int64, retryAfter time.Duration) *admission {
	a := &admission{budget: budget, retryAfter: retryAfter, now: time.Now}
	a.avg.Store(256 << 10)
	a.sampleAt.Store(a.now().UnixNano())
	return a
}

// finished counts a request's bytes as drained and, every rateSample,
// updates the drain rate — only over intervals in which something was
// refused: an idle server drains little because little arrives, which says
// nothing about what it could drain.
func (a *admission) finished(n int64) {
	done := a.done.Add(n)
	now := a.now().UnixNano()
	at := a.sampleAt.Load()
	if time.Duration(now-at) < rateSample || !a.sampleAt.CompareAndSwap(at, now) {
		return
	}
	prevDone := a.sampleDone.Swap(done)
	ref := a.refused.Load()
	prevRef := a.sampleRef.Swap(ref)
	if ref == prevRef {
		return
	}
	r := int64(float64(done-prevDone) / time.Duration(now-at).Seconds())
	if old := a.rate.Load(); old > 0 {
		r = old + (r-old)/4
	}
	a.rate.Store(max(r, 1))
}

// fitsDeadline reports whether n more bytes, behind the used bytes already
// admitted, would drain at the measured rate within half of
// assumedDeadline (the OTel exporters' default timeout): one horizon for
// every request, whatever its protocol. Admitted requests share the CPU,
// so admitting more than can drain in time makes every one of them late,
// not just the last: a flood of 300 senders against a 512 MiB server had
// 13 admitted requests at once, each 6–8 s in the handler against the
// senders' 10 s deadline.
//
// Why one horizon, and not a gRPC request's own deadline too: OTLP/HTTP
// states no deadline, and a gRPC request arrives with less than its
// sender's timeout left (the exporter encoded it, the connection queued
// it: under load a tenth of them had under 8 s of 10 left at the tap).
// Judging gRPC by the time it had left refused gRPC at the margin where
// HTTP was admitted: issue 36 saw 18% of gRPC senders' spans
// acknowledged against 75% of HTTP's, and with the own deadline kept as a
// second test make test still saw 17% against 37% on a busy machine
// (gRPC 94 refusals for the deadline, HTTP 63).
func (a *admission) fitsDeadline(n int64) bool {
	rate := a.rate.Load()
	if rate <= 0 {
		return true
	}
	need := time.Duration(float64(a.used.Load()+n) / float64(rate) * float64(time.Second))
	return need <= assumedDeadline/2
}

// protocol is an OTLP transport, for the budget's fair shares.
type protocol int

const (
	protoGRPC protocol = iota
	protoHTTP
	protocols
)

// shareWindow is how recently another protocol must have asked for the
// budget for a protocol to be held to its share.
const shareWindow = time.Second

// contended reports whether a protocol other than p asked for admission
// within shareWindow of now.
func (a *admission) contended(p protocol, now int64) bool {
	for q := range protocols {
		if q != p && now-a.seen[q].Load() < int64(shareWindow) {
			return true
		}
	}
	return false
}

// ticket is one admitted request's reservation.
type ticket struct {
	a         *admission
	p         protocol
	n         atomic.Int64
	confirmed atomic.Bool // n is the real size, counted in a.confirmed
	once      sync.Once
}

// reserve admits a request of n bytes (an estimate or its real size) over
// protocol p, or returns nil when the budget cannot take it. One request
// is always admitted when nothing else is in flight, however large, so a
// request under the size limit can always be stored eventually.
//
// While both protocols ask for admission, neither may hold more than half
// the budget (beyond one request): first come, first served let the
// protocol whose senders come back sooner take every slot the other's
// completions freed, and under overload gRPC senders got a third to a
// half of HTTP senders' share acknowledged (issue 36 saw 18% against 75%).
func (a *admission) reserve(n int64, p protocol) *ticket {
	shared := a.contended(p, a.now().UnixNano())
	for {
		used := a.used.Load()
		if used > 0 && used+n > a.budget {
			a.refused.Add(1)
			return nil
		}
		if mine := a.usedBy[p].Load(); shared && mine > 0 && mine+n > a.budget/int64(protocols) {
			a.refused.Add(1)
			return nil
		}
		if a.used.CompareAndSwap(used, used+n) {
			a.usedBy[p].Add(n)
			t := &ticket{a: a, p: p}
			t.n.Store(n)
			return t
		}
	}
}

// resize corrects a reservation to the request's real size; false (and
// the reservation released) when it does not fit beside the other
// requests whose real size is known.
func (t *ticket) resize(n int64) bool {
	a := t.a
	// Fold the size into the estimate (weight 1/8) for later calls.
	for {
		avg := a.avg.Load()
		next := max(avg+(n-avg)/8, minEstimate)
		if a.avg.CompareAndSwap(avg, next) {
			break
		}
	}
	if t.confirmed.Load() {
		return true // resized once already; sizes do not change
	}
	for {
		c := a.confirmed.Load()
		// Alone among the confirmed: admitted whatever its size, as in
		// reserve, so every request under the size limit can get through.
		if c > 0 && c+n > a.budget {
			a.refused.Add(1)
			t.release()
			return false
		}
		if a.confirmed.CompareAndSwap(c, c+n) {
			break
		}
	}
	old := t.n.Swap(n)
	t.confirmed.Store(true)
	a.used.Add(n - old)
	a.usedBy[t.p].Add(n - old)
	return true
}

// release returns the reservation; safe to call more than once.
func (t *ticket) release() {
	if t == nil {
		return
	}
	t.once.Do(func() {
		n := t.n.Load()
		t.a.used.Add(-n)
		t.a.usedBy[t.p].Add(-n)
		if t.confirmed.Load() {
			t.a.confirmed.Add(-n)
			t.a.finished(n)
		}
	})
}

func (a *admission) estimate() int64 { return max(a.avg.Load(), minEstimate) }

func (a *admission) refusal(what string) *status.Status {
	err := fmt.Errorf("too much data in flight (%s; %d of %d bytes admitted): retry later", what, a.used.Load(), a.budget)
	return newRetryable(codes.ResourceExhausted, err, a.retryAfter).(*statusError).st
}

type ticketKey struct{}

func ticketFrom(ctx context.Context) *ticket {
	t, _ := ctx.Value(ticketKey{}).(*ticket)
	return t
}

// assumedDeadline is the horizon every request is judged against
// (fitsDeadline): the OTel exporters' default timeout
// (OTEL_EXPORTER_OTLP_TIMEOUT), 10 s; OTLP/HTTP has no way to send a
// deadline. Before, only gRPC requests were refused for a deadline they
// could not meet, so under overload the refusals fell on gRPC alone
// (issue 36: gRPC senders got 18% of their spans acknowledged, HTTP
// senders 75%, and HTTP was never answered 429) while admitted HTTP
// requests ran into their senders' timeout.
const assumedDeadline = 10 * time.Second

// admit decides, before a request over protocol p is read, whether to
// take it: the same rule for gRPC (from the transport's tap) and HTTP
// (before the body is read). It refuses when the store path is behind,
// when the bytes already admitted plus est could not drain within half of
// assumedDeadline (fitsDeadline), and when the budget cannot take est;
// else it reserves est. what says, in a refusal, what happened to the
// request.
func (a *admission) admit(est int64, p protocol, what string) (*ticket, *status.Status) {
	a.seen[p].Store(a.now().UnixNano())
	if a.behind != nil && a.behind() {
		a.refused.Add(1)
		return nil, a.refusal("the store is behind; " + what)
	}
	if a.used.Load() > 0 && !a.fitsDeadline(est) {
		a.refused.Add(1)
		return nil, a.refusal(fmt.Sprintf("the requests admitted would not finish within %s; %s", assumedDeadline/2, what))
	}
	t := a.reserve(est, p)
	if t == nil {
		return nil, a.refusal(what)
	}
	return t, nil
}

// tap is the gRPC transport's in-tap handle: authentication (when token is
// set) and admission, both before the request message is read. gRPC takes
// one tap per server, so both live here.
func (a *admission) tap(auth authenticator) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		if auth.on() {
			header := ""
			if vals := info.Header.Get("authorization"); len(vals) > 0 {
				header = vals[0]
			}
			project, st := auth.check(header)
			if st != nil {
				return nil, st.Err()
			}
			ctx = store.WithProject(ctx, project)
		}
		if info.FullMethodName != exportMethod {
			return ctx, nil
		}
		t, st := a.admit(a.estimate(), protoGRPC, "the request was not read")
		if st != nil {
			return nil, st.Err()
		}
		return context.WithValue(ctx, ticketKey{}, t), nil
	}
}

// releaser returns a call's reservation when the call ends, whatever ended
// it: a call the tap admitted may still fail before the handler runs (a
// message over the size limit, a cancelled stream), and the handler's own
// release would then never happen.
type releaser struct{}

func (releaser) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (releaser) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.End); ok {
		ticketFrom(ctx).release()
	}
}
func (releaser) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (releaser) HandleConn(context.Context, stats.ConnStats)                       {}
