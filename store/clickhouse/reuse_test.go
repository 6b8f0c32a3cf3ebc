package clickhouse_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/loomwork/loomwork/internal/chlocal/chtest"
	"github.com/loomwork/loomwork/internal/testtier"
	"github.com/loomwork/loomwork/store"
	"github.com/loomwork/loomwork/store/storetest"
)

// WriteSpans recycles its column buffers and JSON arena between batches.
// This proves that a batch never inherits values from an earlier, larger
// one (events, attributes, resource maps left in a reused slot), nor from a
// batch that was rejected half-encoded.
func TestEachBatchStoresOnlyItsOwnValuesAfterEarlierBatches(t *testing.T) {
	testtier.Slow(t)
	// Values checked batch after batch, one writer: the pooled buffers'
	// concurrency is race-checked by four writers sharing them.
	testtier.NoRace(t, "TestFourConcurrentWritersStoreEverySpanOnce")
	t.Parallel() // a database of its own on the shared server
	srv := chtest.Start(t)
	s, _ := openFresh(t, srv)
	ctx := store.WithDefaultProject(context.Background())

	// A: 4,000 spans with attributes, shared resources and some events,
	// large enough that every String column is presized.
	a := storetest.GenerateTraces(400, 10, 11)
	withEvents := 0
	for _, sp := range a {
		if len(sp.Events) > 0 {
			withEvents++
		}
	}
	if withEvents == 0 || a[0].Attributes == nil || a[0].ResourceAttributes == nil {
		t.Fatal("generated batch lacks events, attributes or resources; the test would prove nothing")
	}
	if err := s.WriteSpans(ctx, a); err != nil {
		t.Fatal(err)
	}

	// Rejected half-way: its first spans are encoded into a pooled batch.
	bad := storetest.GenerateTraces(100, 10, 12)
	bad[700].TraceID = "not-hex"
	if err := s.WriteSpans(ctx, bad); err == nil {
		t.Fatal("batch with an invalid trace id was accepted")
	}

	// B: fewer spans, every one stripped of attributes, resource,
	// events and links, in the slots A's spans used.
	b := storetest.GenerateTraces(200, 10, 13)
	for i := range b {
		b[i].Attributes, b[i].ResourceAttributes, b[i].Events, b[i].Links = nil, nil, nil, nil
		b[i].StatusMessage = ""
	}
	if err := s.WriteSpans(ctx, b); err != nil {
		t.Fatal(err)
	}

	for _, batch := range []struct {
		name  string
		spans []store.Span
	}{{"A", a}, {"B", b}} {
		want := map[string]store.Span{}
		for _, sp := range batch.spans {
			want[sp.TraceID+"/"+sp.SpanID] = sp
		}
		seen := map[string]bool{}
		for _, sp := range batch.spans {
			if seen[sp.TraceID] {
				continue
			}
			seen[sp.TraceID] = true
			got, err := s.GetTrace(ctx, sp.TraceID)
			if err != nil {
				t.Fatalf("batch %s: get trace %s: %v", batch.name, sp.TraceID, err)
			}
			for _, g := range got {
				w, ok := want[g.TraceID+"/"+g.SpanID]
				if !ok {
					t.Fatalf("batch %s: trace %s holds span %s that was never written", batch.name, g.TraceID, g.SpanID)
				}
				if !sameAttrs(w.Attributes, g.Attributes) || !sameAttrs(w.ResourceAttributes, g.ResourceAttributes) ||
					len(w.Events) != len(g.Events) || len(w.Links) != len(g.Links) || w.StatusMessage != g.StatusMessage {
					t.Fatalf("batch %s: span %s/%s read back as attrs %v resource %v, %d events, %d links, status %q;\nwant attrs %v resource %v, %d events, %d links, status %q",
						batch.name, g.TraceID, g.SpanID, g.Attributes, g.ResourceAttributes, len(g.Events), len(g.Links), g.StatusMessage,
						w.Attributes, w.ResourceAttributes, len(w.Events), len(w.Links), w.StatusMessage)
				}
			}
		}
	}
}

func sameAttrs(want, got store.Attributes) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	return reflect.DeepEqual(want, got)
}
