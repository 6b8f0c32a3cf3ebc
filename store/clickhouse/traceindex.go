package clickhouse

import (
	"time"

	"github.com/loomwork/loomwork/store"
)

// traceIndexColumns is the insert column list of trace_index; traceRows
// appends in this order.
const traceIndexColumns = `trace_id, day, start, end`

// traceRows is the trace_index rows of one batch of spans: per trace, its
// earliest start and latest end in the batch.
type traceRows struct {
	traceID         []string
	day, start, end []time.Time

	index map[string]int // row of each trace id, kept for the next batch
}

func (r *traceRows) reset() {
	r.traceID, r.day, r.start, r.end = r.traceID[:0], r.day[:0], r.start[:0], r.end[:0]
}

// add appends o's rows. A trace that two prepared batches share gets a row
// from each; the table folds them (min/max).
func (r *traceRows) add(o *traceRows) {
	r.traceID = append(r.traceID, o.traceID...)
	r.day = append(r.day, o.day...)
	r.start = append(r.start, o.start...)
	r.end = append(r.end, o.end...)
}

func (r *traceRows) columns() []any {
	return []any{r.traceID, r.day, r.start, r.end}
}

// build fills r from spans (already validated by the caller).
func (r *traceRows) build(spans []store.Span) {
	if r.index == nil {
		r.index = make(map[string]int)
	}
	clear(r.index)
	r.reset()
	for i := range spans {
		sp := &spans[i]
		row, ok := r.index[sp.TraceID]
		if !ok {
			r.index[sp.TraceID] = len(r.traceID)
			r.traceID = append(r.traceID, sp.TraceID)
			r.start = append(r.start, sp.StartTime)
			r.end = append(r.end, sp.EndTime)
			continue
		}
		if sp.StartTime.Before(r.start[row]) {
			r.start[row] = sp.StartTime
		}
		if sp.EndTime.After(r.end[row]) {
			r.end[row] = sp.EndTime
		}
	}
	for _, start := range r.start {
		// The UTC date, as ListTraces' day bounds compute it.
		u := start.UTC()
		r.day = append(r.day, time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC))
	}
}
