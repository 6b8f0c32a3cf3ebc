package storetest

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/loomwork/loomwork/store"
)

// normSpan returns sp in the form the suite compares: times in UTC (so they
// compare by instant at nanosecond precision, whatever location a backend
// returns) and empty slices and maps as nil (a backend need not keep "absent"
// and "empty" apart; values inside attributes are compared exactly).
func normSpan(sp store.Span) store.Span {
	sp.StartTime, sp.EndTime = normTime(sp.StartTime), normTime(sp.EndTime)
	if len(sp.RetrievedDocs) == 0 {
		sp.RetrievedDocs = nil
	}
	if len(sp.CitedDocs) == 0 {
		sp.CitedDocs = nil
	}
	if len(sp.Attributes) == 0 {
		sp.Attributes = nil
	}
	if len(sp.ResourceAttributes) == 0 {
		sp.ResourceAttributes = nil
	}
	if len(sp.ScopeAttributes) == 0 {
		sp.ScopeAttributes = nil
	}
	if len(sp.Events) == 0 {
		sp.Events = nil
	} else {
		ev := make([]store.Event, len(sp.Events))
		for i, e := range sp.Events {
			e.Time = normTime(e.Time)
			if len(e.Attributes) == 0 {
				e.Attributes = nil
			}
			ev[i] = e
		}
		sp.Events = ev
	}
	if len(sp.Links) == 0 {
		sp.Links = nil
	} else {
		ls := make([]store.Link, len(sp.Links))
		for i, l := range sp.Links {
			if len(l.Attributes) == 0 {
				l.Attributes = nil
			}
			ls[i] = l
		}
		sp.Links = ls
	}
	return sp
}

// diffSpans describes every difference between two span lists, field by
// field; "" when they are equal.
func diffSpans(want, got []store.Span) string {
	var b strings.Builder
	if len(want) != len(got) {
		fmt.Fprintf(&b, "span count: want %d, got %d\n", len(want), len(got))
		fmt.Fprintf(&b, "  want ids: %v\n  got ids:  %v\n", spanIDs(want), spanIDs(got))
		return b.String()
	}
	for i := range want {
		w, g := normSpan(want[i]), normSpan(got[i])
		prefix := fmt.Sprintf("span[%d] %s/%s", i, w.TraceID, w.SpanID)
		diffValue(&b, prefix, reflect.ValueOf(w), reflect.ValueOf(g))
	}
	return b.String()
}

func spanIDs(spans []store.Span) []string {
	ids := make([]string, len(spans))
	for i, sp := range spans {
		ids[i] = sp.TraceID[:min(8, len(sp.TraceID))] + "/" + sp.SpanID
	}
	return ids
}

var timeType = reflect.TypeOf(time.Time{})

// diffValue writes one line per differing leaf, naming its path and both
// values with their Go types (so 3 vs 3.0 is visible).
func diffValue(b *strings.Builder, path string, w, g reflect.Value) {
	if !w.IsValid() || !g.IsValid() {
		if w.IsValid() != g.IsValid() {
			fmt.Fprintf(b, "%s: want %s, got %s\n", path, show(w), show(g))
		}
		return
	}
	if w.Type() != g.Type() {
		fmt.Fprintf(b, "%s: want %s, got %s\n", path, show(w), show(g))
		return
	}
	if w.Type() == timeType {
		wt, gt := w.Interface().(time.Time), g.Interface().(time.Time)
		if !wt.Equal(gt) {
			fmt.Fprintf(b, "%s: want %s, got %s\n", path, wt.Format(time.RFC3339Nano), gt.Format(time.RFC3339Nano))
		}
		return
	}
	switch w.Kind() {
	case reflect.Struct:
		for i := 0; i < w.NumField(); i++ {
			if !w.Type().Field(i).IsExported() {
				continue
			}
			diffValue(b, path+"."+w.Type().Field(i).Name, w.Field(i), g.Field(i))
		}
	case reflect.Pointer:
		if w.IsNil() || g.IsNil() {
			if w.IsNil() != g.IsNil() {
				fmt.Fprintf(b, "%s: want %s, got %s\n", path, show(w), show(g))
			}
			return
		}
		diffValue(b, path, w.Elem(), g.Elem())
	case reflect.Interface:
		if w.IsNil() || g.IsNil() {
			if w.IsNil() != g.IsNil() {
				fmt.Fprintf(b, "%s: want %s, got %s\n", path, show(w), show(g))
			}
			return
		}
		diffValue(b, path, w.Elem(), g.Elem())
	case reflect.Map:
		if w.IsNil() != g.IsNil() {
			fmt.Fprintf(b, "%s: want %s, got %s\n", path, show(w), show(g))
			return
		}
		keys := map[string]reflect.Value{}
		for _, k := range append(w.MapKeys(), g.MapKeys()...) {
			keys[fmt.Sprint(k.Interface())] = k
		}
		names := make([]string, 0, len(keys))
		for n := range keys {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			k := keys[n]
			diffValue(b, fmt.Sprintf("%s[%q]", path, n), w.MapIndex(k), g.MapIndex(k))
		}
	case reflect.Slice, reflect.Array:
		if w.Kind() == reflect.Slice && w.IsNil() != g.IsNil() {
			fmt.Fprintf(b, "%s: want %s, got %s\n", path, show(w), show(g))
			return
		}
		if w.Len() != g.Len() {
			fmt.Fprintf(b, "%s: want %s, got %s\n", path, show(w), show(g))
			return
		}
		for i := 0; i < w.Len(); i++ {
			diffValue(b, fmt.Sprintf("%s[%d]", path, i), w.Index(i), g.Index(i))
		}
	default:
		if !reflect.DeepEqual(w.Interface(), g.Interface()) {
			fmt.Fprintf(b, "%s: want %s, got %s\n", path, show(w), show(g))
		}
	}
}

func show(v reflect.Value) string {
	if !v.IsValid() {
		return "<absent>"
	}
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && !v.IsNil() {
		return "&" + show(v.Elem())
	}
	return fmt.Sprintf("%#v (%s)", v.Interface(), v.Type())
}

// normSummary puts a summary in comparable form (times in UTC, empty lists
// nil).
func normSummary(s store.TraceSummary) store.TraceSummary {
	s.Start, s.End = normTime(s.Start), normTime(s.End)
	if len(s.AgentNames) == 0 {
		s.AgentNames = nil
	}
	if len(s.Models) == 0 {
		s.Models = nil
	}
	return s
}

// diffSummaries compares two ordered summary lists.
func diffSummaries(want, got []store.TraceSummary) string {
	var b strings.Builder
	if len(want) != len(got) {
		fmt.Fprintf(&b, "trace count: want %d, got %d\n  want: %v\n  got:  %v\n", len(want), len(got), summaryIDs(want), summaryIDs(got))
		return b.String()
	}
	for i := range want {
		if want[i].TraceID != got[i].TraceID {
			fmt.Fprintf(&b, "order differs at %d\n  want: %v\n  got:  %v\n", i, summaryIDs(want), summaryIDs(got))
			return b.String()
		}
	}
	for i := range want {
		diffValue(&b, fmt.Sprintf("trace[%d] %s", i, want[i].TraceID), reflect.ValueOf(normSummary(want[i])), reflect.ValueOf(normSummary(got[i])))
	}
	return b.String()
}

func summaryIDs(s []store.TraceSummary) []string {
	ids := make([]string, len(s))
	for i, t := range s {
		ids[i] = t.TraceID[:min(8, len(t.TraceID))]
	}
	return ids
}
