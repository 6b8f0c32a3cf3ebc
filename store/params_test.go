package store

import (
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseTraceQueryNamesTheParameterOfEveryBadValue(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for q, want := range map[string]string{
		"limit=0":                             "limit:",
		"status=broken":                       "status:",
		"sort=name":                           "sort:",
		"start=yesterday":                     "start:",
		"min_duration=-1s":                    "min_duration:",
		"colour=blue":                         `unknown query parameter "colour"`,
		"since=1h&start=2026-01-01T00:00:00Z": "since:",
		"end=2026-01-01T00:00:00Z&start=2026-02-01T00:00:00Z": "end:",
		"asc=maybe":       "asc:",
		"limit=1&limit=2": "given 2 times",
	} {
		v, _ := url.ParseQuery(q)
		_, err := ParseTraceQuery(v, now)
		if !errors.Is(err, ErrBadQuery) || !strings.Contains(err.Error(), want) {
			t.Errorf("?%s: %v; want ErrBadQuery mentioning %q", q, err, want)
		}
	}
}

func TestParseTraceQueryAndTraceQueryValuesAreInverses(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	v, _ := url.ParseQuery("since=2h&service=research-agent&agent=a&model=m&status=error&min_duration=2s&text=chat&sort=tokens&asc=true&limit=7&page_token=tok")
	q, err := ParseTraceQuery(v, now)
	if err != nil {
		t.Fatal(err)
	}
	want := TraceQuery{Start: now.Add(-2 * time.Hour), Service: "research-agent", Agent: "a", Model: "m", Status: "error",
		MinDuration: 2 * time.Second, Text: "chat", SortBy: SortTokens, Ascending: true, Limit: 7, PageToken: "tok"}
	if !reflect.DeepEqual(q, want) {
		t.Fatalf("parsed %+v\nwant   %+v", q, want)
	}
	back, err := ParseTraceQuery(TraceQueryValues(q), now)
	if err != nil || !reflect.DeepEqual(back, q) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for name := range TraceQueryValues(q) {
		if _, ok := QueryParams[name]; !ok {
			t.Errorf("TraceQueryValues writes %q, which ParseTraceQuery does not know", name)
		}
	}
}

func TestIsFullTraceIDAcceptsOnlyStoredForm(t *testing.T) {
	for id, want := range map[string]bool{
		"4bf92f3577b34da6a3ce929d0e0e4736":  true,
		"4BF92F3577B34DA6A3CE929D0E0E4736":  false,
		"4bf92f35":                          false,
		"4bf92f3577b34da6a3ce929d0e0e47367": false,
	} {
		if IsFullTraceID(id) != want {
			t.Errorf("IsFullTraceID(%q) = %v", id, !want)
		}
	}
}
