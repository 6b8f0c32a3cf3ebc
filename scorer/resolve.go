package scorer

import (
	"context"
	"errors"
	"fmt"

	"github.com/loomwork/loomwork/datasets"
	"github.com/loomwork/loomwork/store"
)

// ErrTraceMissing marks a trial whose trace the store does not hold.
var ErrTraceMissing = errors.New("trace is not in the store")

// TraceReader is the part of a trace store ResolveTraces needs.
type TraceReader interface {
	GetTrace(ctx context.Context, traceID string) ([]store.Span, error)
}

// ResolveTraces loads the stored spans of every trial that names a trace_id
// but carries no inline spans, so scoring derives the fields the trial
// leaves out (duration, cost, tokens, tools, evidence, success) from the
// trace, as for inline spans. A trace the store does not hold is an error
// naming the trial; nothing is scored on a guess.
func ResolveTraces(ctx context.Context, r TraceReader, trials []datasets.Trial) error {
	for i := range trials {
		t := &trials[i]
		if t.TraceID == "" || len(t.Spans) > 0 {
			continue
		}
		spans, err := r.GetTrace(ctx, t.TraceID)
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("resolve traces: trial %d of case %q%s: trace %s: %w", t.Trial, t.CaseID, lineSuffix(t.Line), t.TraceID, ErrTraceMissing)
		}
		if err != nil {
			return fmt.Errorf("resolve traces: trial %d of case %q: get trace %s: %w", t.Trial, t.CaseID, t.TraceID, err)
		}
		t.Spans = spans
	}
	return nil
}
