package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestZeroQueryPlansFirstPageOfNewestTraces(t *testing.T) {
	p, err := TraceQuery{}.Plan(nil)
	if err != nil {
		t.Fatalf("Plan(zero query): %v", err)
	}
	if p.SortBy != SortStart || p.Ascending || p.Limit != DefaultPageSize || p.After != nil {
		t.Fatalf("Plan(zero query) = sort %q ascending %v limit %d after %v; want %q, descending, %d, first page",
			p.SortBy, p.Ascending, p.Limit, p.After, SortStart, DefaultPageSize)
	}
}

func TestPlanLimitIsDefaultedAndCapped(t *testing.T) {
	for _, tc := range []struct{ in, want int }{
		{0, DefaultPageSize},
		{1, 1},
		{MaxPageSize, MaxPageSize},
		{MaxPageSize + 1, MaxPageSize},
		{1 << 30, MaxPageSize},
	} {
		p, err := TraceQuery{Limit: tc.in}.Plan(nil)
		if err != nil {
			t.Fatalf("Plan(limit %d): %v", tc.in, err)
		}
		if p.Limit != tc.want {
			t.Errorf("Plan(limit %d).Limit = %d, want %d", tc.in, p.Limit, tc.want)
		}
		if p.TraceQuery.Limit != tc.in {
			t.Errorf("Plan(limit %d) changed the query's own limit to %d", tc.in, p.TraceQuery.Limit)
		}
	}
}

func TestValidateAcceptsEverySortKeyAndStatus(t *testing.T) {
	for _, sortBy := range []string{"", SortStart, SortDuration, SortSpans, SortErrors, SortTokens} {
		for _, status := range []string{"", StatusOK, StatusError} {
			q := TraceQuery{SortBy: sortBy, Status: status, Ascending: true, MinDuration: time.Second, Limit: 7,
				Start: time.Unix(10, 0), End: time.Unix(10, 0)}
			if err := q.Validate(); err != nil {
				t.Errorf("Validate(sort %q, status %q): %v", sortBy, status, err)
			}
		}
	}
}

func TestValidateErrorNamesTheField(t *testing.T) {
	start := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		q    TraceQuery
		want string
	}{
		{"unknown sort key", TraceQuery{SortBy: "cost"}, `sort_by "cost" is not one of start, duration, spans, errors, tokens`},
		{"sort key in capitals", TraceQuery{SortBy: "Start"}, `sort_by "Start"`},
		{"unknown status", TraceQuery{Status: "unset"}, `status "unset" is not "ok", "error" or empty`},
		{"negative limit", TraceQuery{Limit: -1}, "limit -1 is negative"},
		{"negative min duration", TraceQuery{MinDuration: -time.Second}, "min_duration -1s is negative"},
		{"start after end", TraceQuery{Start: start.Add(time.Nanosecond), End: start},
			"start 2025-03-01T00:00:00.000000001Z is after end 2025-03-01T00:00:00Z"},
		{"malformed page token", TraceQuery{PageToken: "not a token"}, "malformed page token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.q.Validate()
			if err == nil {
				t.Fatalf("Validate(%+v) accepted", tc.q)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate(%+v) = %q, want it to say %q", tc.q, err, tc.want)
			}
			if _, perr := tc.q.Plan(nil); perr == nil || perr.Error() != err.Error() {
				t.Fatalf("Plan and Validate disagree: %v vs %v", perr, err)
			}
		})
	}
}

func TestValidateReportsEveryBadField(t *testing.T) {
	q := TraceQuery{SortBy: "x", Status: "y", Limit: -2, MinDuration: -1, Start: time.Unix(2, 0), End: time.Unix(1, 0), PageToken: "!"}
	err := q.Validate()
	if err == nil {
		t.Fatal("Validate accepted a query with every field wrong")
	}
	for _, field := range []string{"sort_by", "status", "limit", "min_duration", "start", "page token"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("Validate error %q does not mention %s", err, field)
		}
	}
}

func TestPlanReportsBackendTimeRangeUnderFieldName(t *testing.T) {
	limit := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	check := func(t time.Time) error {
		if t.Before(limit) {
			return errors.New("before 2000")
		}
		return nil
	}
	early, late := time.Date(1999, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		q    TraceQuery
		want string
	}{
		{TraceQuery{Start: early}, "start: before 2000"},
		{TraceQuery{End: early}, "end: before 2000"},
	} {
		_, err := tc.q.Plan(check)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Plan(%+v) = %v, want %q", tc.q, err, tc.want)
		}
		if err := tc.q.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v; the storable range is the backend's to check", tc.q, err)
		}
	}
	if _, err := (TraceQuery{Start: late, End: late}).Plan(check); err != nil {
		t.Errorf("Plan(times the backend accepts): %v", err)
	}
	// Zero times mean unbounded and are never handed to the backend's check.
	if _, err := (TraceQuery{}).Plan(func(time.Time) error { return errors.New("called") }); err != nil {
		t.Errorf("Plan(zero times) checked them: %v", err)
	}
}

func TestNextPageTokenLeadsToThePositionAfterThePage(t *testing.T) {
	q := TraceQuery{Service: "svc", Status: StatusError, SortBy: SortTokens, Ascending: true, Limit: 3,
		Start: time.Unix(100, 5), MinDuration: time.Millisecond, Text: "plan"}
	p, err := q.Plan(nil)
	if err != nil {
		t.Fatal(err)
	}
	last := PagePosition{SortValue: -42, TraceID: [16]byte{0xab, 15: 1}}
	q.PageToken = p.NextPageToken(last)
	q.Limit = 500 // the page size may change between pages
	next, err := q.Plan(nil)
	if err != nil {
		t.Fatalf("Plan(query with its own next page token): %v", err)
	}
	if next.After == nil || *next.After != last {
		t.Fatalf("Plan(next page).After = %v, want %v", next.After, last)
	}
}

func TestPageTokenOfADifferentQueryIsRefused(t *testing.T) {
	base := TraceQuery{Agent: "planner", SortBy: SortDuration, Limit: 3}
	p, err := base.Plan(nil)
	if err != nil {
		t.Fatal(err)
	}
	tok := p.NextPageToken(PagePosition{SortValue: 9})
	change := map[string]func(*TraceQuery){
		"sort key":     func(q *TraceQuery) { q.SortBy = SortSpans },
		"direction":    func(q *TraceQuery) { q.Ascending = true },
		"start":        func(q *TraceQuery) { q.Start = time.Unix(1, 0) },
		"end":          func(q *TraceQuery) { q.End = time.Unix(1, 0) },
		"service":      func(q *TraceQuery) { q.Service = "svc" },
		"agent":        func(q *TraceQuery) { q.Agent = "coder" },
		"model":        func(q *TraceQuery) { q.Model = "m" },
		"status":       func(q *TraceQuery) { q.Status = StatusOK },
		"min duration": func(q *TraceQuery) { q.MinDuration = 1 },
		"text":         func(q *TraceQuery) { q.Text = "x" },
		// Field boundaries are part of the hash: moving a character from
		// one filter to the next is a different query.
		"split between fields": func(q *TraceQuery) { q.Agent, q.Model = "plann", "er" },
	}
	for name, mutate := range change {
		q := base
		mutate(&q)
		q.PageToken = tok
		_, err := q.Plan(nil)
		if !errors.Is(err, ErrBadPageToken) || !strings.Contains(err.Error(), "different sort or filters") {
			t.Errorf("token reused with a different %s: %v; want a different-sort-or-filters error", name, err)
		}
	}
}

// Tokens already handed out must keep working across releases: this pins
// the encoding (layout, sort key numbering and filter hash).
func TestPageTokenEncodingIsStable(t *testing.T) {
	q := TraceQuery{Service: "svc", SortBy: SortErrors, Ascending: true, Start: time.Unix(0, 1)}
	p, err := q.Plan(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := p.NextPageToken(PagePosition{SortValue: 258, TraceID: [16]byte{0: 0x0f, 15: 0xf0}})
	// Computed independently of this package (FNV-1a over "1:1" "0:" "3:svc" ...).
	const want = "AQMBAAAAAAAAAQIPAAAAAAAAAAAAAAAAAADw9igRzT9lirU"
	if got != want {
		t.Fatalf("NextPageToken = %q, want %q", got, want)
	}
}

func ExampleTraceQuery_Validate() {
	err := TraceQuery{SortBy: "cost", Limit: -1}.Validate()
	fmt.Println(err)
	// Output:
	// sort_by "cost" is not one of start, duration, spans, errors, tokens
	// limit -1 is negative
}
