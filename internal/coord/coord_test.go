package coord

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// manualClock is the injected coordinator clock: logical seconds, set by
// the test before each call (the reference example passes now=0, 1, 10...).
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

var epoch = time.Date(2026, 9, 30, 2, 17, 0, 0, time.UTC)

func (m *manualClock) now() time.Time { m.mu.Lock(); defer m.mu.Unlock(); return m.t }
func (m *manualClock) at(sec int) {
	m.mu.Lock()
	m.t = epoch.Add(time.Duration(sec) * time.Second)
	m.mu.Unlock()
}

func open(t *testing.T, path string, clk *manualClock) *Coordinator {
	t.Helper()
	c, err := Open(context.Background(), Config{Path: path, Clock: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	return c
}

const sec = time.Second

// TestReferenceExample reproduces the reference design's printed example
// (the stateful-coding section's coordination.py demo) line for line, with
// the second coordinator reopening the same file as another process would.
func TestReferenceExample(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tasks.sqlite")
	clk := &manualClock{}
	var out bytes.Buffer
	ok := func(err error) string {
		if err != nil && !errors.Is(err, ErrStaleGrant) && !errors.Is(err, ErrNotAccepted) {
			t.Fatal(err)
		}
		if err == nil {
			return "True"
		}
		return "False"
	}

	first := open(t, path, clk)
	taskKey, designKey := "learnllm:m29:coordination-v1", "learnllm:design:coordination-v1"
	if _, err := first.Enqueue(ctx, TaskSpec{Key: taskKey, Kind: "change"}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Enqueue(ctx, TaskSpec{Key: designKey, Kind: "change", Dependencies: []string{taskKey}}); err != nil {
		t.Fatal(err)
	}
	clk.at(0)
	grantA, err := first.Claim(ctx, taskKey, "worker-a", 10*sec)
	if err != nil || grantA == nil {
		t.Fatalf("first claim: %v %v", grantA, err)
	}
	clk.at(1)
	dup, err := first.Claim(ctx, taskKey, "worker-b", 10*sec)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(&out, "duplicate claim:", pyGrant(dup))
	// The design task waits on its dependency.
	if g, err := first.Claim(ctx, designKey, "designer", 10*sec); err != nil || g != nil {
		t.Fatalf("dependent claimed before its dependency was accepted: %v %v", g, err)
	}
	if err := first.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	second := open(t, path, clk)
	clk.at(10)
	grantB, err := second.Claim(ctx, taskKey, "worker-b", 20*sec)
	if err != nil || grantB == nil {
		t.Fatalf("reclaim at the deadline: %v %v", grantB, err)
	}
	fmt.Fprintln(&out, "fences:", grantA.Fence, "->", grantB.Fence)
	clk.at(11)
	fmt.Fprintln(&out, "late A accepted:", ok(second.Submit(ctx, *grantA, "candidate-old", []byte("old"))))
	clk.at(12)
	fmt.Fprintln(&out, "B submitted:", ok(second.Submit(ctx, *grantB, "candidate-new", []byte("new"))))
	const env, policy = "python3.12/linux", "unit+lint"
	if err := second.RecordValidation(ctx, Receipt{Candidate: "candidate-old", Environment: env, Policy: policy, Passed: true, Report: "old report"}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(&out, "stale evidence accepted:", ok(second.Accept(ctx, taskKey, "candidate-new", env, policy)))
	if err := second.RecordValidation(ctx, Receipt{Candidate: "candidate-new", Environment: env, Policy: policy, Passed: true, Report: "new report"}); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(&out, "current evidence accepted:", ok(second.Accept(ctx, taskKey, "candidate-new", env, policy)))
	clk.at(13)
	g, err := second.Claim(ctx, designKey, "designer", 10*sec)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(&out, "dependent work ready:", pyBool(g != nil))

	const want = `duplicate claim: None
fences: 1 -> 2
late A accepted: False
B submitted: True
stale evidence accepted: False
current evidence accepted: True
dependent work ready: True
`
	t.Logf("\n%s", out.String())
	if out.String() != want {
		t.Fatalf("the reference example printed\n%s\nwant\n%s", out.String(), want)
	}
	// The late submission is on record with its reason.
	refs, err := second.Refusals(ctx)
	if err != nil || len(refs) != 1 || refs[0].Worker != "worker-a" || refs[0].Op != "submit" || refs[0].Reason != "owner is worker-b, not worker-a" {
		t.Fatalf("refusals = %+v, %v", refs, err)
	}
}

func pyGrant(g *Grant) string {
	if g == nil {
		return "None"
	}
	return fmt.Sprintf("Grant(%s, %s, %d)", g.Key, g.Worker, g.Fence)
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// TestLoseTheHeartbeat is practice exercise 1: a ten-second claim is
// reclaimed at exactly ten (the deadline is exclusive), and the old grant
// can neither renew nor submit — though one nanosecond earlier it could.
func TestLoseTheHeartbeat(t *testing.T) {
	ctx := context.Background()
	clk := &manualClock{}
	c := open(t, filepath.Join(t.TempDir(), "c.db"), clk)
	if _, err := c.Enqueue(ctx, TaskSpec{Key: "k", Kind: "trial"}); err != nil {
		t.Fatal(err)
	}
	clk.at(0)
	old, err := c.Claim(ctx, "k", "a", 10*sec)
	if err != nil || old == nil {
		t.Fatal(old, err)
	}
	// One nanosecond before the deadline the lease still holds: no reclaim.
	clk.mu.Lock()
	clk.t = epoch.Add(10*sec - 1)
	clk.mu.Unlock()
	if g, err := c.Claim(ctx, "k", "b", 10*sec); err != nil || g != nil {
		t.Fatalf("reclaimed before the deadline: %+v %v", g, err)
	}
	clk.at(10)
	// At exactly the deadline the old grant is invalid, even before anyone
	// reclaims: renewing does not resurrect it.
	if _, err := c.Renew(ctx, *old, 10*sec); !errors.Is(err, ErrStaleGrant) {
		t.Fatalf("renew at the deadline: %v", err)
	}
	b, err := c.Claim(ctx, "k", "b", 10*sec)
	if err != nil || b == nil || b.Fence != old.Fence+1 {
		t.Fatalf("reclaim at the deadline: %+v %v", b, err)
	}
	if _, err := c.Renew(ctx, *old, 10*sec); !errors.Is(err, ErrStaleGrant) {
		t.Fatalf("old renew after reclaim: %v", err)
	}
	if err := c.Submit(ctx, *old, "x", nil); !errors.Is(err, ErrStaleGrant) {
		t.Fatalf("old submit after reclaim: %v", err)
	}
	// The same worker id with the old fence fails too: the fence, not the
	// name, identifies the grant.
	stale := *b
	stale.Fence = old.Fence
	if err := c.Submit(ctx, stale, "x", nil); !errors.Is(err, ErrStaleGrant) {
		t.Fatalf("old fence under the new owner's name: %v", err)
	}
	clk.at(15)
	nb, err := c.Renew(ctx, *b, 10*sec)
	if err != nil || !nb.Deadline.Equal(epoch.Add(25*sec)) {
		t.Fatalf("live renew: %+v %v", nb, err)
	}
	if err := c.Submit(ctx, nb, "y", []byte("result")); err != nil {
		t.Fatalf("live submit: %v", err)
	}
	task, err := c.Get(ctx, "k")
	if err != nil || task.State != Proposed || task.Candidate != "y" || task.Claims != 2 {
		t.Fatalf("task = %+v %v", task, err)
	}
	refs, _ := c.Refusals(ctx)
	if len(refs) != 4 {
		t.Fatalf("want 4 refusals on record, got %+v", refs)
	}
}

// TestExpiredProposalIsReclaimedAndCleared: a proposal whose lease
// expired is reclaimable; the reclaim clears its candidate, so the old
// candidate cannot be accepted even with a passing receipt.
func TestExpiredProposalIsReclaimedAndCleared(t *testing.T) {
	ctx := context.Background()
	clk := &manualClock{}
	c := open(t, filepath.Join(t.TempDir(), "c.db"), clk)
	_, _ = c.Enqueue(ctx, TaskSpec{Key: "k", Kind: "trial"})
	clk.at(0)
	a, _ := c.Claim(ctx, "k", "a", 5*sec)
	if err := c.Submit(ctx, *a, "C", nil); err != nil {
		t.Fatal(err)
	}
	clk.at(5)
	b, err := c.Claim(ctx, "k", "b", 5*sec)
	if err != nil || b == nil {
		t.Fatal(b, err)
	}
	_ = c.RecordValidation(ctx, Receipt{Candidate: "C", Environment: "e", Policy: "p", Passed: true, Report: "ok"})
	if err := c.Accept(ctx, "k", "C", "e", "p"); !errors.Is(err, ErrNotAccepted) {
		t.Fatalf("accepted a reclaimed proposal: %v", err)
	}
}

// TestInvalidateAReceipt is practice exercise 3: C is validated; one input
// changes and the worker proposes D; C's receipt does not accept D. A
// receipt from another environment or policy does not either, nor does a
// failing one.
func TestInvalidateAReceipt(t *testing.T) {
	ctx := context.Background()
	clk := &manualClock{}
	c := open(t, filepath.Join(t.TempDir(), "c.db"), clk)
	_, _ = c.Enqueue(ctx, TaskSpec{Key: "k", Kind: "change"})
	clk.at(0)
	g, _ := c.Claim(ctx, "k", "w", time.Minute)
	C := Digest([]byte("tree with input 1"))
	D := Digest([]byte("tree with input 2"))
	if err := c.Submit(ctx, *g, C, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.RecordValidation(ctx, Receipt{Candidate: C, Environment: "linux/go1.26", Policy: "gate-v1", Passed: true, Report: "all green"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Submit(ctx, *g, D, nil); err != nil { // a live grant may replace its proposal
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name             string
		cand, env, pol   string
		receipt          *Receipt
		wantReasonSubstr string
	}{
		{"C's receipt for D", D, "linux/go1.26", "gate-v1", nil, "no receipt for candidate " + D},
		{"C itself is no longer the candidate", C, "linux/go1.26", "gate-v1", nil, "the task's candidate is " + D},
		{"D passed in another environment", D, "linux/go1.26", "gate-v1", &Receipt{Candidate: D, Environment: "darwin/go1.26", Policy: "gate-v1", Passed: true, Report: "mac"}, "no receipt"},
		{"D passed under a weaker policy", D, "linux/go1.26", "gate-v1", &Receipt{Candidate: D, Environment: "linux/go1.26", Policy: "smoke", Passed: true, Report: "smoke"}, "no receipt"},
		{"D failed", D, "linux/go1.26", "gate-v1", &Receipt{Candidate: D, Environment: "linux/go1.26", Policy: "gate-v1", Passed: false, Report: "1 failure"}, "checks failed"},
	} {
		if tc.receipt != nil {
			if err := c.RecordValidation(ctx, *tc.receipt); err != nil {
				t.Fatal(err)
			}
		}
		err := c.Accept(ctx, "k", tc.cand, tc.env, tc.pol)
		if !errors.Is(err, ErrNotAccepted) || !bytes.Contains([]byte(err.Error()), []byte(tc.wantReasonSubstr)) {
			t.Fatalf("%s: err = %v, want ErrNotAccepted with %q", tc.name, err, tc.wantReasonSubstr)
		}
	}
	_ = c.RecordValidation(ctx, Receipt{Candidate: D, Environment: "linux/go1.26", Policy: "gate-v1", Passed: true, Report: "rerun green"})
	if err := c.Accept(ctx, "k", D, "linux/go1.26", "gate-v1"); err != nil {
		t.Fatalf("D with its own receipt: %v", err)
	}
}

func TestEnqueueIsIdempotentPerIntent(t *testing.T) {
	ctx := context.Background()
	c := open(t, filepath.Join(t.TempDir(), "c.db"), &manualClock{})
	spec := TaskSpec{Key: "k", Kind: "trial", Payload: []byte(`{"a":1}`), Dependencies: []string{"x", "y"}}
	if created, err := c.Enqueue(ctx, spec); err != nil || !created {
		t.Fatal(created, err)
	}
	spec.Dependencies = []string{"y", "x", "x"}
	if created, err := c.Enqueue(ctx, spec); err != nil || created {
		t.Fatalf("second enqueue: created %v err %v", created, err)
	}
	spec.Payload = []byte(`{"a":2}`)
	if _, err := c.Enqueue(ctx, spec); !errors.Is(err, ErrIntentConflict) {
		t.Fatalf("contradictory enqueue: %v", err)
	}
	ts, _ := c.Tasks(ctx, "", false)
	if len(ts) != 1 {
		t.Fatalf("%d tasks", len(ts))
	}
}

// TestConcurrentClaimsGrantOnce: many goroutines (each its own connection
// pool, as separate processes would be) race to claim one task; exactly
// one wins.
func TestConcurrentClaimsGrantOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	c := open(t, path, &manualClock{t: epoch})
	_, _ = c.Enqueue(ctx, TaskSpec{Key: "k", Kind: "trial"})
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ci, err := Open(ctx, Config{Path: path, Clock: func() time.Time { return epoch }})
			if err != nil {
				t.Error(err)
				return
			}
			defer ci.Shutdown(ctx)
			g, err := ci.Claim(ctx, "k", fmt.Sprintf("w%d", i), time.Minute)
			if err != nil {
				t.Error(err)
				return
			}
			if g != nil {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d claims won, want 1", won)
	}
}

func TestConfigValidate(t *testing.T) {
	err := Config{Path: ":memory:", BusyTimeout: -1}.Validate()
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("path must be a file path")) || !bytes.Contains([]byte(err.Error()), []byte("busy_timeout")) {
		t.Fatalf("err = %v", err)
	}
	c, err := New(Config{Path: "x.db"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Shutdown(context.Background()); err != nil { // safe without Start
		t.Fatal(err)
	}
}

// TestClockIsReadAfterTheLockIsHeld: a claim that waits for another
// process's write lock decides with the time at which it got the lock,
// not the time at which it asked — a time sampled before waiting for a
// busy database may already be stale.
func TestClockIsReadAfterTheLockIsHeld(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	clk := &manualClock{}
	c := open(t, path, clk)
	if _, err := c.Enqueue(ctx, TaskSpec{Key: "k", Kind: "trial"}); err != nil {
		t.Fatal(err)
	}
	// Another process holds the write lock.
	other, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	clk.at(0)
	got := make(chan *Grant, 1)
	go func() {
		g, err := c.Claim(ctx, "k", "w", 10*sec)
		if err != nil {
			t.Error(err)
		}
		got <- g
	}()
	time.Sleep(300 * time.Millisecond) // the claim is waiting for the lock
	clk.at(5)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	g := <-got
	if g == nil || !g.Deadline.Equal(epoch.Add(15*sec)) {
		t.Fatalf("grant %+v: want the deadline from the time the lock was held (5s + 10s)", g)
	}
}
