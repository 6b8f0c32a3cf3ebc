package clickhouse

import (
	"errors"
	"fmt"
	"testing"

	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// encode applies CheckStorable's depth rule while it encodes the span's
// own, resource and scope attributes (AppendStorableJSON) instead of
// checking the span first: a batch holding a span nested too deep, in any
// of its maps or shared by its neighbours, is still refused whole with the
// error CheckStorable gives, naming the span, and wrapping
// store.ErrUnstorable.
func TestEncodeRefusesWhatCheckStorableRefuses(t *testing.T) {
	var tooDeep any = "x"
	for range store.MaxAttributeDepth + 1 {
		tooDeep = map[string]any{"k": tooDeep}
	}
	deep := store.Attributes{"deep": tooDeep}
	for _, tc := range []struct {
		name string
		edit func(sp *store.Span)
	}{
		{"attributes", func(sp *store.Span) { sp.Attributes = deep }},
		{"attributes besides a typed one", func(sp *store.Span) {
			sp.Attributes = store.Attributes{"deep": tooDeep, "gen_ai.operation.name": sp.Operation}
		}},
		{"resource", func(sp *store.Span) { sp.ResourceAttributes = deep }},
		{"scope", func(sp *store.Span) { sp.ScopeAttributes = deep }},
		{"event", func(sp *store.Span) { sp.Events = []store.Event{{Time: sp.StartTime, Attributes: deep}} }},
		{"link", func(sp *store.Span) {
			sp.Links = []store.Link{{TraceID: sp.TraceID, SpanID: sp.SpanID, Attributes: deep}}
		}},
		{"bad id", func(sp *store.Span) { sp.SpanID = "xyz" }},
		{"attributes and an event", func(sp *store.Span) {
			sp.Attributes = deep
			sp.Events = []store.Event{{Time: sp.StartTime, Attributes: deep}}
		}},
	} {
		for _, elide := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/elide=%v", tc.name, elide), func(t *testing.T) {
				spans := storetest.GenerateTraces(3, 4, 7)
				const bad = 5
				tc.edit(&spans[bad])
				want := store.CheckStorable(&spans[bad])
				if want == nil {
					t.Fatal("CheckStorable accepts the span the test spoiled")
				}
				err := new(PreparedSpans).encodeWith(spans, elide)
				if err == nil || err.Error() != invalidSpan(bad, &spans[bad], want).Error() || !errors.Is(err, store.ErrUnstorable) {
					t.Fatalf("encode: %v\nwant: %v (wrapping store.ErrUnstorable)", err, invalidSpan(bad, &spans[bad], want))
				}
			})
		}
	}
}
