package store

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/loomwork/loomwork/store/internal/pagetoken"
)

// ErrBadPageToken is wrapped by the error for a TraceQuery.PageToken that
// is not a NextPageToken of the same query (same filters and sort).
var ErrBadPageToken = pagetoken.ErrMalformed

// sortKeys lists the TraceQuery.SortBy names. Page tokens record a key's
// index in this list, so only ever append.
var sortKeys = [...]string{SortStart, SortDuration, SortSpans, SortErrors, SortTokens}

// PlannedQuery is a validated TraceQuery with its defaults applied: what a
// backend needs to build its query for one page. SortBy and Limit hold the
// effective values; the embedded TraceQuery keeps what the caller passed.
type PlannedQuery struct {
	TraceQuery
	// SortBy is the query's sort key, SortStart when it was "".
	SortBy string
	// Limit is the page size: DefaultPageSize when it was 0, capped at
	// MaxPageSize.
	Limit int
	// After is the keyset position the page token points past, nil for the
	// first page. The page holds the traces ordered strictly after it.
	After *PagePosition

	sortKey byte
	filters uint64
}

// PagePosition is where a page ended: the sort value and id of its last
// trace.
type PagePosition struct {
	SortValue int64
	TraceID   [16]byte
}

// Validate reports every problem with q's fields, one error per field,
// naming it. A backend may reject more: times outside what it can store
// (see Plan).
func (q TraceQuery) Validate() error {
	_, err := q.Plan(nil)
	return err
}

// Plan validates q and applies its defaults. checkTime, when not nil, is
// the backend's test that a non-zero Start or End lies within the range it
// can store; its error is reported under the field's name. The errors of
// all the fields are joined.
func (q TraceQuery) Plan(checkTime func(time.Time) error) (PlannedQuery, error) {
	p := PlannedQuery{TraceQuery: q, SortBy: q.SortBy}
	var errs []error
	if p.SortBy == "" {
		p.SortBy = SortStart
	}
	found := false
	for i, k := range sortKeys {
		if k == p.SortBy {
			p.sortKey, found = byte(i), true
		}
	}
	if !found {
		errs = append(errs, fmt.Errorf("sort_by %q is not one of %s", q.SortBy, strings.Join(sortKeys[:], ", ")))
	}
	switch q.Status {
	case "", StatusOK, StatusError:
	default:
		errs = append(errs, fmt.Errorf("status %q is not %q, %q or empty", q.Status, StatusOK, StatusError))
	}
	switch {
	case q.Limit < 0:
		errs = append(errs, fmt.Errorf("limit %d is negative", q.Limit))
	case q.Limit == 0:
		p.Limit = DefaultPageSize
	case q.Limit > MaxPageSize:
		p.Limit = MaxPageSize
	default:
		p.Limit = q.Limit
	}
	if q.MinDuration < 0 {
		errs = append(errs, fmt.Errorf("min_duration %v is negative", q.MinDuration))
	}
	// Num and IsNum follow from Value, whoever built the clause.
	p.TraceQuery.Search = make([]SearchClause, len(q.Search))
	for i, c := range q.Search {
		c.setNum()
		p.TraceQuery.Search[i] = c
		if err := c.validate(); err != nil {
			errs = append(errs, fmt.Errorf("search clause %d %s: %w", i+1, quoteInput(c.String()), err))
		}
	}
	if checkTime != nil {
		if !q.Start.IsZero() {
			if err := checkTime(q.Start); err != nil {
				errs = append(errs, fmt.Errorf("start: %w", err))
			}
		}
		if !q.End.IsZero() {
			if err := checkTime(q.End); err != nil {
				errs = append(errs, fmt.Errorf("end: %w", err))
			}
		}
	}
	if !q.Start.IsZero() && !q.End.IsZero() && q.Start.After(q.End) {
		errs = append(errs, fmt.Errorf("start %s is after end %s", q.Start.Format(time.RFC3339Nano), q.End.Format(time.RFC3339Nano)))
	}
	p.filters = filterHash(&q)
	if q.PageToken != "" {
		t, err := pagetoken.Decode(q.PageToken, len(sortKeys))
		switch {
		case err != nil:
			errs = append(errs, err)
		// An unknown sort key is already reported above; a token cannot
		// be checked against it.
		case found && (t.SortKey != p.sortKey || t.Ascending != q.Ascending || t.Filters != p.filters):
			errs = append(errs, fmt.Errorf("%w: it was issued for a different sort or filters", ErrBadPageToken))
		default:
			p.After = &PagePosition{SortValue: t.LastValue, TraceID: t.LastTrace}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return PlannedQuery{}, err
	}
	return p, nil
}

// NextPageToken is the token for the page after the one that ended at last.
func (p PlannedQuery) NextPageToken(last PagePosition) string {
	return pagetoken.Token{
		SortKey: p.sortKey, Ascending: p.Ascending,
		LastValue: last.SortValue, LastTrace: last.TraceID, Filters: p.filters,
	}.Encode()
}

// filterHash identifies the filters of q (not its sort, limit or token), so
// a page token issued for other filters is refused rather than applied.
func filterHash(q *TraceQuery) uint64 {
	h := fnv.New64a()
	field := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	timeField := func(t time.Time) {
		if t.IsZero() {
			field("")
			return
		}
		field(strconv.FormatInt(t.UnixNano(), 10))
	}
	timeField(q.Start)
	timeField(q.End)
	field(q.Service)
	field(q.Agent)
	field(q.Model)
	field(q.Status)
	field(strconv.FormatInt(int64(q.MinDuration), 10))
	field(q.Text)
	// Appended after the original fields, so a query without them hashes
	// as before and outstanding tokens stay valid.
	if len(q.Search) > 0 || q.Session != "" {
		field(FormatSearch(q.Search))
		field(q.Session)
	}
	return h.Sum64()
}
