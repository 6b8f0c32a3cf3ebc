package experiment

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/loomwork/loomwork/datasets"
)

// progress prints one line per finished trial: done/total, passed so far,
// elapsed, and the ETA from the trials run in this process.
type progress struct {
	mu                   sync.Mutex
	w                    io.Writer
	total, done, resumed int
	passed, infraFailed  int
	start                time.Time
	now                  func() time.Time
}

func (p *progress) line(k TrialKey, what string) {
	elapsed := p.now().Sub(p.start)
	eta := "?"
	if ran := p.done - p.resumed; ran > 0 {
		left := p.total - p.done - p.infraFailed
		eta = (time.Duration(float64(elapsed) / float64(ran) * float64(left))).Round(100 * time.Millisecond).String()
	}
	fmt.Fprintf(p.w, "[%d/%d] passed %d · %s elapsed · ETA %s · %s trial %d: %s\n",
		p.done, p.total, p.passed, elapsed.Round(100*time.Millisecond), eta, k.CaseID, k.Trial, what)
}

func (p *progress) record(k TrialKey, t *datasets.Trial, passed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	what := "failed"
	if passed {
		p.passed++
		what = "passed"
	}
	if t.Success != nil && !*t.Success {
		what = "agent failed"
	}
	p.line(k, what)
}

func (p *progress) infra(k TrialKey, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.infraFailed++
	p.line(k, "not run: "+err.Error())
}

func (p *progress) infraCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.infraFailed
}
