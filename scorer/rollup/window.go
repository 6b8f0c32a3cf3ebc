package rollup

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/loomwork/loomwork/scorer/pricing"
	"github.com/loomwork/loomwork/store"
)

// AnalysisKind is the store.WindowReader.SaveDerived kind under which
// Window keeps a trace's Analysis (the version suffix changes whenever
// Analysis or its rule does, so an old copy is never read as new).
const AnalysisKind = "rollup.analysis.v1"

// Window rolls up a trace through a store's window capability, without
// reading its spans whole: the summary and billed calls from what ingest
// keeps (TraceHead), and the tree's part (Analysis) from what the store
// keeps for the trace's span count, else from its bones (TraceBones: typed
// columns only), analysed once and kept (SaveDerived; a store that cannot
// keep it is only slower next time). The result equals Compute over the
// trace's stored spans, field for field.
func Window(ctx context.Context, w store.WindowReader, traceID string, prices *pricing.Table) (Rollup, Analysis, error) {
	sum, err := w.TraceHead(ctx, traceID)
	if err != nil {
		return Rollup{}, Analysis{}, err
	}
	return WindowOf(ctx, w, sum, prices)
}

// WindowOf is Window for a trace whose head (TraceHead) the caller has.
func WindowOf(ctx context.Context, w store.WindowReader, sum store.TraceSummary, prices *pricing.Table) (Rollup, Analysis, error) {
	a, err := WindowAnalysis(ctx, w, sum.TraceID, sum.SpanCount)
	if err != nil {
		return Rollup{}, Analysis{}, err
	}
	r := FromAnalysis(a, sum, prices)
	r.TraceID = sum.TraceID
	return r, a, nil
}

// WindowAnalysis returns the trace's Analysis for spans spans: the one
// kept for that count, else one computed from its bones and kept.
func WindowAnalysis(ctx context.Context, w store.WindowReader, traceID string, spans int64) (Analysis, error) {
	data, n, ok, err := w.LoadDerived(ctx, traceID, AnalysisKind)
	if err != nil {
		return Analysis{}, fmt.Errorf("rollup of trace %s: %w", traceID, err)
	}
	if ok && n == spans {
		var a Analysis
		if err := json.Unmarshal(data, &a); err == nil && a.Spans == int(n) {
			return a, nil
		}
		// Unreadable (written by another version): recompute and replace.
	}
	bones, err := w.TraceBones(ctx, traceID)
	if err != nil {
		return Analysis{}, fmt.Errorf("rollup of trace %s: %w", traceID, err)
	}
	a := Analyze(bones)
	// Keeping it only saves the next reader the bones: a store that
	// cannot (read-only, full) still serves this one. An analysis whose
	// lists alone would pass the store's bound (a million-span chain's
	// critical path) is not even encoded.
	if n := len(a.CriticalPath) + len(a.AggregateSpans) + len(a.Orphans) + len(a.Tops); n > store.MaxDerivedBytes/64 {
		return a, nil
	}
	if data, err := json.Marshal(a); err == nil && len(data) <= store.MaxDerivedBytes {
		_ = w.SaveDerived(ctx, traceID, AnalysisKind, int64(len(bones)), data)
	}
	return a, nil
}
