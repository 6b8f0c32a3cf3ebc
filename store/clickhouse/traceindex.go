package clickhouse

import (
	"time"

	"github.com/loomwork/loomwork/store"
)

// traceIndexColumns is the insert column list of trace_index; traceRows
// appends in this order.
const traceIndexColumns = `trace_id, day, start, end, project, expire_at`

// keepForever is the expiry of a row whose project keeps its traces for
// ever (and the columns' default, so rows stored before migration 6 too):
// near the end of DateTime's range (2106-02-07).
var keepForever = time.Date(2106, 1, 1, 0, 0, 0, 0, time.UTC)

// expiry is when a trace ending at end expires under retention: end plus
// retention, rounded up to the next UTC midnight, so every batch of a
// trace (each computes the expiry from the spans it holds) almost always
// stamps the same value and the trace's rows go in the same merge.
func expiry(end time.Time, retention time.Duration) time.Time {
	if retention <= 0 {
		return keepForever
	}
	t := end.UTC().Add(retention)
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	if day.Before(t) {
		day = day.AddDate(0, 0, 1)
	}
	if day.After(keepForever) {
		return keepForever
	}
	if day.Unix() < 1 {
		return time.Unix(1, 0).UTC() // DateTime starts at 1970
	}
	return day
}

// traceKey is a trace within its project: two projects may store the same
// trace id.
type traceKey struct{ project, traceID string }

// traceRows is the trace_index rows of one batch of spans: per trace, its
// earliest start and latest end in the batch, and its expiry.
type traceRows struct {
	traceID, project         []string
	day, start, end, expires []time.Time

	index map[traceKey]int // row of each trace, kept for the next batch
}

func (r *traceRows) reset() {
	r.traceID, r.project = r.traceID[:0], r.project[:0]
	r.day, r.start, r.end, r.expires = r.day[:0], r.start[:0], r.end[:0], r.expires[:0]
}

// add appends o's rows. A trace that two prepared batches share gets a row
// from each; the table folds them (min/max).
func (r *traceRows) add(o *traceRows) {
	r.traceID = append(r.traceID, o.traceID...)
	r.project = append(r.project, o.project...)
	r.day = append(r.day, o.day...)
	r.start = append(r.start, o.start...)
	r.end = append(r.end, o.end...)
	r.expires = append(r.expires, o.expires...)
}

func (r *traceRows) columns() []any {
	return []any{r.traceID, r.day, r.start, r.end, r.project, r.expires}
}

// expiryOf is the expiry build computed for sp's trace.
func (r *traceRows) expiryOf(sp *store.Span) time.Time {
	return r.expires[r.index[traceKey{sp.Project, sp.TraceID}]]
}

// build fills r from spans (already validated by the caller).
func (r *traceRows) build(spans []store.Span) {
	if r.index == nil {
		r.index = make(map[traceKey]int)
	}
	clear(r.index)
	r.reset()
	var retention []time.Duration
	for i := range spans {
		sp := &spans[i]
		k := traceKey{sp.Project, sp.TraceID}
		row, ok := r.index[k]
		if !ok {
			r.index[k] = len(r.traceID)
			r.traceID = append(r.traceID, sp.TraceID)
			r.project = append(r.project, sp.Project)
			r.start = append(r.start, sp.StartTime)
			r.end = append(r.end, sp.EndTime)
			retention = append(retention, sp.Retention)
			continue
		}
		if sp.StartTime.Before(r.start[row]) {
			r.start[row] = sp.StartTime
		}
		if sp.EndTime.After(r.end[row]) {
			r.end[row] = sp.EndTime
		}
		// One project has one retention; the longer (0 is for ever)
		// wins if a batch was stamped across a policy change.
		if sp.Retention <= 0 || retention[row] <= 0 {
			retention[row] = 0
		} else {
			retention[row] = max(retention[row], sp.Retention)
		}
	}
	for i, start := range r.start {
		// The UTC date, as ListTraces' day bounds compute it.
		u := start.UTC()
		r.day = append(r.day, time.Date(u.Year(), u.Month(), u.Day(), 0, 0, 0, 0, time.UTC))
		r.expires = append(r.expires, expiry(r.end[i], retention[i]))
	}
}
