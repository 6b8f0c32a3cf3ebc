package store

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestCheckStorableNamesWhatNoStoreCanHold(t *testing.T) {
	ok := func() Span {
		at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
		return Span{TraceID: "0123456789abcdef0123456789abcdef", SpanID: "0123456789abcdef", StartTime: at, EndTime: at.Add(time.Second)}
	}
	deep := func(n int) any {
		var v any = 1.5
		for i := range n {
			if i%2 == 0 {
				v = []any{v}
			} else {
				v = map[string]any{"k": v}
			}
		}
		return v
	}
	sp := ok()
	sp.Attributes = Attributes{"deep": deep(MaxAttributeDepth)}
	sp.ResourceAttributes = Attributes{"service.name": "a"}
	if err := CheckStorable(&sp); err != nil {
		t.Fatalf("a span at every limit: %v", err)
	}
	for _, tc := range []struct {
		want string
		edit func(sp *Span)
	}{
		{`trace_id: "0123456789ABCDEF0123456789ABCDEF" is not 32 lower-case hex digits (bad character at offset 10)`, func(sp *Span) { sp.TraceID = strings.ToUpper(sp.TraceID) }},
		{`span_id: "0000000000000000": the all-zero id is invalid`, func(sp *Span) { sp.SpanID = "0000000000000000" }},
		{`parent_span_id: "abc" is not 16 lower-case hex digits`, func(sp *Span) { sp.ParentSpanID = "abc" }},
		{"start_time: 2262-04-11T23:47:16.854775807Z is outside the storable range (1900-01-01 to 2262-04-11); is it unset?", func(sp *Span) { sp.StartTime = time.Unix(0, math.MaxInt64).UTC() }},
		{"end_time: 1899-12-31T23:59:59.999999999Z is outside", func(sp *Span) { sp.EndTime = StorableFrom.Add(-1) }},
		{`attribute "deep": nested deeper than 32 levels of arrays and maps`, func(sp *Span) { sp.Attributes = Attributes{"deep": deep(MaxAttributeDepth + 1)} }},
		{`resource attribute "r": nested deeper`, func(sp *Span) { sp.ResourceAttributes = Attributes{"r": deep(50)} }},
		{`scope attribute "s": nested deeper`, func(sp *Span) { sp.ScopeAttributes = Attributes{"s": deep(2000)} }},
		{`event 1 attribute "e": nested deeper`, func(sp *Span) { sp.Events = []Event{{}, {Attributes: Attributes{"e": deep(33)}}} }},
		{`link 0 attribute "l": nested deeper`, func(sp *Span) { sp.Links = []Link{{Attributes: Attributes{"l": deep(40)}}} }},
	} {
		sp := ok()
		tc.edit(&sp)
		err := CheckStorable(&sp)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !errors.Is(err, ErrUnstorable) {
			t.Errorf("CheckStorable: %v; want an error starting %q, wrapping ErrUnstorable", err, tc.want)
		}
		var c StorableChecker
		if cerr := c.Check(&sp); cerr == nil || cerr.Error() != err.Error() || !errors.Is(cerr, ErrUnstorable) {
			t.Errorf("StorableChecker.Check: %v; want CheckStorable's %v", cerr, err)
		}
	}
	if err := CheckStorable(&Span{TraceID: ok().TraceID, SpanID: ok().SpanID, StartTime: StorableUntil.Add(-1), EndTime: StorableFrom}); err != nil {
		t.Errorf("the range's ends: %v", err)
	}
}

// A StorableChecker checks a resource or scope map that spans share once,
// and still refuses every span of a shared map that is too deep, and each
// span's own attributes, whatever its neighbours were.
func TestStorableCheckerAgreesAcrossABatch(t *testing.T) {
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	span := func(res, scope, attrs Attributes) Span {
		return Span{TraceID: "0123456789abcdef0123456789abcdef", SpanID: "0123456789abcdef", StartTime: at, EndTime: at,
			ResourceAttributes: res, ScopeAttributes: scope, Attributes: attrs}
	}
	var tooDeep any = "x"
	for range MaxAttributeDepth + 1 {
		tooDeep = []any{tooDeep}
	}
	good, bad := Attributes{"service.name": "a"}, Attributes{"deep": tooDeep}
	batch := []Span{
		span(good, good, nil), span(good, good, bad), span(good, good, nil),
		span(bad, good, nil), span(bad, good, nil), span(good, bad, nil), span(good, bad, nil),
		span(nil, nil, nil), span(good, nil, Attributes{"ok": []any{1.0}}), span(good, good, nil),
	}
	var c StorableChecker
	for i := range batch {
		want, got := CheckStorable(&batch[i]), c.Check(&batch[i])
		if (want == nil) != (got == nil) || want != nil && want.Error() != got.Error() {
			t.Errorf("span %d: StorableChecker %v, CheckStorable %v", i, got, want)
		}
	}
}
