package collector

import (
	"testing"
	"time"
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
		tk := a.reserve(a.estimate())
		if tk == nil {
			t.Fatalf("estimate %d refused with %d of %d used", a.estimate(), a.used.Load(), budget)
		}
		tickets = append(tickets, tk)
	}
	if tk := a.reserve(a.estimate()); tk != nil {
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
	big := a.reserve(a.estimate())
	if big == nil || !big.resize(3<<20) {
		t.Fatal("a lone 3 MiB request refused under a 1 MiB budget")
	}
	other := a.reserve(a.estimate())
	if other != nil {
		t.Fatalf("a second call admitted at the tap with %d of %d bytes in use", a.used.Load(), a.budget)
	}
	big.release()
	small := a.reserve(a.estimate())
	if small == nil || !small.resize(100<<10) {
		t.Fatal("a 100 KiB request refused once the budget was free")
	}
	small.release()
	if a.used.Load() != 0 || a.confirmed.Load() != 0 {
		t.Errorf("left reserved: %d used, %d confirmed", a.used.Load(), a.confirmed.Load())
	}
}
